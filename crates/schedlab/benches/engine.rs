//! Events per second of the whole simulator on two machines, and draws
//! per second of the exponential distribution (every `exp:` duration of
//! a workload is one).
//!
//! `cargo bench -p schedlab` prints time per run and, through Throughput,
//! events (or draws) per second ("elem/s").

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use schedlab::engine::rng::{Rng, Stream};
use schedlab::workload::scenario::Scenario;
use schedlab::sched::sim::Sim;

/// The 4-CPU mix; tests/integration/golden.rs records its event hash.
const MIXED_4CPU: &str = include_str!("scenarios/mixed-4cpu.toml");

const EPYC_20K: &str = r#"
seed = 1
duration = "1s"
[machine]
preset = "epyc-2s-192"
[[workload]]
kind = "hog"
count = 20000
run = "exp:2ms"
sleep = "exp:4ms"
"#;

fn build(text: &str) -> Sim {
    let s = Scenario::parse(text, "bench.toml", &[]).expect("bench scenario parses");
    let mut sim = schedlab::workload::world::build(&s, "bench.toml").expect("bench scenario builds");
    sim.check_invariants = false;
    sim
}

fn events(text: &str) -> u64 {
    let mut sim = build(text);
    sim.run();
    sim.engine.events_processed()
}

fn bench(c: &mut Criterion) {
    for (name, text) in [("mixed-4cpu-1s", MIXED_4CPU), ("epyc-2s-192-20k-tasks-1s", EPYC_20K)] {
        let mut g = c.benchmark_group("simulate");
        g.sample_size(10);
        g.throughput(Throughput::Elements(events(text)));
        g.bench_function(name, |b| {
            b.iter_batched(|| build(text), |mut sim| { sim.run(); sim.engine.events_processed() }, criterion::BatchSize::PerIteration)
        });
        g.finish();
    }
}

fn draws(c: &mut Criterion) {
    let mut g = c.benchmark_group("draw");
    g.throughput(Throughput::Elements(1000));
    g.bench_function("exp-1000", |b| {
        let mut r = Rng::new(1, Stream::Task(0));
        b.iter(|| (0..1000).fold(0u64, |sum, _| sum.wrapping_add(r.exponential(2_000_000))))
    });
    g.finish();
}

criterion_group!(benches, bench, draws);
criterion_main!(benches);
