use crate::{run, runtime_of, sim};

fn share_ratio(nices: &str, count: u32) -> Vec<u64> {
    let (s, _) = run(&format!(
        "duration = \"10s\"\n[machine]\npreset = \"2cpu\"\n[[workload]]\nkind = \"hog\"\nname = \"h\"\ncount = {count}\nnice = {nices}\ncpus = \"0\"\n"
    ));
    (0..count).map(|i| runtime_of(&s, &format!("h-{i}"))).collect()
}

fn weight(nice: i32) -> f64 {
    schedlab::sched::task::PRIO_TO_WEIGHT[(nice + 20) as usize] as f64
}

#[test]
fn nice0_vs_nice5_share_follows_weights() {
    let r = share_ratio("[0, 5]", 2);
    let ratio = r[0] as f64 / r[1] as f64;
    let expect = weight(0) / weight(5); // 1024 / 335
    assert!((ratio / expect - 1.0).abs() < 0.01, "ratio {ratio:.4}, expected {expect:.4}");
    let total: u64 = r.iter().sum();
    assert!(total > 9_900_000_000, "the CPU should be busy all the time: {total}");
}

#[test]
fn three_tasks_0_0_10_share_follows_weights() {
    let r = share_ratio("[0, 0, 10]", 3);
    let total: f64 = r.iter().sum::<u64>() as f64;
    let w = [weight(0), weight(0), weight(10)];
    let wsum: f64 = w.iter().sum();
    for i in 0..3 {
        let share = r[i] as f64 / total;
        let expect = w[i] / wsum;
        assert!((share / expect - 1.0).abs() < 0.01, "task {i}: share {share:.4}, expected {expect:.4}");
    }
}

#[test]
fn eevdf_invariants_hold_under_mixed_load() {
    // Sleepers with lag, several nice levels, a custom short slice and yields:
    // the simulator checks lag sums, timeline keys and the pick after every event.
    let mut s = sim(r#"
duration = "1s"
seed = 5
[machine]
preset = "2cpu"
[[workload]]
kind = "hog"
name = "sleepy"
count = 4
nice = [-5, 0, 3, 10]
run = "exp:2ms"
sleep = "exp:3ms"
[[workload]]
kind = "hog"
name = "short"
count = 2
slice = "200us"
run = "exp:300us"
sleep = "exp:500us"
[[workload]]
kind = "hog"
name = "hog"
count = 2
nice = [0, 19]
"#);
    s.run();
    assert!(s.engine.events_processed() > 1000);
}

#[test]
fn features_change_the_schedule() {
    let base = "duration = \"500ms\"\n[machine]\npreset = \"1cpu\"\n[[workload]]\nkind = \"hog\"\ncount = 3\nrun = \"exp:2ms\"\nsleep = \"exp:2ms\"\n";
    let (_, a) = run(base);
    let (_, b) = run(&format!("{base}[features]\nPLACE_LAG = false\nRUN_TO_PARITY = false\n"));
    assert_ne!(a.event_hash, b.event_hash);
    assert_eq!(b.features_changed, vec!["NO_PLACE_LAG", "NO_RUN_TO_PARITY"]);
}

#[test]
fn short_slice_task_gets_lower_latency() {
    // PREEMPT_SHORT: a periodic task with a 0.1 ms custom slice preempts
    // long-slice hogs sooner than one with the default slice.
    let mk = |slice: &str| {
        format!(
            "duration = \"2s\"\n[machine]\npreset = \"1cpu\"\n[[workload]]\nkind = \"hog\"\nname = \"bg\"\ncount = 3\n\
             [[workload]]\nkind = \"hog\"\nname = \"p\"\nrun = \"100us\"\nsleep = \"2ms\"\n{slice}\n"
        )
    };
    let (s1, _) = run(&mk("slice = \"100us\""));
    let (s2, _) = run(&mk(""));
    let wait = |s: &schedlab::sched::sim::Sim| s.tasks.iter().find(|t| t.name == "p-0").unwrap().stats.wait_ns;
    assert!(wait(&s1) < wait(&s2), "short slice wait {} vs default {}", wait(&s1), wait(&s2));
}

#[test]
fn hrtick_ends_each_turn_at_the_slice() {
    // Two CPU hogs share one CPU at HZ 250 with a 0.7 ms slice. The tick
    // notices a used-up slice only every 4 ms; with HRTICK a timer ends
    // each turn when its slice is used (hrtick_start_fair), as this
    // project's host kernel does (README, experiment 001).
    let mk = |on: bool| format!("duration = \"1s\"\n[machine]\npreset = \"1cpu\"\nhz = 250\n[[workload]]\nkind = \"hog\"\ncount = 2\n[features]\nHRTICK = {on}\n");
    let turns = |r: &schedlab::results::report::Results| r.tasks.iter().map(|t| t.switches).sum::<u64>();
    let (_, off) = run(&mk(false));
    let (_, on) = run(&mk(true));
    // 1 CPU: the 0.7 ms base slice is not scaled (1 + ilog2(1)).
    let slice = 700_000u64;
    // Off: a turn lasts until the first tick after its slice (4 ms);
    // on: one slice and the 10 us floor at most.
    let (n_off, n_on) = (turns(&off), turns(&on));
    assert!((240..=260).contains(&n_off), "tick-ended turns: {n_off} in 1 s");
    let want = 1_000_000_000 / slice;
    assert!(n_on >= want * 95 / 100 && n_on <= want * 105 / 100, "hrtick-ended turns: {n_on} in 1 s, a slice each is {want}");
    assert_eq!(on.features_changed, vec!["HRTICK"]);
    assert!(on.tasks.iter().all(|t| t.runtime_ns.abs_diff(500_000_000) < 10_000_000), "the hogs share evenly");
}
