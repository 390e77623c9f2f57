//! Issue 11's acceptance: every published scx scheduler (fetched as
//! `crate:NAME@VERSION`) and the kernel's own sched_ext examples (from the
//! upstream sources `scripts/kernel-src` unpacks), on
//! `scenarios/mixed.toml` and `scenarios/cyclictest-normal.toml`, each on
//! 4 CPUs, 32 CPUs (amd-16c) and `epyc-2s-192`:
//!
//! - loaded with its shipped loader profile, wrapped in `check::Checked`;
//! - still enabled at the end of the scenario (its full duration), with no
//!   exit, no callback-order violation, the simulator's invariants checked
//!   after every event (debug builds; on up to 32 CPUs, see
//!   [`invariants_on`]), no task left without CPU time for 500 ms, and
//!   every CPU running tasks where the scenario keeps every CPU busy
//!   (mixed: two threads per CPU);
//! - byte-identical on a second run (event hash and the whole JSON).
//!
//! [`SCHEDULERS`] is the single table of what is expected. An entry marked
//! `Known` must fail somewhere: when it passes every cell the test fails
//! and asks for the entry to be flipped to `Pass`, so the table stays
//! honest.
//!
//! Each cell runs in a child process (this test binary, running the
//! ignored test `ecosystem::cell` with `SCHEDLAB_ECOSYSTEM_CELL` set), two
//! at a time per CPU core: a scheduler that crashes the host takes down
//! only its cell. `SCHEDLAB_ECOSYSTEM=bpfland,central` runs a subset;
//! `SCHEDLAB_ECOSYSTEM_JOBS=N` sets the parallelism.
//!
//! `cargo test` runs the 4-CPU column only (`SCHEDLAB_ECOSYSTEM_MACHINES`
//! defaults to `4cpu`): the 32- and 192-CPU cells cost tens of CPU
//! minutes in a debug build, more than CI's budget. The whole matrix is
//! `SCHEDLAB_ECOSYSTEM_MACHINES=all cargo test --release -p schedlab --test
//! integration ecosystem::matrix`. A `Known` entry is only required to fail
//! somewhere when every machine ran.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::Command;
use std::rc::Rc;
use std::time::Instant;

use schedlab::results::report::Results;
use schedlab::sched::ext::check::Checked;
use schedlab::sched::ext::ops::ExtOps;
use schedlab::sched::ext::EnableState;
use schedlab::sched::sim::Sim;
use schedlab::workload::scenario::Scenario;
use schedlab_host::world;

use crate::manifest;

/// What a scheduler is expected to do in every cell of the matrix.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expect {
    /// Enabled to the end, checked and deterministic in every cell.
    Pass,
    /// Fails in at least one cell today, for this reason.
    Known(&'static str),
}
use Expect::{Known, Pass};

/// One scheduler of the matrix.
pub struct Entry {
    /// `crate:NAME@VERSION`, or `kernel:scx_NAME` for the kernel's example
    /// `scx_NAME.bpf.c` in `scripts/kernel-src`'s tools/sched_ext.
    pub sched: &'static str,
    /// Its own command line (`scheduler.args`, read by its loader profile).
    pub args: &'static str,
    /// Whether it spreads tasks over the CPUs: every CPU must run tasks on
    /// mixed.toml and no task may wait 500 ms for its first run (scx_cpu0
    /// runs everything on CPU 0 by design, 20 ms slices each).
    pub spreads: bool,
    pub expect: Expect,
}

const fn e(sched: &'static str, expect: Expect) -> Entry {
    Entry { sched, args: "", spreads: true, expect }
}

