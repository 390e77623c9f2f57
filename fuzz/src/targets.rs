//! The fuzz targets: each takes arbitrary bytes and must return without
//! panicking, whatever the bytes. Bad input is an `Err` the user sees as a
//! one-line error, never a crash. `scripts/fuzz` runs them under AFL
//! (src/bin/*.rs); `crates/schedlab-host/tests/integration/fuzz_corpus.rs`
//! replays the kept corpus (`fuzz/corpus/TARGET/`) through them in
//! `cargo test`, so every input that once found a bug stays a test.
//!
//! This file is shared by path between the fuzz crate and the integration
//! tests: it may use only `schedlab`, `schedlab_host` and `std`.

use std::cell::RefCell;
use std::path::PathBuf;
use std::rc::Rc;

use schedlab::engine::{Cpu, TaskId};
use schedlab::machine::topology::Topology;
use schedlab::sched::ext::abi::{CpumaskC, DsqIterC};
use schedlab::sched::ext::check::Checked;
use schedlab::sched::ext::kfuncs as kf;
use schedlab::sched::ext::ops::{dsq_id, ExtOps, Op};
use schedlab_host::profile::{args, Profile};
use schedlab::sched::sim::Sim;
use schedlab::workload::scenario::{Scenario, WorkloadSpec};
use schedlab::workload::estimate::estimate;
use schedlab_host::world;

/// Largest machine and task count a fuzzed scenario is simulated on (a
/// bigger one is still parsed and built, not run: the fuzzer looks for
/// crashes, not for slow but correct runs).
const RUN_CPUS: usize = 64;
const RUN_TASKS: usize = 256;
/// Simulated time a fuzzed scenario runs for, at most.
const RUN_NS: u64 = 3_000_000;
/// Largest estimated footprint a fuzzed scenario is built with.
const FUZZ_BYTES: u64 = 256 << 20;

fn text(data: &[u8]) -> String {
    String::from_utf8_lossy(data).into_owned()
}

/// Builds a parsed scenario (its sched_ext scheduler, if any, replaced by
/// EEVDF: compiling C is the ext_ops target's business, not this one's)
/// and runs it briefly with the invariant checks on.
fn build_and_run(mut s: Scenario, file: &str) {
    if s.scheduler.kind == "ext" {
        s.scheduler = Scenario::parse("duration = \"1ms\"", "fuzz.toml", &[]).expect("the minimal scenario").scheduler;
    }
    let Ok(topo) = schedlab::workload::world::topology(&s, file) else { return };
    // Big scenarios are refused or built, not run: keep the fuzzer's memory small.
    if estimate(&s, topo.nr_cpus()).bytes() > FUZZ_BYTES {
        return;
    }
    let Ok(mut sim) = world::build_on(&s, file, topo) else { return };
    if sim.nr_cpus() > RUN_CPUS || sim.tasks.len() > RUN_TASKS {
        return;
    }
    sim.check_invariants = true;
    let end = s.duration.0.min(RUN_NS);
    sim.run_until(end);
}

/// A scenario TOML with `--set` overrides: the input is the TOML text, then
/// optionally a NUL byte and one `PATH=VALUE` per line.
pub fn scenario(data: &[u8]) {
    let (toml, sets) = match data.iter().position(|&b| b == 0) {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &data[data.len()..]),
    };
    let sets: Vec<String> = text(sets).lines().filter(|l| !l.is_empty()).map(str::to_string).collect();
    if let Ok(s) = Scenario::parse(&text(toml), "fuzz.toml", &sets) {
        build_and_run(s, "fuzz.toml");
    }
}

/// An rt-app JSON description (`kind = "rtapp"`, `json = '...'`) on a
/// 4-CPU machine.
pub fn rtapp(data: &[u8]) {
    let base = "duration = \"10ms\"\n[machine]\npreset = \"4cpu\"\n[[workload]]\nkind = \"rtapp\"\njson = \"{}\"\n";
    let mut s = Scenario::parse(base, "fuzz.toml", &[]).expect("the rt-app base scenario");
    if let Some(WorkloadSpec::Rtapp(r)) = s.workloads.first_mut() {
        r.json = Some(text(data));
    }
    build_and_run(s, "fuzz.toml");
}

/// `lscpu -p` output.
pub fn lscpu(data: &[u8]) {
    if let Ok(t) = Topology::from_lscpu(&text(data)) {
        check_topology(&t);
    }
}

