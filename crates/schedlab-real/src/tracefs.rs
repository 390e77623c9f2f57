//! `run --real --trace`: the kernel's own scheduler trace of a real run,
//! recorded through tracefs and written as the same Perfetto trace a
//! simulation writes.
//!
//! A private ftrace instance (`instances/schedlab-<pid>`) keeps the global
//! buffer untouched. It uses the `mono` trace clock, which is
//! CLOCK_MONOTONIC, the clock of the run's common start, so a kernel
//! timestamp minus the start is the run's time. A timer thread turns
//! tracing on 2 ms before the start and off after the deadline (or as soon
//! as the run ends). The `trace` file is then read in the kernel's text
//! format, which has microsecond timestamps.
//!
//! Pids: the scenario's tasks get the simulator's numbering (task id + 1,
//! names and processes from the scenario) so a real and a simulated trace
//! of one scenario line up. Every other thread keeps its pid and comm,
//! except a pid that is one of ours (1..=tasks, e.g. init or kthreadd),
//! which is shown shifted by PID_MAX_LIMIT (no real pid reaches it). CPUs
//! are the scenario's (host CPUs renumbered as real mode does); events on
//! CPUs the run does not use are left out.

use std::collections::BTreeMap;
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};

use super::{sys, Plan, RealError};
use schedlab::engine::TaskId;
use schedlab::sched::task::Task;
use schedlab::import::tracefs_line::{parse_line, Event, Line, Thr, EVENTS};
use schedlab::results::trace::{trace_pid, PerfettoWriter, TaskGroup, ThreadInfo, Waker, Who};

/// What `--trace` asks of a real run.
#[derive(Clone, Debug)]
pub struct TraceRequest {
    /// The Perfetto file to write.
    pub path: PathBuf,
    /// Keep only events in [from, to) of the run's time.
    pub window: Option<(u64, u64)>,
}

/// What the kernel recorded and what was written.
#[derive(Clone, Debug, Default)]
pub struct TraceStats {
    /// The Perfetto file written.
    pub path: PathBuf,
    /// Events read from the kernel's buffer, from the common start on.
    pub recorded: u64,
    /// Events written to the Perfetto file (inside `--trace-window`).
    pub written: u64,
    /// Events the kernel overwrote or dropped (per_cpu/cpuN/stats).
    pub lost: u64,
    /// sched_migrate_task events, and those of the scenario's tasks.
    pub migrations: u64,
    /// sched_migrate_task events of the scenario's tasks.
    pub task_migrations: u64,
    /// Threads in the trace that are not the scenario's tasks.
    pub other_threads: usize,
    /// The per-CPU ring buffer size used (buffer_size_kb).
    pub buffer_kb: u64,
}

impl TraceStats {
    /// What to tell the user, one line each.
    pub fn lines(&self) -> Vec<String> {
        let mut v = vec![format!(
            "kernel trace: {} events recorded, {} lost, {} written; {} migrations ({} of the scenario's tasks; Perfetto has no sched_migrate_task event); {} other threads",
            self.recorded, self.lost, self.written, self.migrations, self.task_migrations, self.other_threads
        )];
        if self.lost > 0 {
            v.push(format!("kernel trace: the buffer ({} kB per CPU) overflowed: shorten the run", self.buffer_kb));
        }
        v.push(format!("wrote {}", self.path.display()));
        v
    }
}

/// The largest pid the kernel can hand out (PID_MAX_LIMIT on 64-bit).
const PID_MAX_LIMIT: i64 = 1 << 22;

/// Real pids to trace pids (see the module documentation).
pub(crate) struct PidMap {
    ours: BTreeMap<i32, TaskId>,
    ntasks: i64,
}

impl PidMap {
    pub(crate) fn new(tids: &[i32]) -> Self {
        let ours = tids.iter().enumerate().filter(|(_, &t)| t > 0).map(|(i, &t)| (t, i as TaskId)).collect();
        PidMap { ours, ntasks: tids.len() as i64 }
    }
    pub(crate) fn task(&self, pid: i32) -> Option<TaskId> {
        self.ours.get(&pid).copied()
    }
    pub(crate) fn trace_pid(&self, pid: i32) -> i64 {
        match self.task(pid) {
            Some(t) => trace_pid(Some(t)),
            None if (1..=self.ntasks).contains(&(pid as i64)) => pid as i64 + PID_MAX_LIMIT,
            None => pid as i64,
        }
    }
}

