use crate::run;

const RANDOM: &str = r#"
duration = "1s"
seed = 42
[machine]
preset = "ryzen-3900x"
[[workload]]
kind = "hog"
count = 40
nice = 0
run = "exp:1ms"
sleep = "exp:2ms"
[[workload]]
kind = "hackbench"
groups = 2
fds = 4
loops = 50
"#;

#[test]
fn same_seed_gives_identical_json_and_hash() {
    let (_, a) = run(RANDOM);
    let (_, b) = run(RANDOM);
    assert_eq!(a.to_json(), b.to_json());
    assert_eq!(a.event_hash, b.event_hash);
}

#[test]
fn another_seed_changes_the_hash() {
    let (_, a) = run(RANDOM);
    let (_, b) = run(&RANDOM.replace("seed = 42", "seed = 43"));
    assert_ne!(a.event_hash, b.event_hash);
}

// ---- Determinism at scale (issue 13 §3) ----------------------------------
//
// Random scenarios: machines, workloads, cgroups, features and schedulers
// (EEVDF and every shipped sched_ext scheduler), each run twice; both runs
// must give byte-identical JSON and the same event hash. `cargo test` runs a
// few dozen cases; `scripts/determinism` runs 1,000 in release
// (SCHEDLAB_DETERMINISM_CASES).

use proptest::prelude::*;
use schedlab_host::shipped::SHIPPED;
use schedlab::sched::features::FEATURES;

const MACHINES: [&str; 6] = ["1cpu", "2cpu", "4cpu", "guest-16", "ryzen-3900x", "amd-16c"];
const HOG_POLICIES: [&str; 5] = ["other", "batch", "idle", "fifo", "rr"];
const STRESSORS: [&str; 4] = ["cpu", "yield", "switch", "fork"];

/// One random workload table: (kind, a, b, c, d) read per kind.
type W = (u8, u8, u8, u16, u16);

fn machine(m: u8, hz: u8, cstates: bool, irqoff: bool) -> String {
    let mut s = String::from("[machine]\n");
    match m as usize {
        i if i < MACHINES.len() => s += &format!("preset = \"{}\"\n", MACHINES[i]),
        i => s += &format!("cpus = {}\n", 1 + i % 12),
    }
    s += &format!("hz = {}\ncstates = {cstates}\n", [100, 250, 1000][hz as usize % 3]);
    if irqoff {
        s += "[machine.irqoff]\nevery = \"exp:3ms\"\nlength = \"exp:15us\"\n";
    }
    s
}

fn workload(i: usize, (kind, a, b, c, d): W, cgroups: bool) -> String {
    let name = format!("w{i}");
    let cg = if cgroups { format!("cgroup = \"/g{}\"\n", i % 2) } else { String::new() };
    match kind % 4 {
        0 => {
            let policy = HOG_POLICIES[a as usize % HOG_POLICIES.len()];
            let prio = if policy == "fifo" || policy == "rr" { format!("priority = {}\n", 1 + b % 98) } else { String::new() };
            let sleep = if d % 3 == 0 { String::new() } else { format!("sleep = \"exp:{}us\"\n", 50 + d % 4000) };
            let cg = if policy == "fifo" || policy == "rr" { String::new() } else { cg };
            format!(
                "[[workload]]\nkind = \"hog\"\nname = \"{name}\"\ncount = {}\nnice = {}\npolicy = \"{policy}\"\n{prio}run = \"exp:{}us\"\n{sleep}{cg}",
                1 + a % 6,
                b as i32 % 16 - 5,
                20 + c % 3000
            )
        }
        1 => {
            let rt = a % 2 == 0;
            let policy = if rt { format!("policy = \"fifo\"\npriority = {}\n", 50 + b % 49) } else { String::new() };
            let cg = if rt { String::new() } else { cg };
            format!(
                "[[workload]]\nkind = \"cyclictest\"\nname = \"{name}\"\nthreads = {}\ninterval = \"{}us\"\n{policy}{cg}",
                1 + b % 3,
                200 + c % 1800
            )
        }
        2 => format!(
            "[[workload]]\nkind = \"hackbench\"\nname = \"{name}\"\ngroups = {}\nfds = {}\nloops = {}\nmode = \"{}\"\nipc = \"{}\"\n",
            1 + a % 2,
            1 + b % 4,
            5 + c % 25,
            if d % 2 == 0 { "threads" } else { "process" },
            if d % 4 < 2 { "socket" } else { "pipe" }
        ),
        _ => format!(
            "[[workload]]\nkind = \"stress\"\nname = \"{name}\"\nstressor = \"{}\"\nworkers = {}\n",
            STRESSORS[a as usize % STRESSORS.len()],
            1 + b % 3
        ),
    }
}

/// A random scenario's text.
#[allow(clippy::too_many_arguments)]
fn random_scenario(seed: u64, ms: u16, m: (u8, u8, bool, bool), sched: u8, features: &[(u8, bool)], cgroups: Option<(u16, u16)>, ws: &[W]) -> String {
    let mut s = format!("seed = {seed}\nduration = \"{ms}ms\"\n{}", machine(m.0, m.1, m.2, m.3));
    let nsched = SHIPPED.len() + 2;
    match sched as usize % nsched {
        i if i < SHIPPED.len() => s += &format!("[scheduler]\nkind = \"ext\"\nsched = \"{}\"\n", SHIPPED[i].0),
        _ => s += "[scheduler]\nkind = \"eevdf\"\n",
    }
    if !features.is_empty() {
        s += "[features]\n";
        let mut seen = Vec::new();
        for &(f, on) in features {
            let name = FEATURES[f as usize % FEATURES.len()].name;
            if !seen.contains(&name) {
                seen.push(name);
                s += &format!("{name} = {on}\n");
            }
        }
    }
    if let Some((w0, w1)) = cgroups {
        s += &format!("[[cgroup]]\npath = \"/g0\"\nweight = {}\n[[cgroup]]\npath = \"/g1\"\nweight = {}\n", 1 + w0 % 1000, 1 + w1 % 1000);
        if w1 % 3 == 0 {
            s += "max = \"20ms 50ms\"\n";
        }
    }
    for (i, &w) in ws.iter().enumerate() {
        s += &workload(i, w, cgroups.is_some());
    }
    s
}

fn cases() -> u32 {
    std::env::var("SCHEDLAB_DETERMINISM_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(24)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), failure_persistence: None, ..ProptestConfig::default() })]

    /// Any scenario, run twice, gives byte-identical JSON and event hash.
    #[test]
    fn random_scenarios_run_twice_identically(
        seed in any::<u64>(),
        ms in 20u16..150,
        m in (0u8..18, any::<u8>(), any::<bool>(), any::<bool>()),
        sched in any::<u8>(),
        features in prop::collection::vec((any::<u8>(), any::<bool>()), 0..4),
        cgroups in prop::option::weighted(0.3, (any::<u16>(), any::<u16>())),
        ws in prop::collection::vec((any::<u8>(), any::<u8>(), any::<u8>(), any::<u16>(), any::<u16>()), 1..5),
    ) {
        let text = random_scenario(seed >> 1, ms, m, sched, &features, cgroups, &ws);
        if std::env::var_os("SCHEDLAB_PRINT").is_some() {
            eprintln!("=====\n{text}");
        }
        let (_, a) = run(&text);
        let (_, b) = run(&text);
        prop_assert_eq!(&a.event_hash, &b.event_hash, "event hash differs for\n{}", text);
        prop_assert!(a.to_json() == b.to_json(), "JSON differs for\n{}", text);
    }
}
