//! Hosted schedulers that fault or never return (issue 13): each one is
//! ejected with SCX_EXIT_ERROR naming the op, the address and the source
//! line; the run goes on under fair with the simulator's invariants
//! checked after every event; the `Checked` state machine holds; ops.exit
//! runs once; nothing else in the object is called after the fault.

use schedlab_host::LoadConfig;
use schedlab::sched::ext::ops::ExitKind;

use crate::cfg;
use crate::scheds::{broken, eject_with, Ejection};

/// The 1-based line of `name`.bpf.c holding `marker`.
fn line_of(name: &str, marker: &str) -> usize {
    let text = std::fs::read_to_string(broken(name)).expect("test scheduler");
    1 + text.lines().position(|l| l.contains(marker)).unwrap_or_else(|| panic!("{name}: no line with {marker:?}"))
}

fn counter(e: &Ejection, name: &str) -> u64 {
    let c = &e.sim.scx.counters_at_exit;
    c.iter().find(|(n, _)| n == name).unwrap_or_else(|| panic!("no counter {name} in {c:?}")).1
}

fn faulting(name: &str, opts: &[(&str, &str)], timeout_ms: Option<u64>) -> (Ejection, LoadConfig) {
    let mut c = cfg();
    c.rodata = opts.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    c.op_timeout_ns = timeout_ms.map(|ms| ms * 1_000_000);
    (eject_with(name, &c, 600), c)
}

/// The common checks; returns the message.
fn check(e: &Ejection, name: &str, op: &str) -> String {
    check_at(e, name, op, true)
}

fn check_at(e: &Ejection, name: &str, op: &str, in_source: bool) -> String {
    let x = &e.exit;
    assert_eq!(x.kind, ExitKind::Error, "{x:?}");
    assert_eq!(x.reason, "runtime error");
    assert!(x.msg.starts_with(&format!("ops.{op}()")), "{}", x.msg);
    assert!(x.msg.contains("the kernel's verifier would have rejected this program"), "{}", x.msg);
    if in_source {
        assert!(x.msg.contains(&format!("{name}.bpf.c:")), "no file:line in {}", x.msg);
    }
    assert_eq!(counter(e, "nr_exit_calls"), 1, "ops.exit runs once after the fault");
    x.msg.clone()
}

#[test]
fn null_dereference_is_an_error_exit_with_its_line() {
    let (e, _) = faulting("null_deref", &[], None);
    let msg = check(&e, "null_deref", "enqueue");
    let line = line_of("null_deref", "the missing NULL check");
    assert!(msg.contains(&format!("null_deref.bpf.c:{line}")), "{msg}");
    assert!(msg.contains("address 0x0 (NULL pointer dereference)") && msg.contains("in null_deref_enqueue()"), "{msg}");
    assert!(msg.contains("SIGSEGV"), "{msg}");
    // The object is not called again: the faulting enqueue was the last one.
    assert_eq!(counter(&e, "nr_enqueued"), 20);
}

#[test]
fn wild_write_past_a_map_value_is_an_error_exit() {
    let (e, _) = faulting("wild_write", &[("fault_after", "7")], None);
    let msg = check(&e, "wild_write", "enqueue");
    let line = line_of("wild_write", "s->cnt[idx]++");
    assert!(msg.contains(&format!("wild_write.bpf.c:{line}")), "{msg}");
    assert!(msg.contains("write to unmapped address 0x"), "{msg}");
    assert_eq!(counter(&e, "nr_enqueued"), 7);
}

#[test]
fn illegal_instruction_is_an_error_exit() {
    let (e, _) = faulting("trap", &[], None);
    let msg = check(&e, "trap", "enqueue");
    let line = line_of("trap", "\t\t__builtin_trap();");
    assert!(msg.contains(&format!("trap.bpf.c:{line}")) && msg.contains("SIGILL"), "{msg}");
}

#[test]
fn stack_overflow_is_an_error_exit() {
    let (e, _) = faulting("recurse", &[], None);
    let msg = check(&e, "recurse", "enqueue");
    assert!(msg.contains("stack overflow in walk()"), "{msg}");
    assert!(msg.contains("512 bytes of stack"), "{msg}");
}

#[test]
fn endless_loop_is_ejected_after_the_budget() {
    let t0 = std::time::Instant::now();
    let (e, _) = faulting("endless", &[], Some(300));
    let msg = check(&e, "endless", "dispatch");
    assert!(msg.contains("did not return within 300ms of wall time"), "{msg}");
    assert!(msg.contains("in endless_dispatch()"), "{msg}");
    assert!(t0.elapsed() < std::time::Duration::from_secs(120));
}

#[test]
fn endless_loop_through_kfuncs_is_ejected_too() {
    // Most of the loop's time is in a kfunc, where the watchdog's signal is
    // ignored; it is sent again until it lands in the scheduler's code.
    // It may be caught in the runtime's kfunc wrapper (runtime.c), which is
    // the scheduler's code too.
    let (e, _) = faulting("endless", &[("call_kfunc", "1")], Some(300));
    let msg = check_at(&e, "endless", "dispatch", false);
    assert!(msg.contains("did not return within 300ms") && msg.contains(".c:"), "{msg}");
}