/// The single table of the acceptance matrix: flip an entry to `Pass` when
/// its scheduler runs (the test says which ones to flip).
pub const SCHEDULERS: &[Entry] = &[
    e("crate:scx_bpfland@1.1.4", Pass),
    e("crate:scx_beerland@1.1.4", Pass),
    e("crate:scx_cosmos@1.1.7", Pass),
    e("crate:scx_flash@1.1.4", Pass),
    e("crate:scx_tickless@1.1.4", Pass),
    e("crate:scx_flow@2.2.5", Known("mixed.toml on amd-16c and epyc-2s-192: tasks in a CPU's lane starve behind a sched_yield() loop (flow_yield refills the yielder's slice to 50 us on every yield, so balance keeps prev and never dispatches, as the kernel's balance_one does; flow's watchdog ejects it at 7.5 s)")),
    e("crate:scx_rusty@1.1.4", Pass),
    e("crate:scx_p2dq@1.1.4", Pass),
    e("crate:scx_lavd@1.1.4", Pass),
    e("crate:scx_layered@1.1.4", Pass),
    e("kernel:scx_simple", Pass),
    e("kernel:scx_qmap", Pass),
    e("kernel:scx_central", Pass),
    Entry { sched: "kernel:scx_cpu0", args: "", spreads: false, expect: Pass },
    e("kernel:scx_sdt", Pass),
    e("kernel:scx_pair", Pass),
];

/// The scenarios, run to their end (mixed: 2 s, cyclictest-normal: 5 s).
pub const SCENARIOS: &[&str] = &["mixed.toml", "cyclictest-normal.toml"];

/// The machines: 4 CPUs, 32 CPUs (2 LLCs, SMT) and 192 CPUs (2 nodes).
pub const MACHINES: &[&str] = &["4cpu", "amd-16c", "epyc-2s-192"];

/// The cell a child process runs: "SCHED|SCENARIO|PRESET|ARGS|ALL_CPUS".
const CELL_ENV: &str = "SCHEDLAB_ECOSYSTEM_CELL";

fn scenario_path(name: &str) -> PathBuf {
    manifest().join("../../scenarios").join(name)
}

/// tools/sched_ext of the kernel source `scripts/kernel-src` unpacked
/// (fetched once; offline afterwards).
fn kernel_src() -> Result<PathBuf, String> {
    let script = manifest().join("../../scripts/kernel-src");
    let out = Command::new("bash").arg(&script).output().map_err(|e| format!("{}: {e}", script.display()))?;
    if !out.status.success() {
        return Err(format!("scripts/kernel-src failed: {}", String::from_utf8_lossy(&out.stderr).trim()));
    }
    let p = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    if !p.is_dir() {
        return Err(format!("scripts/kernel-src printed {}, which is not a directory", p.display()));
    }
    Ok(p)
}

/// The scenario's `scheduler.sched` for an entry.
fn sched_name(sched: &str, kernel: Option<&PathBuf>) -> Result<String, String> {
    match sched.strip_prefix("kernel:") {
        Some(n) => {
            let k = kernel.ok_or("no kernel source")?;
            Ok(k.join(format!("{n}.bpf.c")).display().to_string())
        }
        None => Ok(sched.to_string()),
    }
}

/// Whether a cell checks the simulator's invariants after every event: on
/// machines of up to 32 CPUs (the checks walk every CPU and queued task, so
/// on `epyc-2s-192` they cost more than the simulation itself);
/// `SCHEDLAB_ECOSYSTEM_INVARIANTS=all` / `none` changes that.
fn invariants_on(cpus: usize) -> bool {
    match std::env::var("SCHEDLAB_ECOSYSTEM_INVARIANTS").as_deref() {
        Ok("all") => true,
        Ok("none") => false,
        _ => cpus <= 32,
    }
}

/// One run of a cell, as the child measures it.
struct RunOutcome {
    problems: Vec<String>,
    hash: u64,
    json: String,
    events: u64,
    wall_s: f64,
    /// CPU time of this thread for the run (the machine may be shared).
    cpu_s: f64,
}

/// CPU time the calling thread has used, in seconds (/proc/thread-self/schedstat).
fn thread_cpu_s() -> f64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|t| t.split_whitespace().next().and_then(|n| n.parse::<u64>().ok()))
        .map_or(0.0, |ns| ns as f64 / 1e9)
}