/// sched_switch's prev_state letters as TASK_REPORT bits (R and the
/// preempted mark `+` are 0, as the simulator writes a preempted task).
fn state_bits(s: &str) -> i64 {
    s.chars()
        .map(|c| match c {
            'S' => 0x1,
            'D' => 0x2,
            'T' => 0x4,
            't' => 0x8,
            'X' => 0x10,
            'Z' => 0x20,
            'P' => 0x40,
            'I' => 0x80,
            _ => 0,
        })
        .fold(0, |a, b| a | b)
}

/// Turns the kernel's lines into Perfetto events: times from the common
/// start, CPUs and pids as the module documentation says.
pub(crate) struct Converter<'a> {
    pub out: PerfettoWriter,
    pub pids: PidMap,
    pub tasks: &'a [Task],
    pub start_ns: u64,
    /// Host CPU -> scenario CPU.
    pub cpu_map: &'a [usize],
    /// Process leader (lowest task id) of each tgid.
    leaders: BTreeMap<u32, TaskId>,
    others: std::collections::BTreeSet<i64>,
    pub stats: TraceStats,
    pub last_ns: u64,
    /// The task groups (autogroups) of the threads named so far: path ->
    /// (cpu.weight, trace pids).
    groups: BTreeMap<String, (u64, Vec<i64>)>,
    /// The scenario's tasks' group: this process's autogroup, which its
    /// workers inherit, unless the scenario has cgroups (then they run in
    /// cpu cgroups of their own, where no autogroup applies).
    own_group: Option<(String, u64)>,
}

impl<'a> Converter<'a> {
    pub(crate) fn new(out: PerfettoWriter, pids: PidMap, tasks: &'a [Task], start_ns: u64, cpu_map: &'a [usize]) -> Self {
        let mut leaders = BTreeMap::new();
        for (i, t) in tasks.iter().enumerate() {
            leaders.entry(t.tgid).or_insert(i as TaskId);
        }
        let own_group = if tasks.iter().all(|t| t.cgroup == "/") { autogroup_of(std::process::id() as i32) } else { None };
        Converter { out, pids, tasks, start_ns, cpu_map, leaders, others: Default::default(), stats: TraceStats::default(), last_ns: 0, groups: BTreeMap::new(), own_group }
    }

    fn cpu(&self, host: i64) -> Option<usize> {
        self.cpu_map.iter().position(|&c| c as i64 == host)
    }

    /// The thread as the trace shows it, named in the process tree once.
    fn who<'b>(&mut self, t: Thr<'b>) -> Who<'b>
    where
        'a: 'b,
    {
        let pid = self.pids.trace_pid(t.pid);
        if let Some(id) = self.pids.task(t.pid) {
            let task = &self.tasks[id as usize];
            if !self.out.is_described(pid) {
                let leader = self.leaders[&task.tgid];
                let process = self.tasks[leader as usize].name.clone();
                self.out.describe(ThreadInfo { tid: pid, name: task.name.clone(), tgid: trace_pid(Some(leader)), process, ppid: Some(1) });
                if let Some((path, w)) = &self.own_group {
                    self.groups.entry(path.clone()).or_insert((*w, Vec::new())).1.push(pid);
                }
            }
            return Who { pid, comm: &task.name, prio: t.prio };
        }
        if t.pid != 0 && self.others.insert(pid) {
            // Still alive: name its process too.
            if let Some(tgid) = proc_tgid(t.pid) {
                let process = std::fs::read_to_string(format!("/proc/{tgid}/comm")).map(|s| s.trim_end().to_string()).unwrap_or_else(|_| t.comm.to_string());
                self.out.describe(ThreadInfo { tid: pid, name: t.comm.to_string(), tgid: self.pids.trace_pid(tgid), process, ppid: None });
            }
            if let Some((path, w)) = autogroup_of(t.pid) {
                self.groups.entry(path).or_insert((w, Vec::new())).1.push(pid);
            }
        }
        Who { pid, comm: t.comm, prio: t.prio }
    }

    pub(crate) fn line(&mut self, l: &Line<'_>) {
        let (Some(ts), Some(cpu)) = (l.ts_ns.checked_sub(self.start_ns), self.cpu(l.cpu as i64)) else { return };
        self.stats.recorded += 1;
        self.last_ns = self.last_ns.max(ts);
        match l.ev {
            Event::Switch { prev, prev_state, next } => {
                let (p, n) = (self.who(prev), self.who(next));
                self.out.switch(ts, cpu, p, state_bits(prev_state), n);
            }
            Event::Wake { kind, task, target_cpu } => {
                let waker = self.who(Thr { comm: l.comm, pid: l.pid, prio: 120 }).pid;
                let t = self.who(task);
                let target = self.cpu(target_cpu).map_or(target_cpu, |c| c as i64);
                self.out.wake(ts, cpu, Waker { pid: waker, irq_flags: l.irq_flags }, kind, t, target);
            }
            Event::Migrate { task, .. } => {
                self.stats.migrations += 1;
                self.stats.task_migrations += self.pids.task(task.pid).is_some() as u64;
            }
            // Not enabled by a real run's recording.
            Event::Fork { .. } | Event::Exit { .. } => {}
        }
    }
}

