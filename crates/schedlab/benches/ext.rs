//! sched_ext speed (issue 3, section 5): the hosted `simple` scheduler
//! (schedulers/simple.bpf.c, compiled natively) on 128 CPUs with 1,280
//! tasks, half CPU-bound with 100 ms runs, half running 0.5 ms and
//! sleeping 2 ms. Goal: at least 2 M simulated context switches per
//! wall-second, single-threaded.
//!
//! `cargo bench -p schedlab --bench ext` reports two groups:
//! - `ext/switches`: Throughput = simulated context switches (sum of
//!   `rq.stats.switches`), so criterion's "elem/s" is switches per second;
//! - `ext/events`: Throughput = engine events, "elem/s" is events per second.
//!
//! Setup (building the world, compiling or loading the scheduler object)
//! is outside the measured time. `SCHEDLAB_BENCH_SIM_MS` changes the
//! simulated duration (default 1000 ms).

use std::path::Path;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use schedlab::workload::scenario::Scenario;
use schedlab::sched::ext::host::{self, LoadConfig};
use schedlab::sched::sim::Sim;

fn scenario(ms: u64) -> String {
    format!(
        r#"
seed = 1
duration = "{ms}ms"
[machine]
cpus = 128
[[workload]]
kind = "hog"
name = "cpu"
count = 640
run = "100ms"
sleep = "100us"
[[workload]]
kind = "hog"
name = "io"
count = 640
run = "500us"
sleep = "2ms"
"#
    )
}

fn sim_ms() -> u64 {
    std::env::var("SCHEDLAB_BENCH_SIM_MS").ok().and_then(|v| v.parse().ok()).unwrap_or(1000)
}

fn cfg() -> LoadConfig {
    LoadConfig { cache_dir: Some(std::env::temp_dir().join("schedlab-bench-cache")), ..LoadConfig::default() }
}

/// A ready-to-run world with hosted simple loaded.
fn build(text: &str) -> Sim {
    let s = Scenario::parse(text, "bench.toml", &[]).expect("bench scenario parses");
    let mut sim = schedlab::workload::world::build(&s, "bench.toml").expect("bench scenario builds");
    sim.check_invariants = false;
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../schedulers/simple.bpf.c");
    let ops = host::load(&src, &cfg()).unwrap_or_else(|e| panic!("{e}"));
    sim.scx_enable(ops).unwrap_or_else(|e| panic!("{e}"));
    sim
}

/// CPU time of the calling thread, in seconds.
fn thread_cpu_s() -> f64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes the timespec it is given.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

fn switches(sim: &Sim) -> u64 {
    sim.rqs.iter().map(|rq| rq.stats.switches).sum()
}

/// (context switches, events) of one run, checking it stayed in ext.
fn run(text: &str) -> (u64, u64) {
    let mut sim = build(text);
    sim.run();
    assert!(sim.scx.exit.is_none(), "simple exited: {:?}", sim.scx.exit);
    (switches(&sim), sim.engine.events_processed())
}

fn bench(c: &mut Criterion) {
    let text = scenario(sim_ms());
    let (sw, ev) = run(&text);
    // One run outside criterion, timed by wall clock and by this thread's
    // CPU time (the figure to quote on a loaded machine).
    let mut sim = build(&text);
    let (t, cpu0) = (std::time::Instant::now(), thread_cpu_s());
    sim.run();
    let (wall, cpu) = (t.elapsed().as_secs_f64(), thread_cpu_s() - cpu0);
    eprintln!(
        "ext/simple-128cpu-1280: {sw} context switches, {ev} events per simulated {} ms; run: {wall:.3} s wall, {cpu:.3} s CPU: {:.2} M switches/s, {:.2} M events/s (CPU time)",
        sim_ms(),
        sw as f64 / cpu / 1e6,
        ev as f64 / cpu / 1e6
    );
    for (group, n) in [("ext/switches", sw), ("ext/events", ev)] {
        let mut g = c.benchmark_group(group);
        g.sample_size(10);
        g.throughput(Throughput::Elements(n));
        g.bench_function("simple-128cpu-1280tasks", |b| {
            b.iter_batched(
                || build(&text),
                |mut sim| {
                    sim.run();
                    sim.engine.events_processed()
                },
                BatchSize::PerIteration,
            )
        });
        g.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);

