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
//! The `ext/flat-switches` group (issue 14) is the peer comparison's
//! workload on flat single-LLC machines of 128, 512, 1,024 and 4,096 CPUs, each
//! imported from generated `lscpu -p` output, hz = 250, C-states off: 10
//! tasks per CPU, half 100 ms hogs, half 0.5 ms run / 2 ms sleep. Its cost
//! per switch should not grow with the machine; the simulated time shrinks
//! as the machine grows (1000 ms x 128 / CPUs, at least 250 ms) to keep a
//! run's length in check.
//!
//! The `ext/published-switches` group runs published scx schedulers
//! (scx_bpfland, scx_lavd, scx_cosmos; fetched from crates.io once and
//! cached, as `--sched crate:NAME@VER` does) on the same mix on 128 flat
//! CPUs for 300 ms: the kfuncs, maps and cpumask calls real schedulers
//! make, which `simple` hardly touches. `SCHEDLAB_BENCH_PUBLISHED` names
//! others (`crate:scx_flash@1.1.4,...`) or `none`.
//!
//! The `ext/startup` group (issue 14) is what a run costs before its
//! first event: parsing the scenario, importing the 128-CPU flat machine,
//! building 1,280 tasks, finding, loading and attaching hosted `simple`
//! from the compile cache (compiled once, outside the measurement), as
//! `schedlab run` does. Dropping the world is outside the measured time.
//!
//! In the other groups, setup (building the world, compiling or loading
//! the scheduler object) is outside the measured time. `SCHEDLAB_BENCH_SIM_MS` changes the
//! simulated duration (default 1000 ms, for 128 CPUs).

use std::path::Path;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use schedlab::workload::scenario::Scenario;
use schedlab_host::{self as host, LoadConfig};
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

/// `lscpu -p` of a flat machine: one socket, one node, one L3, a core per CPU.
fn flat_lscpu(cpus: usize) -> std::path::PathBuf {
    let path = std::env::temp_dir().join(format!("schedlab-bench-flat-{cpus}.lscpu"));
    let mut text = String::from("# CPU,Core,Socket,Node,,L1d,L1i,L2,L3\n");
    for c in 0..cpus {
        text.push_str(&format!("{c},{c},0,0,,{c},{c},{c},0\n"));
    }
    // Written under a name of this process's own and renamed into place,
    // so that two bench processes running side by side (old and new
    // builds compared) never read each other's half-written file.
    let tmp = path.with_extension(format!("lscpu.{}", std::process::id()));
    std::fs::write(&tmp, text).expect("write the bench machine");
    std::fs::rename(&tmp, &path).expect("move the bench machine into place");
    path
}