/// The autogroup (CONFIG_SCHED_AUTOGROUP) the kernel schedules thread
/// `pid` in, as (path, cpu.weight), from /proc while it lives: its
/// session's, "/autogroup-N nice K" in /proc/PID/autogroup, which applies
/// while the thread is in the root cpu cgroup (task_wants_autogroup). None
/// when autogroups are off, for a kernel thread (no autogroup), a thread in
/// a cpu cgroup, or one that is gone.
fn autogroup_of(pid: i32) -> Option<(String, u64)> {
    if std::fs::read_to_string("/proc/sys/kernel/sched_autogroup_enabled").ok()?.trim() != "1" {
        return None;
    }
    let cgroups = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
    let entries: Vec<(&str, &str)> = cgroups.lines().filter_map(|l| l.split_once(':')?.1.split_once(':')).collect();
    let cpu_path = match entries.iter().find(|(c, _)| c.split(',').any(|x| x == "cpu")) {
        Some((_, p)) => *p,
        // cgroup v2: its path counts when the root enables the cpu controller.
        None => {
            let enabled = std::fs::read_to_string("/sys/fs/cgroup/cgroup.subtree_control").is_ok_and(|s| s.split_whitespace().any(|c| c == "cpu"));
            entries.iter().find(|(c, _)| c.is_empty()).map_or("/", |(_, p)| if enabled { p } else { "/" })
        }
    };
    if cpu_path != "/" {
        return None;
    }
    let ag = std::fs::read_to_string(format!("/proc/{pid}/autogroup")).ok()?;
    let (path, nice) = ag.trim().split_once(" nice ")?;
    let nice: i32 = nice.trim().parse().ok()?;
    // cpu.weight of the group's load weight (100 for nice 0's 1024).
    let w = schedlab::sched::task::PRIO_TO_WEIGHT[(nice + 20).clamp(0, 39) as usize] as u64;
    Some((path.to_string(), ((w * 100 + 512) / 1024).clamp(1, 10_000)))
}

/// A thread's process id, from /proc while it lives.
fn proc_tgid(pid: i32) -> Option<i32> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    s.lines().find_map(|l| l.strip_prefix("Tgid:")).and_then(|v| v.trim().parse().ok())
}

/// The private ftrace instance of one run. Dropping it stops tracing,
/// removes the instance and unmounts tracefs if this process mounted it.
pub(crate) struct Recording {
    root: PathBuf,
    inst: PathBuf,
    mounted: bool,
    /// Keeps the mount busy, so another schedlab's unmount cannot pull it away.
    pin: Option<std::fs::File>,
    buffer_kb: u64,
    out: Option<PerfettoWriter>,
    path: PathBuf,
    timer: Option<Timer>,
}

/// The thread that turns tracing on and off, and its cancel flag.
type Timer = (Arc<(Mutex<bool>, Condvar)>, std::thread::JoinHandle<()>);