/// Builds the scenario on `preset` without its scheduler, then attaches the
/// scheduler as `world::build` does (source, loader profile, load, the
/// loader's set-up), wrapped in `Checked`, and runs it to the end.
fn run_once(sched: &str, scenario: &str, preset: &str, args: &str, all_cpus: bool) -> Result<RunOutcome, String> {
    let file = scenario_path(scenario);
    let file_s = file.display().to_string();
    let text = std::fs::read_to_string(&file).map_err(|e| format!("{file_s}: {e}"))?;
    let sets = [format!("machine.preset={preset:?}")];
    let mut sc = Scenario::parse(&text, &file_s, &sets).map_err(|e| e.to_string())?;
    let mut spec = sc.scheduler.clone();
    spec.kind = "ext".into();
    spec.sched = Some(sched.to_string());
    spec.args = (!args.is_empty()).then(|| args.to_string());
    sc.scheduler.kind = "eevdf".into();
    sc.scheduler.sched = None;
    let t0 = Instant::now();
    let c0 = thread_cpu_s();
    let mut sim: Sim = world::build(&sc, &file_s).map_err(|e| e.to_string())?;
    sim.check_invariants = cfg!(debug_assertions) && invariants_on(sim.nr_cpus());
    let path = world::ext_source(sched, &file_s).map_err(|e| e.to_string())?;
    let plan = world::loader_plan(&spec, sched, &path, &sim.topo, &file_s).map_err(|e| e.to_string())?;
    let mut cfg = schedlab_host::LoadConfig::default();
    if let Some(p) = &plan {
        schedlab_host::profile::apply::load_config(p, &mut cfg);
    }
    let h = schedlab_host::load_owned(&path, &cfg).map_err(|e| format!("loading {sched}: {e}"))?;
    sim.scx.origin = h.origin().cloned();
    if let Some(p) = &plan {
        schedlab_host::profile::apply::before_attach(&h, &mut sim, p).map_err(|e| e.to_string())?;
    }
    let ops = Rc::new(Checked::new(h));
    sim.scx_enable(ops.clone()).map_err(|e| format!("the kernel refused to load {sched}: {e}"))?;
    sim.run();
    let wall_s = t0.elapsed().as_secs_f64();
    let cpu_s = thread_cpu_s() - c0;
    let mut problems = Vec::new();
    if sim.scx.state != EnableState::Enabled {
        problems.push(format!("not enabled at the end ({:?}): {:?}", sim.scx.state, sim.scx.exit));
    }
    if sim.now() < sc.duration.0 {
        problems.push(format!("the run stopped at {} ns of {}", sim.now(), sc.duration.0));
    }
    let v = ops.violations();
    if !v.is_empty() {
        problems.push(format!("{} callback-order violations, first: {}", v.len(), v[0]));
    }
    let r = Results::collect(&sim, scenario, ops.name());
    if all_cpus && scenario == "mixed.toml" {
        let idle: Vec<u32> = r.cpus.iter().filter(|c| c.busy_ns == 0).map(|c| c.cpu).collect();
        if !idle.is_empty() {
            problems.push(format!("{} of {} CPUs never ran a task (first: CPU {})", idle.len(), r.cpus.len(), idle[0]));
        }
    }
    // Tasks that existed for half a second and never ran were starved (a
    // fork-storm child created just before the end may not have run yet).
    let end = sim.now();
    let never: Vec<&str> =
        sim.tasks.iter().filter(|t| t.stats.runtime_ns == 0 && t.created_at + 500_000_000 <= end).map(|t| t.name.as_str()).collect();
    if all_cpus && !never.is_empty() {
        problems.push(format!("{} tasks never ran in their first 500 ms (first: {})", never.len(), never[0]));
    }
    let json = serde_json::to_string(&r).map_err(|e| e.to_string())?;
    Ok(RunOutcome { problems, hash: sim.engine.hash(), json, events: r.events, wall_s, cpu_s })
}