/// The peer comparison's rt-app-like mix on a flat machine of `cpus` CPUs.
fn flat_scenario(cpus: usize, ms: u64) -> String {
    format!(
        r#"
seed = 1
duration = "{ms}ms"
[machine]
lscpu = {lscpu:?}
hz = 250
cstates = false
[[workload]]
kind = "hog"
name = "cpu"
count = {half}
run = "100ms"
sleep = "100us"
[[workload]]
kind = "hog"
name = "io"
count = {half}
run = "500us"
sleep = "2ms"
"#,
        lscpu = flat_lscpu(cpus).display().to_string(),
        half = cpus * 5
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
    let mut g = c.benchmark_group("ext/flat-switches");
    g.sample_size(10);
    for cpus in [128, 512, 1024, 4096] {
        let text = flat_scenario(cpus, (sim_ms() * 128 / cpus as u64).max(sim_ms() / 4).max(1));
        let (sw, ev) = run(&text);
        eprintln!("ext/flat-switches/simple-{cpus}cpu: {sw} context switches, {ev} events per run");
        g.throughput(Throughput::Elements(sw));
        g.bench_function(format!("simple-{cpus}cpu-{}tasks", cpus * 10), |b| {
            b.iter_batched(
                || build(&text),
                |mut sim| {
                    sim.run();
                    sim.engine.events_processed()
                },
                BatchSize::PerIteration,
            )
        });
    }
    g.finish();
}

/// The published schedulers of the `ext/published-switches` group
/// (`SCHEDLAB_BENCH_PUBLISHED`: a comma-separated list of `crate:` specs
/// instead, or `none`).
const PUBLISHED: &[&str] = &["crate:scx_bpfland@1.1.4", "crate:scx_lavd@1.1.4", "crate:scx_cosmos@1.1.7"];

/// A published scheduler on the peer comparison's mix, 128 flat CPUs,
/// built as the CLI builds it (source fetched once and cached, its loader
/// profile, compiled object cached).
fn published_scenario(spec: &str, ms: u64) -> String {
    format!("{}[scheduler]\nkind = \"ext\"\nsched = {spec:?}\n", flat_scenario(128, ms))
}

fn build_published(text: &str) -> Result<Sim, String> {
    let s = Scenario::parse(text, "bench.toml", &[]).map_err(|e| e.to_string())?;
    let mut sim = host::world::build(&s, "bench.toml").map_err(|e| e.to_string())?;
    sim.check_invariants = false;
    Ok(sim)
}

/// The published schedulers (`ext/published-switches`): what hosting costs
/// with the kfuncs, maps and cpumasks real schedulers use, which `simple`
/// hardly touches. A scheduler that cannot be fetched (no network, no
/// cache) is reported and skipped.
fn published(c: &mut Criterion) {
    let list = std::env::var("SCHEDLAB_BENCH_PUBLISHED").ok();
    let specs: Vec<String> = match list.as_deref() {
        Some("none") => Vec::new(),
        Some(l) => l.split(',').map(|s| s.trim().to_string()).filter(|s| !s.is_empty()).collect(),
        None => PUBLISHED.iter().map(|s| s.to_string()).collect(),
    };
    let ms = (sim_ms() * 3 / 10).max(1);
    let mut g = c.benchmark_group("ext/published-switches");
    g.sample_size(10);
    for spec in specs {
        let text = published_scenario(&spec, ms);
        let mut sim = match build_published(&text) {
            Ok(sim) => sim,
            Err(e) => {
                eprintln!("ext/published-switches: {spec} skipped: {e}");
                continue;
            }
        };
        sim.run();
        assert!(sim.scx.exit.is_none(), "{spec} exited: {:?}", sim.scx.exit);
        let (sw, ev) = (switches(&sim), sim.engine.events_processed());
        eprintln!("ext/published-switches/{spec}: {sw} context switches, {ev} events per {ms} ms simulated on 128 flat CPUs");
        g.throughput(Throughput::Elements(sw));
        let name = spec.trim_start_matches("crate:").replace('@', "-");
        g.bench_function(format!("{name}-128cpu-1280tasks"), |b| {
            b.iter_batched(
                || build_published(&text).expect("built once already"),
                |mut sim| {
                    sim.run();
                    sim.engine.events_processed()
                },
                BatchSize::PerIteration,
            )
        });
    }
    g.finish();
}

/// Start-up (`ext/startup`): scenario text to a world ready for its first
/// event, with hosted `simple` loaded from the compile cache.
fn startup(c: &mut Criterion) {
    let text = format!("{}[scheduler]\nkind = \"ext\"\nsched = \"simple\"\n", flat_scenario(128, 1));
    // The first build compiles simple into the cache if it is not there.
    drop(build_published(&text).unwrap_or_else(|e| panic!("{e}")));
    let mut g = c.benchmark_group("ext/startup");
    g.sample_size(50);
    g.bench_function("simple-128cpu-1280tasks", |b| {
        b.iter_batched(|| (), |()| build_published(&text).expect("built once already"), BatchSize::PerIteration)
    });
    g.finish();
}

criterion_group!(benches, bench, published, startup);
criterion_main!(benches);

