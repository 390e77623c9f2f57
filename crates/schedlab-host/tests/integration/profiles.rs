//! Loader profiles: a scheduler whose set-up lives in its user space
//! (tests/shim/loader.bpf.c) loaded with and without its profile
//! (tests/shim/loader.toml), through the host API and through a scenario.

use std::path::PathBuf;
use std::rc::Rc;

use schedlab::sched::ext::check::Checked;
use schedlab_host::{self as host, HostedScheduler};
use schedlab::sched::ext::ops::{ops_flags, ExtOps};
use schedlab_host::profile::{apply, resolve, Machine, Profile};
use schedlab::sched::ext::EnableState;
use schedlab::sched::sim::Sim;

use crate::{cfg, manifest, sim};

fn source() -> PathBuf {
    manifest().join("tests/shim/loader.bpf.c")
}

fn profile_path() -> PathBuf {
    manifest().join("tests/shim/loader.toml")
}

/// The hog scenario; `extra` None: no scheduler (the test attaches one),
/// else the test scheduler with these extra `[scheduler]` keys.
fn scenario(preset: &str, extra: Option<&str>) -> String {
    let sched = match extra {
        Some(e) => format!("[scheduler]\nkind = \"ext\"\nsched = {:?}\n{e}", source().display().to_string()),
        None => String::new(),
    };
    format!(
        r#"
seed = 3
duration = "300ms"
[machine]
preset = "{preset}"
{sched}
[[workload]]
kind = "hog"
name = "hogs"
count = 48
"#
    )
}

fn u64s(b: &[u8]) -> Vec<u64> {
    b.chunks(8).map(|c| u64::from_ne_bytes(c.try_into().unwrap())).collect()
}

fn i32s(b: &[u8]) -> Vec<i32> {
    b.chunks(4).map(|c| i32::from_ne_bytes(c.try_into().unwrap())).collect()
}

/// Loads the test scheduler with its profile resolved for `s`'s machine.
fn load_with_profile(s: &mut Sim, argv: &[&str]) -> Rc<Checked<HostedScheduler>> {
    let p = Profile::load(&profile_path()).unwrap_or_else(|e| panic!("{e}"));
    let argv: Vec<String> = argv.iter().map(|a| a.to_string()).collect();
    let plan = resolve(&p, &Machine::new(&s.topo), &argv).unwrap_or_else(|e| panic!("{e}"));
    let mut c = cfg();
    apply::load_config(&plan, &mut c);
    let h = host::load_owned(&source(), &c).unwrap_or_else(|e| panic!("{e}"));
    apply::before_attach(&h, s, &plan).unwrap_or_else(|e| panic!("{e}"));
    Rc::new(Checked::new(h))
}

#[test]
fn profile_sets_up_rodata_arrays_maps_flags_and_syscalls_before_and_after_attach() {
    // 24 CPUs, SMT siblings c and c + 12.
    let mut s = sim(&scenario("ryzen-3900x", None));
    let ops = load_with_profile(&mut s, &["-s", "3000", "-m", "0x5"]);
    let h = ops.inner();
    let ro = |n: &str| h.rodata_bytes(n).unwrap();
    assert_eq!(ro("nr_cpu_ids"), 24u32.to_ne_bytes());
    assert_eq!(ro("slice_ns"), 3_000_000u64.to_ne_bytes());
    assert_eq!(ro("smt_enabled"), [1]);
    assert_eq!(u64s(&ro("preferred_cpus"))[..3], [23, 22, 21]);
    assert_eq!(h.global_bytes("perf_lvl").unwrap(), 1024i64.to_ne_bytes());
    assert_eq!(h.global_bytes("node_of").unwrap().len(), 64 * 4);
    // Members of array elements (host::paths): struct dom_ctx is
    // { u8 valid; u16 nr_cpus; u64 mask[2]; { u32 kind; char name[8]; } match[2][3]; },
    // 96 bytes: valid at 0, nr_cpus at 2, mask at 8, match at 24 (12 bytes each).
    let doms = h.global_bytes("doms").unwrap();
    assert_eq!(doms.len(), 4 * 96);
    for llc in 0..4 {
        let d = &doms[llc * 96..(llc + 1) * 96];
        assert_eq!((d[0], u16::from_ne_bytes([d[2], d[3]])), (1, 6), "LLC {llc}: valid, 6 CPUs (3 cores x 2 threads)");
        let mask = u64::from_ne_bytes(d[8..16].try_into().unwrap());
        let want: u64 = (0..24).filter(|c| s.topo.cpus[*c].llc == llc).map(|c| 1u64 << c).sum();
        assert_eq!(mask, want, "LLC {llc}'s CPU mask");
    }
    let m = &doms[96 + 24 + (3 + 2) * 12..][..12];
    assert_eq!((u32::from_ne_bytes(m[..4].try_into().unwrap()), &m[4..8]), (7, &b"hog\0"[..]), "doms[1].match[1][2]");
    // The load-phase programs ran: reset, then CPUs 0 and 2; every sibling.
    assert_eq!(u64s(&h.global_bytes("nr_primary_resets").unwrap()), [1]);
    assert_eq!(u64s(&h.global_bytes("primary_mask").unwrap()), [0b101]);
    let sib = i32s(&h.global_bytes("sibling_of").unwrap());
    assert_eq!((sib[0], sib[12], sib[23]), (12, 0, 11));
    // Flags replaced (not OR'd into the source's ENQ_LAST only).
    assert_eq!(ops.flags(), ops_flags::ENQ_LAST | ops_flags::ENQ_EXITING);
    // Nothing after the attach yet.
    assert_eq!(i32s(&h.global_bytes("timer_cpu").unwrap()), [-1]);
    s.scx_enable(ops.clone()).unwrap_or_else(|e| panic!("{e}"));
    // start_timer ran right after the attach, on the CPU it names, and
    // saw the map the loader filled (node + 1 for each of the 24 CPUs).
    assert_eq!(i32s(&h.global_bytes("timer_cpu").unwrap()), [23]);
    assert_eq!(u64s(&h.global_bytes("map_sum").unwrap()), [24]);
    s.run();
    assert_eq!(s.scx.state, EnableState::Enabled, "{:?}", s.scx.exit);
    assert!(ops.violations().is_empty(), "{:#?}", ops.violations());
    // The resized array holds one counter per CPU, and every CPU ran tasks.
    let runs = u64s(&h.global_bytes("cpu_runs").unwrap());
    assert_eq!(runs.len(), 24);
    assert!(runs.iter().all(|&r| r > 0), "{runs:?}");
}