/// A child's verdict, one line on stdout.
const VERDICT: &str = "ECOSYSTEM_CELL";

/// One cell, twice: the problems of the first run, and whether the second
/// is byte-identical.
fn run_cell(cell: &str) -> String {
    let f: Vec<&str> = cell.split('|').collect();
    let [sched, scenario, preset, args, all] = f[..] else {
        return format!("bad cell {cell:?}");
    };
    let all_cpus = all == "1";
    let a = match run_once(sched, scenario, preset, args, all_cpus) {
        Ok(a) => a,
        Err(e) => return e.replace('\n', " "),
    };
    let mut problems = a.problems.clone();
    let timing = format!("{} events, cpu {:.1}s wall {:.1}s; second run ", a.events, a.cpu_s, a.wall_s);
    let mut second = (0.0, 0.0);
    if problems.is_empty() {
        match run_once(sched, scenario, preset, args, all_cpus) {
            Ok(b) => {
                second = (b.cpu_s, b.wall_s);
                if b.hash != a.hash || b.json != a.json {
                    problems.push(format!("a second run differs (event hash {:016x} vs {:016x})", a.hash, b.hash));
                }
            }
            Err(e) => problems.push(format!("second run: {e}")),
        }
    }
    let what = if problems.is_empty() { "ok".to_string() } else { problems.join("; ").replace('\n', " ") };
    format!("{what} [{timing}cpu {:.1}s wall {:.1}s]", second.0, second.1)
}

/// The child's side: runs the cell its environment names (by default the
/// table's first scheduler on 4 CPUs with mixed.toml) and fails with the
/// problems found.
#[test]
#[ignore = "one cell of the acceptance matrix; `ecosystem::matrix` runs every cell through it"]
fn cell() {
    let c = std::env::var(CELL_ENV).unwrap_or_else(|_| format!("{}|mixed.toml|4cpu||1", SCHEDULERS[0].sched));
    let verdict = run_cell(&c);
    println!("{VERDICT} {verdict}");
    assert!(verdict.starts_with("ok ["), "{c}: {verdict}");
}

struct CellResult {
    entry: usize,
    label: String,
    verdict: String,
}

fn ok(v: &str) -> bool {
    v.starts_with("ok [")
}

