//! The machine file `schedlab calibrate` writes, and how each measured
//! figure maps onto the simulator's cost model
//! ([`schedlab::machine::cost::CostModel`], set through `[machine.costs]`).
//!
//! The mapping follows how the simulator composes a latency from its
//! fields, so that a simulated event costs what the measured one did:
//!
//! | field            | from                                                       |
//! |------------------|------------------------------------------------------------|
//! | `context_switch` | `context_switch` (thread to thread)                        |
//! | `mm_switch`      | `mm_switch` (process switch minus thread switch), if > 0 and its p10..p90 excludes 0 |
//! | `ipi`            | `wakeup_busy` minus `context_switch`: a remote wakeup of a busy CPU is simulated as the IPI, then a switch |
//! | `wakeup`         | `hrtimer_busy` minus `context_switch`: a timer wakeup on a busy CPU is the IRQ entry and try_to_wake_up, then a switch |
//! | `timer_slack`    | `timer_slack` (default-slack overshoot minus 1 ns-slack overshoot), if > 0 and its p10..p90 excludes 0 |
//! | `migrate_task`   | `migrate` minus `context_switch` (to the stopper) minus `wakeup_busy` (the moved task starting on the busy target), if > 0 |
//! | `xllc_msg`       | `xllc_extra` (busy wakeup across LLCs minus within one), where there are two LLCs, if > 0 and its p10..p90 excludes 0 |
//! | `msg_write_pipe`, `msg_read_pipe`, `msg_write_socket`, `msg_read_socket` | the same figures: one 100-byte write() or read() that neither blocks nor wakes anyone; hackbench charges them per message, and the scheduler's switch and wakeup costs where it blocks and wakes |
//! | `hz`             | jiffies per second                                         |
//! | `features.HRTICK`| `turn`: two CPU-bound threads on one CPU end their turns at the slice (hrtick) or at the tick after it ([`hrtick`]) |
//!
//! `scan_cpu` has no measured counterpart and keeps its default. Figures
//! with no field (fork, exit, the idle exit, the timer wheel, the raw
//! latencies) are recorded in the file as comments. The topology goes in a
//! side file of `lscpu -p` output, named by `lscpu = "..."`.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use super::{fmt, Calibration, Stat};

/// One `[machine.costs]` field set from the measurements.
#[derive(Clone, Debug, PartialEq)]
pub struct Mapped {
    /// The field (`context_switch`).
    pub field: &'static str,
    /// Its value, ns.
    pub ns: u64,
    /// Where the value comes from, for the comment above it.
    pub from: String,
}

/// The cost fields the calibration sets, and the fields it leaves at their
/// defaults with the reason.
pub fn costs(c: &Calibration) -> (Vec<Mapped>, Vec<(&'static str, String)>) {
    let (mut set, mut left) = (Vec::new(), Vec::new());
    let get = |k: &str| c.get(k);
    let d = |k: &str, s: &Stat| format!("{k} {}", s.describe());
    // A paired difference whose spread straddles zero is not told apart from zero.
    let paired = |k: &str| get(k).map(|s| (if s.p10 <= 0.0 && s.p90 >= 0.0 { f64::NAN } else { s.median }, d(k, &s)));
    let mut put = |field: &'static str, v: Option<(f64, String)>, why_not: &str| match v {
        Some((ns, from)) if ns.is_nan() => left.push((field, format!("{from}: its p10..p90 spans 0, not told apart from 0, so the default stays"))),
        Some((ns, from)) if ns >= 1.0 => set.push(Mapped { field, ns: ns.round() as u64, from }),
        Some((ns, from)) => left.push((field, format!("measured {} from {from}: not positive, so the default stays", fmt(ns)))),
        None => left.push((field, why_not.to_string())),
    };
    let cs = get("context_switch");
    put("context_switch", cs.map(|s| (s.median, d("context_switch", &s))), "the ping-pong probe failed");
    put("mm_switch", paired("mm_switch"), "the process ping-pong failed");
    let wb = get("wakeup_busy");
    put("ipi", cs.zip(wb).map(|(cs, w)| (w.median - cs.median, format!("{} minus context_switch {}", d("wakeup_busy", &w), fmt(cs.median)))), "not measurable here: one CPU");
    put("wakeup", cs.zip(get("hrtimer_busy")).map(|(cs, t)| (t.median - cs.median, format!("{} minus context_switch {}", d("hrtimer_busy", &t), fmt(cs.median)))), "the hrtimer probe failed");
    put("timer_slack", paired("timer_slack"), "the hrtimer probe failed");
    let mig = get("migrate").zip(cs).zip(wb).map(|((m, cs), w)| (m.median - cs.median - w.median, format!("{} minus context_switch {} minus wakeup_busy {}", d("migrate", &m), fmt(cs.median), fmt(w.median))));
    put("migrate_task", mig, "not measurable here: one CPU");
    put("xllc_msg", paired("xllc_extra"), "not measurable here: one LLC");
    for field in ["msg_write_pipe", "msg_read_pipe", "msg_write_socket", "msg_read_socket"] {
        put(field, get(field).map(|s| (s.median, d(field, &s))), "the message probe failed");
    }
    left.push(("scan_cpu", "nothing here measures it".to_string()));
    (set, left)
}