#[test]
fn without_its_profile_the_scheduler_serves_one_cpu() {
    let mut s = sim(&scenario("4cpu", None));
    let h = host::load_owned(&source(), &cfg()).unwrap_or_else(|e| panic!("{e}"));
    let ops = Rc::new(Checked::new(h));
    s.scx_enable(ops.clone()).unwrap();
    s.run();
    let h = ops.inner();
    assert_eq!(u64s(&h.global_bytes("cpu_runs").unwrap()).len(), 1);
    let busy: Vec<u64> = (0..4).map(|c| s.tasks.iter().filter(|t| t.stats.runtime_ns > 0 && t.cpu == c).count() as u64).collect();
    assert!(busy[1..].iter().all(|&b| b == 0), "{busy:?}");
}

#[test]
fn a_scenario_names_the_profile_and_the_schedulers_own_flags() {
    let extra = format!("profile = {:?}\nargs = \"-s 2000 --nosmt\"", profile_path().display().to_string());
    let mut s = sim(&scenario("ryzen-3900x", Some(&extra)));
    s.run();
    assert_eq!(s.scx.state, EnableState::Enabled, "{:?}", s.scx.exit);
    let counters: std::collections::BTreeMap<String, u64> = s.scx.ops.as_ref().unwrap().counters().into_iter().collect();
    assert_eq!(counters["primary_mask"], (1 << 24) - 1);
    assert_eq!(counters["map_sum"], 24);
    // Every CPU took tasks: nr_cpu_ids came from the profile.
    let cpus: std::collections::BTreeSet<usize> = s.tasks.iter().filter(|t| t.stats.runtime_ns > 0).map(|t| t.cpu as usize).collect();
    assert!(cpus.len() > 1, "{cpus:?}");
    // Byte-identical on a second run.
    let mut again = sim(&scenario("ryzen-3900x", Some(&extra)));
    again.run();
    assert_eq!(s.engine.hash(), again.engine.hash());
}

#[test]
fn bad_flags_and_profiles_are_refused_with_file_field_and_fix() {
    let p = profile_path().display().to_string();
    let build = |extra: &str| {
        let text = scenario("4cpu", Some(extra));
        let sc = schedlab::workload::scenario::Scenario::parse(&text, "test.toml", &[]).unwrap();
        schedlab_host::world::build(&sc, "test.toml").err().map(|e| e.to_string()).unwrap_or_default()
    };
    let e = build(&format!("profile = {p:?}\nargs = \"-x 1\""));
    assert!(e.contains("unknown flag `-x` for loader-test; it accepts: -s, --slice-us <u64> (default 5000)"), "{e}");
    let e = build(&format!("profile = {p:?}\nargs = \"-s lots\""));
    assert!(e.contains("--slice-us: `lots` is not a number"), "{e}");
    let e = build("args = \"-s 1\"");
    assert!(e.contains("scheduler.args") && e.contains("no loader profile"), "{e}");
    let e = build("profile = \"/nonexistent/p.toml\"");
    assert!(e.contains("/nonexistent/p.toml") && e.contains("cannot read it"), "{e}");
    // A profile naming a variable the object lacks: the profile's line.
    let dir = std::env::temp_dir().join(format!("schedlab-profile-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("bad.toml");
    std::fs::write(&bad, "[profile]\nscheduler = \"x\"\n\n[rodata]\nno_such_thing = 1\n").unwrap();
    let e = build(&format!("profile = {:?}", bad.display().to_string()));
    assert!(e.contains("bad.toml:5: profile of x: unknown rodata `no_such_thing`"), "{e}");
    std::fs::write(&bad, "[profile]\nscheduler = \"x\"\n\n[[resize]]\narray = \"nope\"\nlen = 4\n").unwrap();
    let e = build(&format!("profile = {:?}", bad.display().to_string()));
    assert!(e.contains("resize `nope`: no RESIZABLE_ARRAY() of that name; the scheduler's resizable arrays are: cpu_runs"), "{e}");
    std::fs::write(&bad, "[profile]\nscheduler = \"x\"\n\n[[syscall]]\nprog = \"enable_sibling_cpu\"\nargs = [\"s32 cpu_id = 99\", \"s32 s = 0\"]\n").unwrap();
    let e = build(&format!("profile = {:?}", bad.display().to_string()));
    assert!(e.contains("bad.toml:5: SEC(\"syscall\") enable_sibling_cpu() returned -22"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}