#[test]
fn matrix() {
    let only: Option<Vec<String>> = std::env::var("SCHEDLAB_ECOSYSTEM").ok().map(|v| v.split(',').map(|s| s.trim().to_string()).collect());
    let picked: Vec<usize> = (0..SCHEDULERS.len())
        .filter(|&i| only.as_ref().is_none_or(|o| o.iter().any(|n| SCHEDULERS[i].sched.contains(n.as_str()))))
        .collect();
    assert!(!picked.is_empty(), "SCHEDLAB_ECOSYSTEM={only:?} names no scheduler of the table");
    let kernel = if picked.iter().any(|&i| SCHEDULERS[i].sched.starts_with("kernel:")) {
        Some(kernel_src().unwrap_or_else(|e| panic!("the kernel's sched_ext examples: {e}")))
    } else {
        None
    };
    // Fetch every crate once, here, so the cells never race to fetch.
    let mut cells: Vec<(usize, String, String)> = Vec::new();
    let scen0 = scenario_path(SCENARIOS[0]).display().to_string();
    for &i in &picked {
        let en = &SCHEDULERS[i];
        let name = sched_name(en.sched, kernel.as_ref()).unwrap();
        if let Err(e) = world::ext_source(&name, &scen0) {
            panic!("{}: {e}", en.sched);
        }
    }
    let machines_env = std::env::var("SCHEDLAB_ECOSYSTEM_MACHINES").ok();
    let machines: Vec<&str> = match machines_env.as_deref() {
        Some("all") => MACHINES.to_vec(),
        Some(list) => list.split(',').map(str::trim).filter(|m| !m.is_empty()).collect(),
        None => vec!["4cpu"],
    };
    for m in &machines {
        assert!(MACHINES.contains(m), "SCHEDLAB_ECOSYSTEM_MACHINES names {m:?}; the matrix's machines are {MACHINES:?} (or `all`)");
    }
    let every_machine = MACHINES.iter().all(|m| machines.contains(m));
    // Small machines first: every scheduler's quick verdicts come early.
    for m in &machines {
        for sc in SCENARIOS {
            for &i in &picked {
                let en = &SCHEDULERS[i];
                let name = sched_name(en.sched, kernel.as_ref()).unwrap();
                let cell = format!("{name}|{sc}|{m}|{}|{}", en.args, en.spreads as u8);
                cells.push((i, format!("{} {sc} {m}", en.sched), cell));
            }
        }
    }
    let jobs: usize = std::env::var("SCHEDLAB_ECOSYSTEM_JOBS")
        .ok()
        .and_then(|j| j.parse().ok())
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get()))
        .max(1);
    let exe = std::env::current_exe().unwrap();
    let t0 = Instant::now();
    let queue = std::sync::Mutex::new(cells.into_iter());
    let results = std::sync::Mutex::new(Vec::<CellResult>::new());
    std::thread::scope(|s| {
        for _ in 0..jobs {
            s.spawn(|| loop {
                let Some((entry, label, cell)) = queue.lock().unwrap().next() else { break };
                let out = Command::new(&exe)
                    .args(["ecosystem::cell", "--exact", "--ignored", "--nocapture", "--test-threads=1"])
                    .env(CELL_ENV, &cell)
                    .output()
                    .expect("run the test binary");
                let stdout = String::from_utf8_lossy(&out.stdout);
                // (The harness may print `test ecosystem::cell ... ` before it on the same line.)
                let verdict = match stdout.lines().find_map(|l| l.find(VERDICT).map(|at| &l[at + VERDICT.len()..])) {
                    Some(v) => v.trim().to_string(),
                    None => {
                        let err = String::from_utf8_lossy(&out.stderr);
                        let tail: Vec<&str> = err.lines().rev().take(3).collect();
                        format!("the cell's process died ({}): {}", out.status, tail.into_iter().rev().collect::<Vec<_>>().join(" / "))
                    }
                };
                eprintln!("ecosystem: {label}: {verdict}");
                results.lock().unwrap().push(CellResult { entry, label, verdict });
            });
        }
    });
    let mut results = results.into_inner().unwrap();
    results.sort_by(|a, b| (a.entry, &a.label).cmp(&(b.entry, &b.label)));
    let cpu: f64 = results.iter().flat_map(|r| r.verdict.split("cpu ").skip(1).filter_map(|x| x.split('s').next()?.parse::<f64>().ok())).sum();
    eprintln!("ecosystem: {} cells in {:.0}s with {jobs} jobs, {cpu:.0}s of CPU in the runs", results.len(), t0.elapsed().as_secs_f64());
    let mut failures = Vec::new();
    let done: BTreeSet<usize> = results.iter().map(|r| r.entry).collect();
    for i in done {
        let en = &SCHEDULERS[i];
        let mine: Vec<&CellResult> = results.iter().filter(|r| r.entry == i).collect();
        let bad: Vec<&&CellResult> = mine.iter().filter(|r| !ok(&r.verdict)).collect();
        match en.expect {
            Pass => failures.extend(bad.iter().map(|r| format!("{}: {}", r.label, r.verdict))),
            Known(why) if bad.is_empty() && every_machine => failures.push(format!(
                "{} passes every cell now (it was a known failure: {why}); mark it Pass in ecosystem::SCHEDULERS",
                en.sched
            )),
            Known(_) => {}
        }
    }
    assert!(failures.is_empty(), "{} problem(s):\n{}", failures.len(), failures.join("\n"));
}