/// The tracefs mount point, mounting it (root only) when nothing is mounted.
fn find_or_mount() -> Result<(PathBuf, bool), RealError> {
    let mounts = std::fs::read_to_string("/proc/mounts").unwrap_or_default();
    let points: Vec<&str> = mounts.lines().filter_map(|l| l.split(' ').nth(1).filter(|_| l.split(' ').nth(2) == Some("tracefs"))).collect();
    for want in ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"] {
        if points.contains(&want) {
            return Ok((want.into(), false));
        }
    }
    if let Some(p) = points.first() {
        return Ok((PathBuf::from(p), false));
    }
    let at = Path::new("/sys/kernel/tracing");
    if !sys::is_root() {
        return Err(RealError::Privilege("--trace needs tracefs, which is not mounted, and only root can mount it and trace: run as root (sudo schedlab run --real ...)".into()));
    }
    if !at.is_dir() {
        return Err(RealError::Privilege("--trace needs tracefs, and this kernel has none (/sys/kernel/tracing is missing: a kernel built with CONFIG_FTRACE is needed)".into()));
    }
    sys::mount_tracefs(at).map_err(|e| RealError::Privilege(format!("--trace needs tracefs, which is not mounted, and mounting it at {} failed ({e}): mount it on the host (mount -t tracefs nodev /sys/kernel/tracing) or give this container CAP_SYS_ADMIN", at.display())))?;
    Ok((at.into(), true))
}