/// A copy of `/sys/devices/system/cpu`: the input is a list of files, each
/// `relative/path NUL content NUL`, written under a scratch directory.
pub fn sysfs(data: &[u8]) {
    let root = scratch_dir();
    let cpu = root.join("cpu");
    let mut parts = data.split(|&b| b == 0);
    while let (Some(path), Some(content)) = (parts.next(), parts.next()) {
        let rel = text(path);
        // Only plain relative paths inside the copy (no "..", no absolute paths).
        if rel.is_empty() || rel.starts_with('/') || rel.split('/').any(|c| c.is_empty() || c == "." || c == "..") || rel.len() > 200 {
            continue;
        }
        let p = cpu.join(&rel);
        if let Some(dir) = p.parent() {
            if std::fs::create_dir_all(dir).is_err() {
                continue;
            }
        }
        let _ = std::fs::write(&p, content);
    }
    let _ = std::fs::create_dir_all(&cpu);
    if let Ok(t) = Topology::from_sysfs(&cpu) {
        check_topology(&t);
    }
    let _ = std::fs::remove_dir_all(&root);
}

/// A directory of its own per process, emptied before each input.
fn scratch_dir() -> PathBuf {
    let d = std::env::temp_dir().join(format!("schedlab-fuzz-sysfs-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    let _ = std::fs::create_dir_all(&d);
    d
}

/// An imported machine must be usable: sched domains build, and a short
/// simulation on it runs.
fn check_topology(t: &Topology) {
    if t.nr_cpus() == 0 || t.nr_cpus() > RUN_CPUS {
        return;
    }
    let mut s = Scenario::parse("duration = \"2ms\"\n[[workload]]\nkind = \"hog\"\ncount = 4\nrun = \"exp:200us\"\nsleep = \"exp:100us\"\n", "fuzz.toml", &[])
        .expect("the topology base scenario");
    s.machine.preset = None;
    let Ok(mut sim) = world::build_on(&s, "fuzz.toml", t.clone()) else { return };
    sim.check_invariants = true;
    sim.run_until(2_000_000);
}

/// One line of tracefs text output (`trace_pipe`), per input line.
pub fn tracefs(data: &[u8]) {
    for line in text(data).lines() {
        let _ = schedlab::import::tracefs_line::parse_line(line);
    }
}

/// A trace for `schedlab import-trace` (issue 15 §1): format detection,
/// the reader, the task model, and the scenario it becomes.
pub fn import_trace(data: &[u8]) {
    if let Ok(events) = schedlab::import::read(data) {
        imported(&events);
    }
}

/// A Perfetto trace, straight to its reader (protobuf decoding,
/// compact_sched), then as `import_trace`.
pub fn import_perfetto(data: &[u8]) {
    if let Ok(events) = schedlab::import::perfetto::read(data) {
        imported(&events);
    }
}

/// `perf script` text, straight to its reader, then as `import_trace`.
pub fn import_perf(data: &[u8]) {
    if let Ok(events) = schedlab::import::perf_script::read(&text(data)) {
        imported(&events);
    }
}

/// What import-trace does with a trace's events: the model over all of it
/// and over a window (which holds no more CPU time), and the scenario,
/// which must parse and build, and come out the same twice.
fn imported(events: &[schedlab::import::events::SchedEvent]) {
    let all = schedlab::import::model::derive(events, None);
    // Summed wide: CPU time over many CPUs of a trace spanning centuries
    // of timestamps passes u64.
    let cpu: u128 = all.iter().map(|t| t.cpu_ns() as u128).sum();
    let (first, last) = (events[0].ts_ns, events[events.len() - 1].ts_ns);
    let mid = first + (last - first) / 2;
    let part = schedlab::import::model::derive(events, Some((first, mid)));
    assert!(part.iter().map(|t| t.cpu_ns() as u128).sum::<u128>() <= cpu, "a window holds no more CPU time than the whole trace");
    let keep = |_: &schedlab::import::model::TaskModel| true;
    let o = schedlab::import::replay::Options { window: None, keep: &keep, source: "fuzz", name: "fuzz", groups: &Default::default() };
    let (toml, n) = schedlab::import::replay::scenario(events, &o);
    assert_eq!(toml, schedlab::import::replay::scenario(events, &o).0, "the same events give the same scenario");
    if n == 0 || n > 64 || events.iter().any(|e| e.cpu >= 64) {
        return;
    }
    let s = Scenario::parse(&toml, "imported.toml", &[]).unwrap_or_else(|e| panic!("the imported scenario does not parse: {e}\n{toml}"));
    if let Err(e) = schedlab::workload::world::build(&s, "imported.toml") {
        panic!("the imported scenario does not build: {e}\n{toml}");
    }
}

/// A loader profile, then scheduler arguments for it: the profile TOML,
/// optionally a NUL byte and the arguments, one per line.
pub fn profile(data: &[u8]) {
    let (toml, rest) = match data.iter().position(|&b| b == 0) {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &data[data.len()..]),
    };
    if let Ok(p) = Profile::parse("fuzz-profile.toml", &text(toml)) {
        let argv: Vec<String> = text(rest).lines().map(str::to_string).collect();
        let _ = args::parse(&p, &argv);
    }
}

/// A byte stream the fuzzed scheduler reads its decisions from; once it
/// runs dry every read is 0, which selects each callback's sane default.
struct Bytes {
    data: Vec<u8>,
    at: usize,
}

impl Bytes {
    fn u8(&mut self) -> u8 {
        let b = self.data.get(self.at).copied().unwrap_or(0);
        self.at += 1;
        b
    }
    fn u64(&mut self) -> u64 {
        (0..8).fold(0, |v, i| v | (self.u8() as u64) << (8 * i))
    }
    /// A value that is usually interesting: small, a built-in DSQ id, or any.
    fn id(&mut self) -> u64 {
        match self.u8() % 8 {
            0 => dsq_id::GLOBAL,
            1 => dsq_id::LOCAL,
            2 => dsq_id::LOCAL_ON | (self.u8() as u64 % 80),
            3 => dsq_id::BYPASS,
            4 | 5 => self.u8() as u64 % 4,
            6 => dsq_id::INVALID,
            _ => self.u64(),
        }
    }
    fn cpu(&mut self) -> i32 {
        match self.u8() % 4 {
            0 => -1,
            1 => self.u64() as i32,
            _ => (self.u8() % 80) as i32,
        }
    }
    fn flags(&mut self) -> u64 {
        if self.u8() % 4 == 0 {
            self.u64()
        } else {
            0
        }
    }
}

/// A sched_ext scheduler whose every decision, and every kfunc it calls with
/// whatever arguments, comes from the fuzz input. The kernel's argument
/// checks must turn every bad call into an error exit (the scheduler is
/// ejected, the run goes on under fair), never a panic, and the
/// per-task callback order (`Checked`) must hold throughout.
struct FuzzOps {
    b: RefCell<Bytes>,
}

impl FuzzOps {
    /// A few kfunc calls chosen by the input, from any callback.
    fn calls(&self, sim: &mut Sim, p: Option<TaskId>) {
        let n = self.b.borrow_mut().u8() % 4;
        for _ in 0..n {
            let op = self.b.borrow_mut().u8();
            let mut b = self.b.borrow_mut();
            match op % 20 {
                0 => {
                    if let Some(p) = p {
                        let (id, slice, f) = (b.id(), b.u64() % 50_000_000, b.flags());
                        drop(b);
                        kf::scx_bpf_dsq_insert(sim, p, id, slice, f);
                    }
                }
                1 => {
                    if let Some(p) = p {
                        let (id, slice, vt, f) = (b.id(), b.u64() % 50_000_000, b.u64(), b.flags());
                        drop(b);
                        kf::scx_bpf_dsq_insert_vtime(sim, p, id, slice, vt, f);
                    }
                }
                2 => {
                    let (id, f) = (b.id(), b.flags());
                    drop(b);
                    kf::scx_bpf_dsq_move_to_local(sim, id, f);
                }
                3 => {
                    let (cpu, f) = (b.cpu(), b.flags() & 7);
                    drop(b);
                    kf::scx_bpf_kick_cpu(sim, cpu, f);
                }
                4 => {
                    let (id, node) = (b.id(), b.cpu());
                    drop(b);
                    kf::scx_bpf_create_dsq(sim, id, node);
                }
                5 => {
                    let id = b.id();
                    drop(b);
                    kf::scx_bpf_destroy_dsq(sim, id);
                }
                6 => {
                    let id = b.id();
                    drop(b);
                    kf::scx_bpf_dsq_nr_queued(sim, id);
                    kf::scx_bpf_dsq_peek(sim, id);
                }
                7 => {
                    drop(b);
                    kf::scx_bpf_reenqueue_local(sim);
                }
                8 => {
                    if let Some(p) = p {
                        let (prev, wf) = (b.cpu(), b.flags());
                        drop(b);
                        kf::scx_bpf_select_cpu_dfl(sim, p, prev, wf);
                    }
                }
                9 => {
                    let (bits, f, node) = (b.u64(), b.flags(), b.cpu());
                    drop(b);
                    let mut m = CpumaskC::default();
                    m.bits[0] = bits;
                    let node = (node >= 0).then_some(node % 4);
                    kf::scx_bpf_pick_idle_cpu(sim, &m, f, node);
                    kf::scx_bpf_pick_any_cpu(sim, &m, f, node);
                }
                10 => {
                    let cpu = b.cpu();
                    drop(b);
                    kf::scx_bpf_test_and_clear_cpu_idle(sim, cpu);
                    kf::scx_bpf_cpu_curr(sim, cpu);
                    kf::scx_bpf_cpu_node(sim, cpu);
                    kf::scx_bpf_cpuperf_cur(sim, cpu);
                }
                11 => {
                    let (cpu, perf) = (b.cpu(), b.u64() as u32);
                    drop(b);
                    kf::scx_bpf_cpuperf_set(sim, cpu, perf);
                }
                12 => {
                    drop(b);
                    kf::scx_bpf_dispatch_nr_slots(sim);
                    kf::scx_bpf_dispatch_cancel(sim);
                }
                13 => {
                    let (id, to, f) = (b.id(), b.id(), b.flags());
                    let vtime = b.u8() % 2 == 0;
                    drop(b);
                    let mut it = DsqIterC::default();
                    if kf::bpf_iter_scx_dsq_new(sim, &mut it, id, f) == 0 {
                        if let Some(t) = kf::bpf_iter_scx_dsq_next(sim, &mut it) {
                            if vtime {
                                kf::scx_bpf_dsq_move_vtime(sim, &mut it, t, to, 0);
                            } else {
                                kf::scx_bpf_dsq_move(sim, &mut it, t, to, 0);
                            }
                        }
                    }
                    kf::bpf_iter_scx_dsq_destroy(sim, &mut it);
                }
                14 => {
                    let (timer, at) = (b.u8() as u64 % 3, b.u64() % 10_000_000);
                    drop(b);
                    let now = kf::scx_bpf_now(sim);
                    kf::scx_timer_start(sim, timer, now + at);
                }
                15 => {
                    let (id, f) = (b.id(), b.flags());
                    drop(b);
                    kf::scx_bpf_dsq_reenq(sim, id, f);
                }
                16 => {
                    let pid = b.u64() as i32 % 4096;
                    drop(b);
                    if let Some(t) = kf::scx_bpf_task_from_pid(sim, pid) {
                        kf::scx_bpf_task_cpu(sim, t);
                        kf::scx_bpf_task_running(sim, t);
                    }
                }
                17 if b.u8() == 0xff => {
                    drop(b);
                    kf::scx_bpf_error(sim, "fuzz: scx_bpf_error".into());
                }
                _ => {}
            }
        }
    }
}

impl ExtOps for FuzzOps {
    fn name(&self) -> &str {
        "fuzz"
    }
    fn has(&self, op: Op) -> bool {
        // Which callbacks exist is part of the input too (the first 4 bytes).
        let mask = u32::from_le_bytes(std::array::from_fn(|i| self.b.borrow().data.get(i).copied().unwrap_or(0xff)));
        !matches!(op, Op::Exit) && mask & (1 << (op as u32 % 32)) != 0
    }
    fn init(&self, sim: &mut Sim) -> i32 {
        self.b.borrow_mut().at = 4;
        kf::scx_bpf_create_dsq(sim, 0, -1);
        self.calls(sim, None);
        0
    }
    fn select_cpu(&self, sim: &mut Sim, p: TaskId, prev: Cpu, wf: u64) -> Cpu {
        let choice = self.b.borrow_mut().u8() % 8;
        self.calls(sim, Some(p));
        match choice {
            0 => self.b.borrow_mut().cpu() as Cpu,
            1 => {
                let (cpu, idle) = kf::scx_bpf_select_cpu_dfl(sim, p, prev as i32, wf);
                if idle {
                    kf::scx_bpf_dsq_insert(sim, p, dsq_id::LOCAL, 3_000_000, 0);
                }
                cpu as Cpu
            }
            _ => prev,
        }
    }
    fn enqueue(&self, sim: &mut Sim, p: TaskId, f: u64) {
        let choice = self.b.borrow_mut().u8() % 8;
        self.calls(sim, Some(p));
        match choice {
            0 => {}
            1 => {
                let id = self.b.borrow_mut().id();
                kf::scx_bpf_dsq_insert(sim, p, id, 3_000_000, f);
            }
            2 => {
                kf::scx_bpf_dsq_insert_vtime(sim, p, 0, 3_000_000, sim.now(), f);
            }
            _ => {
                kf::scx_bpf_dsq_insert(sim, p, dsq_id::GLOBAL, 3_000_000, f);
            }
        }
    }
    fn dequeue(&self, sim: &mut Sim, p: TaskId, _f: u64) {
        self.calls(sim, Some(p));
    }
    fn dispatch(&self, sim: &mut Sim, _cpu: Cpu, prev: Option<TaskId>) {
        self.calls(sim, prev);
        if !kf::scx_bpf_dsq_move_to_local(sim, 0, 0) {
            kf::scx_bpf_dsq_move_to_local(sim, dsq_id::GLOBAL, 0);
        }
    }
    fn tick(&self, sim: &mut Sim, p: TaskId) {
        self.calls(sim, Some(p));
    }
    fn runnable(&self, sim: &mut Sim, p: TaskId, _f: u64) {
        self.calls(sim, Some(p));
    }
    fn running(&self, sim: &mut Sim, p: TaskId) {
        self.calls(sim, Some(p));
    }
    fn stopping(&self, sim: &mut Sim, p: TaskId, _runnable: bool) {
        self.calls(sim, Some(p));
    }
    fn quiescent(&self, sim: &mut Sim, p: TaskId, _f: u64) {
        self.calls(sim, Some(p));
    }
    fn set_weight(&self, sim: &mut Sim, p: TaskId, _w: u32) {
        self.calls(sim, Some(p));
    }
    fn set_cpumask(&self, sim: &mut Sim, p: TaskId) {
        self.calls(sim, Some(p));
    }
    fn update_idle(&self, sim: &mut Sim, _cpu: Cpu, _idle: bool) {
        self.calls(sim, None);
    }
    fn init_task(&self, sim: &mut Sim, p: TaskId, _fork: bool) -> i32 {
        self.calls(sim, Some(p));
        if self.b.borrow_mut().u8() == 0xfe {
            -12
        } else {
            0
        }
    }
    fn enable(&self, sim: &mut Sim, p: TaskId) {
        self.calls(sim, Some(p));
    }
    fn timer_fired(&self, sim: &mut Sim, _timer: u64) {
        self.calls(sim, None);
    }
}

const EXT_MACHINES: [&str; 3] = ["1cpu", "4cpu", "ryzen-3900x"];

/// A fuzzed sched_ext scheduler (see [`FuzzOps`]) on a small mixed
/// workload: hogs that sleep, a cyclictest thread, a fork storm, a
/// hackbench group.
pub fn ext_ops(data: &[u8]) {
    let preset = EXT_MACHINES[data.get(4).copied().unwrap_or(0) as usize % EXT_MACHINES.len()];
    let toml = format!(
        "duration = \"30ms\"\n[machine]\npreset = \"{preset}\"\n\
         [[workload]]\nkind = \"hog\"\ncount = 6\nnice = 3\nrun = \"exp:500us\"\nsleep = \"exp:300us\"\n\
         [[workload]]\nkind = \"hog\"\ncount = 2\ncpus = \"0\"\n\
         [[workload]]\nkind = \"cyclictest\"\nthreads = 1\ninterval = \"500us\"\n\
         [[workload]]\nkind = \"stress\"\nstressor = \"fork\"\nworkers = 1\n\
         [[workload]]\nkind = \"hackbench\"\ngroups = 1\nfds = 2\nloops = 5\n"
    );
    let s = Scenario::parse(&toml, "fuzz.toml", &[]).expect("the ext_ops base scenario");
    let mut sim = world::build(&s, "fuzz.toml").expect("the ext_ops base scenario builds");
    sim.check_invariants = true;
    let ops = Rc::new(Checked::new(FuzzOps { b: RefCell::new(Bytes { data: data.to_vec(), at: 4 }) }));
    if sim.scx_enable(ops.clone()).is_err() {
        return;
    }
    sim.run();
    let v = ops.violations();
    assert!(v.is_empty(), "callback order broken: {v:?}");
}