/// The default fair slice of this many CPUs (sysctl_sched_base_slice,
/// 0.7 ms scaled by 1 + ilog2(min(CPUs, 8)), the default log scaling).
fn default_slice_ns(cpus: usize) -> f64 {
    let n = cpus.clamp(1, 8);
    700_000.0 * (1 + n.ilog2()) as f64
}

/// Whether this kernel ends a fair task's turn when its slice is used up
/// (`SCHED_FEAT(HRTICK)`), from the `turn` figure: the median turn of two
/// CPU-bound threads sharing a CPU is the slice with the hrtick, and the
/// first tick at or after the slice without it. `Err` says why it cannot
/// tell (no figure, no tick rate, or a slice that is about a whole number
/// of ticks).
pub fn hrtick(c: &Calibration) -> Result<bool, String> {
    let turn = c.get("turn").ok_or("the turn probe gave no figure")?;
    let hz = c.hz.ok_or("the tick rate was not measured")?;
    let cpus = c.lscpu.lines().filter(|l| !l.starts_with('#') && !l.trim().is_empty()).count();
    let slice = default_slice_ns(cpus);
    let tick = 1e9 / hz as f64;
    let at_tick = (slice / tick).ceil() * tick;
    let what = format!("median turn {} against the default slice {} ({cpus} CPUs) and the tick after it {}", fmt(turn.median), fmt(slice), fmt(at_tick));
    if (at_tick - slice).abs() < 0.15 * slice {
        return Err(format!("{what}: too close to tell apart"));
    }
    let near = |x: f64| (turn.median - x).abs() < 0.2 * x;
    match (near(slice), near(at_tick)) {
        (true, false) => Ok(true),
        (false, true) => Ok(false),
        _ => Err(format!("{what}: near neither")),
    }
}

/// The figures no cost field takes.
const COMMENT_ONLY: &[&str] = &["context_switch_process", "wakeup_idle", "idle_exit", "wakeup_xllc_idle", "wakeup_xllc_busy", "hrtimer", "hrtimer_default_slack", "timer_wheel", "fork", "fork_child_runs", "exit", "msg_write_wakes"];

/// The machine file's text; `lscpu` is the side file's name as written in
/// it (relative to the machine file).
pub fn machine_toml(c: &Calibration, lscpu: &str) -> String {
    let mut s = String::new();
    let (set, left) = costs(c);
    let _ = writeln!(s, "# Machine file written by `schedlab calibrate` on Linux {}, CPUs {} (probes took {:.1} s).", c.kernel, cpus(c), c.wall_s);
    let _ = writeln!(s, "# Use it as: schedlab run SCENARIO --machine THIS-FILE");
    let _ = writeln!(s, "# Figures: median (p10, p90, n = samples); the methods are in the README, section Calibration.");
    let _ = writeln!(s, "#\n# Measured:");
    for f in &c.figures {
        let v = match &f.stat {
            Ok(st) => st.describe(),
            Err(why) => why.clone(),
        };
        let note = if COMMENT_ONLY.contains(&f.key) { " (no cost field: recorded here only)" } else { "" };
        let _ = writeln!(s, "#   {:<24}{v}: {}{note}", f.key, f.what);
    }
    let _ = writeln!(s, "#   {:<24}{} ns: the default SCHED_OTHER timer slack (prctl PR_GET_TIMERSLACK)", "configured_slack", c.default_slack_ns);
    if !c.cpuidle.is_empty() {
        let states: Vec<String> = c.cpuidle.iter().map(|(n, lat, res, off)| format!("{n} exit {lat} us residency {res} us{}", if *off { " (disabled)" } else { "" })).collect();
        let _ = writeln!(s, "# cpuidle states declared on CPU {}: {} (the cost model's idle states are not set from a file; idle_exit above is what a wakeup observed)", c.cpus.1.unwrap_or(c.cpus.0), states.join("; "));
    }
    for (field, why) in &left {
        let _ = writeln!(s, "# Not set, the default stays: {field}: {why}");
    }
    let _ = writeln!(s, "\n[machine]\nlscpu = {}", toml_str(lscpu));
    match c.hz {
        Some(hz) => {
            let _ = writeln!(s, "# jiffies per second counted over 200 ms in /proc/timer_list\nhz = {hz}");
        }
        None => {
            let _ = writeln!(s, "# hz: not measured (/proc/timer_list unreadable); the default stays");
        }
    }
    let _ = writeln!(s, "\n[machine.costs]");
    for m in &set {
        let _ = writeln!(s, "# {}\n{} = \"{}ns\"", m.from, m.field, m.ns);
    }
    match hrtick(c) {
        Ok(on) => {
            let why = c.get("turn").map(|t| t.describe()).unwrap_or_default();
            let how = if on { "end at the slice: the hrtick" } else { "last to the tick after the slice: no hrtick" };
            let _ = writeln!(s, "\n[machine.features]\n# turns of two CPU-bound threads on one CPU, {why}: they {how}\nHRTICK = {on}");
        }
        Err(why) => {
            let _ = writeln!(s, "\n# HRTICK not set, the simulator's default (off) stays: {why}");
        }
    }
    s
}