impl Recording {
    /// Creates the instance, configured and cleared, with tracing off, and
    /// the output file. `nr_cpus`: the run's CPUs, for the output.
    pub(crate) fn open(req: &TraceRequest, duration_ns: u64, nr_cpus: usize) -> Result<Recording, RealError> {
        let (root, mounted) = find_or_mount()?;
        let pin = std::fs::File::open(&root).ok();
        let instances = root.join("instances");
        // Instances of schedlab runs that were killed before they could clean up.
        for e in std::fs::read_dir(&instances).into_iter().flatten().flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.strip_prefix("schedlab-").and_then(|p| p.parse::<u32>().ok()).is_some_and(|p| !Path::new(&format!("/proc/{p}")).exists()) {
                let _ = std::fs::remove_dir(e.path());
            }
        }
        let inst = instances.join(format!("schedlab-{}", std::process::id()));
        let mut rec = Recording { root, inst: inst.clone(), mounted, pin, buffer_kb: 0, out: None, path: req.path.clone(), timer: None };
        if let Err(e) = std::fs::create_dir(&inst) {
            rec.inst = PathBuf::new();
            return Err(RealError::Privilege(format!("--trace: cannot create the tracefs instance {} ({e}): run as root (sudo schedlab run --real ...)", inst.display())));
        }
        rec.configure(duration_ns)?;
        rec.out = Some(PerfettoWriter::create(&req.path, nr_cpus, req.window).map_err(|e| RealError::Io(format!("{}: {e}", req.path.display())))?);
        Ok(rec)
    }

    fn write(&self, file: &str, what: &str) -> Result<(), RealError> {
        let p = self.inst.join(file);
        std::fs::OpenOptions::new().write(true).truncate(true).open(&p).and_then(|mut f| f.write_all(what.as_bytes())).map_err(|e| RealError::Io(format!("--trace: writing {what:?} to {}: {e}", p.display())))
    }

    fn configure(&mut self, duration_ns: u64) -> Result<(), RealError> {
        self.write("tracing_on", "0")?;
        let clocks = std::fs::read_to_string(self.inst.join("trace_clock")).unwrap_or_default();
        if !clocks.split_whitespace().any(|c| c.trim_matches(|c| c == '[' || c == ']') == "mono") {
            return Err(RealError::Input(format!("--trace: this kernel's ftrace has no \"mono\" trace clock (Linux 4.1 or later is needed); it offers: {}", clocks.trim())));
        }
        self.write("trace_clock", "mono")?;
        // About 100k events per second per CPU; at most a quarter of the free memory.
        let cpus = std::fs::read_dir(self.inst.join("per_cpu")).map(|d| d.count()).unwrap_or(1).max(1) as u64;
        let avail_kb = std::fs::read_to_string("/proc/meminfo").ok().and_then(|m| m.lines().find_map(|l| l.strip_prefix("MemAvailable:")).and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())).unwrap_or(1 << 20);
        let want = (duration_ns / 1_000_000_000 + 1) * 8192;
        self.buffer_kb = want.min(avail_kb / 4 / cpus).clamp(4096, 1 << 19);
        self.write("buffer_size_kb", &self.buffer_kb.to_string())?;
        for ev in EVENTS {
            let dir = self.inst.join("events/sched").join(ev);
            if dir.is_dir() {
                self.write(&format!("events/sched/{ev}/enable"), "1")?;
            } else if ev == "sched_switch" {
                return Err(RealError::Input("--trace: this kernel has no sched/sched_switch tracepoint".into()));
            }
        }
        self.write("trace", "")
    }

    /// Turns tracing on 2 ms before `start_ns` and off at `stop_ns`
    /// (CLOCK_MONOTONIC), from a thread, unless stopped first.
    pub(crate) fn arm(&mut self, start_ns: u64, stop_ns: u64) {
        let on = self.inst.join("tracing_on");
        let flag = Arc::new((Mutex::new(false), Condvar::new()));
        let f = Arc::clone(&flag);
        let wait_until = move |at: u64| {
            let (lock, cv) = &*f;
            let mut stopped = lock.lock().unwrap_or_else(|e| e.into_inner());
            while !*stopped && sys::now_ns() < at {
                let left = std::time::Duration::from_nanos(at.saturating_sub(sys::now_ns()));
                stopped = cv.wait_timeout(stopped, left).unwrap_or_else(|e| e.into_inner()).0;
            }
            !*stopped
        };
        let h = std::thread::spawn(move || {
            if wait_until(start_ns.saturating_sub(2_000_000)) {
                let _ = std::fs::write(&on, "1");
                wait_until(stop_ns);
            }
            let _ = std::fs::write(&on, "0");
        });
        self.timer = Some((flag, h));
    }

    /// Stops tracing now (idempotent).
    pub(crate) fn stop(&mut self) {
        if let Some((flag, h)) = self.timer.take() {
            *flag.0.lock().unwrap_or_else(|e| e.into_inner()) = true;
            flag.1.notify_all();
            let _ = h.join();
        }
        if !self.inst.as_os_str().is_empty() {
            let _ = std::fs::write(self.inst.join("tracing_on"), "0");
        }
    }

    /// Stops tracing, converts the buffer into the Perfetto file and
    /// removes the instance. Interruptible (SIGINT/SIGTERM).
    pub(crate) fn finish(mut self, tasks: &[Task], plan: &Plan) -> Result<TraceStats, RealError> {
        self.stop();
        let mut lost = 0;
        for e in std::fs::read_dir(self.inst.join("per_cpu")).into_iter().flatten().flatten() {
            let stats = std::fs::read_to_string(e.path().join("stats")).unwrap_or_default();
            for l in stats.lines() {
                if let Some(v) = l.strip_prefix("overrun:").or_else(|| l.strip_prefix("dropped events:")) {
                    lost += v.trim().parse::<u64>().unwrap_or(0);
                }
            }
        }
        let tids: Vec<i32> = (0..plan.tasks.len()).map(|i| plan.shm.task(i).tid()).collect();
        let out = self.out.take().expect("the writer is there until finish");
        let mut conv = Converter::new(out, PidMap::new(&tids), tasks, plan.start_ns, &plan.cpu_map);
        let p = self.inst.join("trace");
        let io = |e: std::io::Error| RealError::Io(format!("--trace: reading {}: {e}", p.display()));
        let mut r = std::io::BufReader::with_capacity(1 << 20, std::fs::File::open(&p).map_err(io)?);
        let mut buf = String::new();
        let mut n = 0u64;
        loop {
            buf.clear();
            if r.read_line(&mut buf).map_err(io)? == 0 {
                break;
            }
            if let Some(l) = parse_line(&buf) {
                conv.line(&l);
            }
            n += 1;
            if n % 4096 == 0 && sys::interrupted() {
                return Err(RealError::Interrupted);
            }
        }
        let Converter { mut out, mut stats, others, last_ns, groups, .. } = conv;
        out.task_groups(&groups.into_iter().map(|(path, (weight, tids))| TaskGroup { path, weight, tids }).collect::<Vec<_>>());
        out.finish_at(last_ns).map_err(|e| RealError::Io(format!("{}: {e}", self.path.display())))?;
        stats.written = out.events_written;
        stats.lost = lost;
        stats.other_threads = others.len();
        stats.buffer_kb = self.buffer_kb;
        stats.path = self.path.clone();
        Ok(stats)
    }
}

impl Drop for Recording {
    fn drop(&mut self) {
        self.stop();
        if !self.inst.as_os_str().is_empty() {
            // The kernel refuses while a file of the instance is still open.
            for _ in 0..50 {
                if std::fs::remove_dir(&self.inst).is_ok() || !self.inst.exists() {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
        }
        self.pin = None;
        if self.mounted {
            // Busy when another run uses it: then it stays mounted.
            let _ = sys::umount(&self.root);
        }
    }
}

#[cfg(test)]
#[path = "tracefs_tests.rs"]
mod tests;
