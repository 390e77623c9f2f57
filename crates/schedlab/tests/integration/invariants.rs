//! The after-every-event invariant checks catch corrupted state: each
//! check_scx() rule fails on a state that breaks it (a check that cannot
//! fail would prove nothing for the runs it passes).

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::rc::Rc;

use schedlab::sched::ext::ops::DefaultOps;
use schedlab::sched::sim::Sim;

use crate::sim;

/// Eight hogs on 2 CPUs under sched_ext, paused mid-run with tasks queued.
fn paused() -> Sim {
    let mut s = sim(&crate::hog_mix(2, "50ms", 3, 20));
    s.scx_enable(Rc::new(DefaultOps)).unwrap_or_else(|e| panic!("{e}"));
    s.run_until(20_000_000);
    s.check_scx();
    s
}

fn violation(s: &Sim) -> String {
    let err = catch_unwind(AssertUnwindSafe(|| s.check_scx())).expect_err("check_scx accepted a corrupted state");
    err.downcast_ref::<String>().cloned().unwrap_or_default()
}

#[test]
fn check_scx_catches_a_wrong_nr_running() {
    let mut s = paused();
    s.rqs[1].scx.nr_running += 1;
    assert!(violation(&s).contains("cpu1's nr_running"), "{}", violation(&s));
}

#[test]
fn check_scx_catches_a_task_missing_from_its_dsq() {
    let mut s = paused();
    let (idx, key) = s.tasks.iter().find_map(|t| t.scx.dsq).expect("some task waits in a DSQ");
    let p = s.scx.dsqs[idx as usize].list.remove(&key).expect("the DSQ holds it");
    assert!(violation(&s).contains(&format!("task {p} names DSQ")), "{}", violation(&s));
}

#[test]
fn check_scx_catches_an_immed_count_beyond_the_local_dsq() {
    let mut s = paused();
    s.rqs[0].scx.nr_immed += 1;
    assert!(violation(&s).contains("cpu0's IMMED count"), "{}", violation(&s));
}