fn cpus(c: &Calibration) -> String {
    match c.cpus.1 {
        Some(b) => format!("{} and {b}", c.cpus.0),
        None => c.cpus.0.to_string(),
    }
}

/// A TOML basic string.
fn toml_str(s: &str) -> String {
    let mut out = String::from("\"");
    for ch in s.chars() {
        match ch {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => {
                let _ = write!(out, "\\u{:04X}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// The side file of `path` holding the topology: machine.toml -> machine.lscpu.
pub fn lscpu_path(path: &Path) -> PathBuf {
    path.with_extension("lscpu")
}

/// Writes the machine file to `path` and the topology beside it; returns
/// the side file's path.
pub fn write(c: &Calibration, path: &Path) -> std::io::Result<PathBuf> {
    let side = lscpu_path(path);
    let name = side.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    std::fs::write(&side, &c.lscpu)?;
    std::fs::write(path, machine_toml(c, &name))?;
    Ok(side)
}

#[cfg(test)]
mod tests {
    use super::super::Figure;
    use super::*;
    use schedlab::workload::scenario::{Duration, Scenario};

    fn st(median: f64) -> Result<Stat, String> {
        Ok(Stat { n: 20, median, p10: median * 0.9, p90: median * 1.2 })
    }

    fn sample() -> Calibration {
        let f = |key, stat| Figure { key, what: "test", stat };
        Calibration {
            figures: vec![
                f("context_switch", st(1_930.4)),
                f("mm_switch", Ok(Stat { n: 20, median: 54.0, p10: -600.0, p90: 550.0 })),
                f("wakeup_busy", st(6_000.0)),
                f("idle_exit", st(20_000.0)),
                f("hrtimer_busy", st(4_000.0)),
                f("timer_slack", st(50_100.0)),
                f("migrate", st(12_000.0)),
                f("fork", st(90_000.0)),
                f("xllc_extra", Err("not measurable here: one LLC".into())),
                f("turn", st(1_412_000.0)),
                f("msg_write_pipe", st(292.0)),
                f("msg_read_pipe", st(301.6)),
                f("msg_write_socket", st(850.0)),
                f("msg_read_socket", Err("failed: test".into())),
                f("msg_write_wakes", st(9_800.0)),
            ],
            lscpu: "# CPU,Core,Socket,Node,,L1d,L1i,L2,L3\n0,0,0,0,,0,0,0,0\n1,1,0,0,,1,1,1,0\n".into(),
            hz: Some(250),
            kernel: "6.1.0-test".into(),
            cpus: (0, Some(1)),
            cpuidle: vec![("POLL".into(), 0, 0, false), ("C1".into(), 2, 2, false)],
            default_slack_ns: 50_000,
            wall_s: 3.2,
        }
    }

    #[test]
    fn mapping_follows_the_model() {
        let (set, left) = costs(&sample());
        let get = |f: &str| set.iter().find(|m| m.field == f).map(|m| m.ns);
        assert_eq!(get("context_switch"), Some(1_930));
        assert_eq!(get("ipi"), Some(6_000 - 1_930));
        assert_eq!(get("wakeup"), Some(4_000 - 1_930));
        assert_eq!(get("timer_slack"), Some(50_100));
        assert_eq!(get("migrate_task"), Some(12_000 - 1_930 - 6_000));
        assert_eq!(get("msg_write_pipe"), Some(292));
        assert_eq!(get("msg_read_pipe"), Some(302));
        assert_eq!(get("msg_write_socket"), Some(850));
        assert_eq!(get("msg_read_socket"), None);
        assert_eq!(get("msg_write_wakes"), None);
        // Negative or unmeasured: left out, with the reason.
        assert_eq!(get("mm_switch"), None);
        assert_eq!(get("xllc_msg"), None);
        let why = |f: &str| left.iter().find(|l| l.0 == f).map(|l| l.1.clone()).unwrap_or_default();
        assert!(why("mm_switch").contains("spans 0"), "{left:?}");
        assert!(why("xllc_msg").contains("one LLC"), "{left:?}");
        assert!(why("scan_cpu").contains("nothing"), "{left:?}");
        assert!(why("msg_read_socket").contains("message probe"), "{left:?}");
    }

    #[test]
    fn machine_file_parses_back_with_the_written_costs() {
        let dir = std::env::temp_dir().join(format!("schedlab-cal-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("m.toml");
        let side = write(&sample(), &path).unwrap();
        assert_eq!(side, dir.join("m.lscpu"));
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains("fork") && text.contains("no cost field"), "{text}");
        // The file's [machine] table in a scenario of its own.
        let scenario = format!("duration = \"1s\"\n{text}\n[[workload]]\nkind = \"hog\"\ncount = 1\n");
        let file = path.display().to_string();
        let s = Scenario::parse(&scenario, &file, &[]).unwrap_or_else(|e| panic!("{e}\n{scenario}"));
        let c = &s.machine.costs;
        assert_eq!(c.context_switch, Some(Duration(1_930)));
        assert_eq!(c.ipi, Some(Duration(4_070)));
        assert_eq!(c.wakeup, Some(Duration(2_070)));
        assert_eq!(c.timer_slack, Some(Duration(50_100)));
        assert_eq!(c.migrate_task, Some(Duration(4_070)));
        assert_eq!(c.mm_switch, None);
        assert_eq!(c.xllc_msg, None);
        assert_eq!(c.scan_cpu, None);
        assert_eq!((c.msg_write_pipe, c.msg_read_pipe, c.msg_write_socket, c.msg_read_socket), (Some(Duration(292)), Some(Duration(302)), Some(Duration(850)), None));
        assert!(text.contains("msg_write_wakes") && text.contains("9.80 us"), "{text}");
        assert_eq!(s.machine.hz, Some(250));
        assert_eq!(s.machine.features.get("HRTICK").and_then(|v| v.as_bool()), Some(true), "{text}");
        let topo = schedlab::workload::world::topology(&s, &file).unwrap();
        assert_eq!(topo.nr_cpus(), 2);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn turns_tell_the_hrtick_from_the_tick() {
        // 2 CPUs: a 1.4 ms slice; HZ 250: the tick after it is at 4 ms.
        let mut c = sample();
        assert_eq!(hrtick(&c), Ok(true));
        c.figures.retain(|f| f.key != "turn");
        c.figures.push(Figure { key: "turn", what: "test", stat: st(3_990_000.0) });
        assert_eq!(hrtick(&c), Ok(false));
        // At HZ 1000 the tick after 1.4 ms is 2 ms: still apart.
        c.hz = Some(1000);
        c.figures.retain(|f| f.key != "turn");
        c.figures.push(Figure { key: "turn", what: "test", stat: st(2_001_000.0) });
        assert_eq!(hrtick(&c), Ok(false));
        // 8 CPUs at HZ 250: 2.8 ms against 4 ms; neither near 3.3 ms.
        c.hz = Some(250);
        c.lscpu = (0..8).fold(String::from("# CPU,Core,Socket,Node,,L1d,L1i,L2,L3\n"), |s, i| format!("{s}{i},{i},0,0,,{i},{i},{i},0\n"));
        c.figures.retain(|f| f.key != "turn");
        c.figures.push(Figure { key: "turn", what: "test", stat: st(3_300_000.0) });
        assert!(hrtick(&c).unwrap_err().contains("near neither"));
        // 8 CPUs at HZ 1000: 2.8 ms against 3 ms, too close to tell.
        c.hz = Some(1000);
        assert!(hrtick(&c).unwrap_err().contains("too close"));
    }

    #[test]
    fn strings_are_quoted() {
        assert_eq!(toml_str("a\"b\\c"), "\"a\\\"b\\\\c\"");
    }
}
