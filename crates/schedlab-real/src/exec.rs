//! The behaviour-program interpreter on real threads: the same `Op`s the
//! simulator executes in `exec.rs`, each done with the system call it models.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::shm::{Counters, Slot};
use super::{sys, Plan, RealObj};
use schedlab::engine::rng::draw_dist;
use schedlab::sched::task::{next_timer_expiry, Op, Policy};

pub(crate) fn policy_num(p: Policy) -> u32 {
    match p {
        Policy::Other => sys::SCHED_OTHER,
        Policy::Fifo => sys::SCHED_FIFO,
        Policy::Rr => sys::SCHED_RR,
        Policy::Batch => sys::SCHED_BATCH,
        Policy::Idle => sys::SCHED_IDLE,
        Policy::Ext => sys::SCHED_EXT,
    }
}

#[inline(never)]
fn spin(iters: u64) {
    let mut x = 0u64;
    for i in 0..iters {
        x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(i));
    }
    std::hint::black_box(x);
}

/// Spin-loop iterations per microsecond of CPU time on this machine.
pub fn calibrate_spin() -> u64 {
    let mut best = 0u64;
    for _ in 0..3 {
        let n = 200_000;
        let t0 = sys::thread_cpu_ns();
        spin(n);
        let dt = (sys::thread_cpu_ns() - t0).max(1);
        best = best.max(n * 1000 / dt);
    }
    best.max(1)
}

/// Burns `ns` of this thread's CPU time (not wall time: preemption does not
/// count, as in the simulator's `Run`). False when the deadline came first.
/// Between chunks it notes the CPU it is on in `seen` (affinity checks).
///
/// Reading the thread's CPU clock is a system call that runs the
/// scheduler's `update_curr()`, and that ends the turn once the slice is
/// used up: a task that reads it every few microseconds has its turns cut
/// at the slice, where a purely CPU-bound task runs on to the next tick.
/// [`BusyClock::Sparse`] therefore spins on the vDSO's monotonic clock
/// (no kernel entry) for as long as the burst could still need, and reads
/// the CPU clock only then: wall time is never less than CPU time, so it
/// never overshoots, and a thread that ran uninterrupted reads it once per
/// burst. [`BusyClock::Poll`] reads it every 20 us; see [`BusyClock`].
fn busy(ns: u64, spin_per_us: u64, deadline: u64, seen: Option<&Slot>, clock: BusyClock) -> bool {
    let target = sys::thread_cpu_ns() + ns;
    loop {
        let now_cpu = sys::thread_cpu_ns();
        if now_cpu >= target {
            return true;
        }
        let now = sys::now_ns();
        if now >= deadline {
            return false;
        }
        let left = target - now_cpu;
        match clock {
            BusyClock::Poll => spin_chunk(left, spin_per_us, seen),
            BusyClock::Sparse => {
                let until = (now + left).min(deadline);
                loop {
                    let now = sys::now_ns();
                    if now >= until {
                        break;
                    }
                    spin_chunk(until - now, spin_per_us, seen);
                }
            }
        }
    }
}

/// Notes the CPU in `seen` and spins for `ns`, at most 20 us: a long Run
/// still looks at its clocks (and the deadline) often, and a short one does
/// not overshoot much.
fn spin_chunk(ns: u64, spin_per_us: u64, seen: Option<&Slot>) {
    if let Some(s) = seen {
        s.saw_cpu(sys::current_cpu());
    }
    spin((ns.min(20_000) * spin_per_us / 1000).max(1));
}

/// How [`busy`] measures the CPU time a `Run` has used.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BusyClock {
    /// Read the thread's CPU clock only when the wall clock says the burst
    /// may be done: turns end where the kernel ends a CPU-bound task's
    /// turns (the tick, a wakeup preemption), not at every slice's end.
    Sparse,
    /// Read it every 20 us. The sched_ext VM uses this: under
    /// single-threaded TCG, vCPUs whose tasks never enter the kernel
    /// starved the other vCPU's short tasks (hackbench senders that did
    /// not run in 2 s), and the per-read `update_curr()` keeps the guest's
    /// turns at the slice.
    Poll,
}

/// This thread's schedstat and /proc sched counters.
fn read_counters() -> Counters {
    // The run time from the thread's CPU clock, not schedstat's: schedstat
    // shows sum_exec_runtime as of the last update_curr(), so a thread that
    // ran its whole program in one turn without a tick (a hackbench sender
    // whose writes are its only work) read 0 ns before and after.
    let mut c = Counters { runtime_ns: sys::thread_cpu_ns(), ..Counters::default() };
    if let Ok(s) = std::fs::read_to_string("/proc/thread-self/schedstat") {
        let v: Vec<u64> = s.split_whitespace().filter_map(|x| x.parse().ok()).collect();
        c.wait_ns = v.get(1).copied().unwrap_or(0);
        c.switches = v.get(2).copied().unwrap_or(0);
    }
    if let Ok(s) = std::fs::read_to_string("/proc/thread-self/sched") {
        for line in s.lines() {
            let Some((k, v)) = line.split_once(':') else { continue };
            let v: u64 = v.trim().split('.').next().and_then(|x| x.parse().ok()).unwrap_or(0);
            match k.trim() {
                "se.nr_migrations" => c.migrations = v,
                "nr_switches" => c.switches = v,
                "nr_voluntary_switches" => c.voluntary = v,
                "se.statistics.nr_wakeups" | "nr_wakeups" => c.wakeups = v,
                _ => {}
            }
        }
    } else if let Ok(s) = std::fs::read_to_string("/proc/thread-self/status") {
        for line in s.lines() {
            if let Some(v) = line.strip_prefix("voluntary_ctxt_switches:") {
                c.voluntary = v.trim().parse().unwrap_or(0);
            }
        }
    }
    c
}

fn diff(a: &Counters, b: &Counters) -> Counters {
    Counters {
        runtime_ns: b.runtime_ns.saturating_sub(a.runtime_ns),
        wait_ns: b.wait_ns.saturating_sub(a.wait_ns),
        switches: b.switches.saturating_sub(a.switches),
        voluntary: b.voluntary.saturating_sub(a.voluntary),
        migrations: b.migrations.saturating_sub(a.migrations),
        wakeups: b.wakeups.saturating_sub(a.wakeups),
    }
}

/// A worker process: runs the tasks of one tgid as threads, then returns.
pub(crate) fn worker(plan: &Arc<Plan>, tgid: u32) {
    let ids: Vec<usize> = (0..plan.tasks.len()).filter(|&i| plan.tasks[i].tgid == tgid).collect();
    let handles: Vec<_> = ids
        .into_iter()
        .map(|i| {
            let plan = Arc::clone(plan);
            std::thread::Builder::new().name(plan.tasks[i].name.chars().take(15).collect()).spawn(move || run_task(&plan, i))
        })
        .collect();
    for h in handles.into_iter().flatten() {
        let _ = h.join();
    }
}

/// Where a task is in its program.
struct Cursor {
    prog: usize,
    pc: usize,
    loops: Vec<u32>,
    /// rt-app timers: next expiry per timer slot (None before first use).
    timers: Vec<Option<u64>>,
}

enum Step {
    Next,
    Exit,
    /// The run's deadline passed.
    Stop,
}

fn run_task(plan: &Plan, i: usize) {
    let tp = &plan.tasks[i];
    let slot = plan.shm.task(i);
    slot.set_tid(sys::gettid());
    sys::set_thread_name(&tp.name);
    if let Err(e) = sys::sched_setaffinity(0, &tp.cpus) {
        slot.set_error(2, e.raw_os_error().unwrap_or(0));
    }
    if let Err(e) = sys::sched_setattr(0, policy_num(tp.policy), if tp.policy.is_rt() { 0 } else { tp.nice }, tp.rt_priority, tp.slice_ns) {
        slot.set_error(1, e.raw_os_error().unwrap_or(0));
    }
    let start = plan.start_ns + tp.start_ns;
    // Set-up that overran the common start; a late wakeup from the sleep
    // below is the kernel's latency, not ours, and is not counted.
    slot.set_late(sys::now_ns().saturating_sub(start));
    sys::sleep_until(start);
    let before = read_counters();
    let mut rng = tp.rng.clone();
    let mut next_wake = plan.start_ns + tp.first_wake_ns;
    let mut cur = Cursor { prog: tp.prog, pc: 0, loops: vec![0; plan.programs[tp.prog].loop_slots as usize], timers: Vec::new() };
    let exited = loop {
        match step(plan, Some(i), tp.workload, &mut cur, &mut rng, &mut next_wake) {
            Step::Next => {}
            Step::Exit => break true,
            Step::Stop => break false,
        }
    };
    let after = read_counters();
    slot.store_counters(&diff(&before, &after));
    let now = sys::now_ns();
    if exited {
        slot.set_exited(now);
    }
    slot.set_ended(now.min(plan.deadline_ns.max(now)), sys::current_cpu());
}

/// Runs one instant or blocking step of a program.
fn step(plan: &Plan, task: Option<usize>, workload: usize, cur: &mut Cursor, rng: &mut schedlab::engine::rng::Rng, next_wake: &mut u64) -> Step {
    let deadline = plan.deadline_ns;
    if sys::now_ns() >= deadline {
        return Step::Stop;
    }
    let Some(op) = plan.programs[cur.prog].ops.get(cur.pc) else { return Step::Exit };
    let paid = plan.syscall_runs[cur.prog].get(cur.pc).copied().unwrap_or(false);
    cur.pc += 1;
    let slot = task.map(|t| plan.shm.task(t));
    if let Some(s) = &slot {
        s.saw_cpu(sys::current_cpu());
    }
    match op {
        // hackbench's write and read: the Post or Wait next to it pays it.
        Op::Run(_) if paid => {}
        Op::Run(d) => {
            let ns = draw_dist(rng, d);
            if !busy(ns, plan.spin_per_us, deadline, slot.as_ref(), plan.busy_clock) {
                return Step::Stop;
            }
        }
        Op::Sleep(d) => {
            let until = sys::now_ns() + draw_dist(rng, d);
            if until >= deadline {
                sys::sleep_until(deadline);
                return Step::Stop;
            }
            sys::sleep_until(until);
        }
        Op::SleepPeriodic { period } => {
            *next_wake += period;
            if *next_wake >= deadline {
                sys::sleep_until(deadline);
                return Step::Stop;
            }
            sys::sleep_until(*next_wake);
            let lat = sys::now_ns().saturating_sub(*next_wake);
            if let Some(t) = task {
                plan.shm.push_sample(t, lat);
            }
        }
        Op::Timer { slot, period, absolute, record } => {
            let period = draw_dist(rng, period);
            let Some(next) = next_timer_expiry(&mut cur.timers, *slot as usize, sys::now_ns(), period, *absolute) else { return Step::Next };
            if next >= deadline {
                sys::sleep_until(deadline);
                return Step::Stop;
            }
            sys::sleep_until(next);
            if let (true, Some(t)) = (*record, task) {
                plan.shm.push_sample(t, sys::now_ns().saturating_sub(next));
            }
        }
        Op::Wait { obj } => match plan.objs[*obj as usize] {
            RealObj::Stream { read_fd, msg, .. } => {
                let mut buf = vec![0u8; msg];
                if !sys::xfer(read_fd, &mut buf, false, deadline) {
                    return Step::Stop;
                }
            }
            RealObj::Sem { word } => {
                let w = plan.shm.sem(word);
                loop {
                    let v = w.load(Ordering::Acquire);
                    if v > 0 {
                        if w.compare_exchange(v, v - 1, Ordering::AcqRel, Ordering::Relaxed).is_ok() {
                            break;
                        }
                        continue;
                    }
                    if sys::now_ns() >= deadline {
                        return Step::Stop;
                    }
                    sys::futex_wait(w, 0, deadline);
                }
            }
        },
        Op::Post { obj, .. } => match plan.objs[*obj as usize] {
            RealObj::Stream { write_fd, msg, .. } => {
                let mut buf = vec![0x5au8; msg];
                if !sys::xfer(write_fd, &mut buf, true, deadline) {
                    return Step::Stop;
                }
            }
            RealObj::Sem { word } => {
                let w = plan.shm.sem(word);
                w.fetch_add(1, Ordering::Release);
                sys::futex_wake(w, 1);
            }
        },
        // There is no yield_to() system call: a yield is the closest.
        Op::Yield | Op::YieldTo { .. } => sys::sched_yield(),
        Op::Lock { lock, ple_ns } => {
            let l = plan.shm.lock(*lock as usize);
            let mut spin_start = sys::now_ns();
            while l.compare_exchange_weak(0, 1, Ordering::Acquire, Ordering::Relaxed).is_err() {
                std::hint::spin_loop();
                let now = sys::now_ns();
                if now >= deadline {
                    return Step::Stop;
                }
                if ple_ns.is_some_and(|p| now - spin_start >= p) {
                    sys::sched_yield();
                    spin_start = sys::now_ns();
                }
            }
        }
        Op::Unlock { lock } => plan.shm.lock(*lock as usize).store(0, Ordering::Release),
        Op::Fork { prog } => {
            if let Ok(0) = sys::fork() {
                sys::die_with_parent();
                let before = read_counters();
                let mut child = Cursor { prog: *prog as usize, pc: 0, loops: vec![0; plan.programs[*prog as usize].loop_slots as usize], timers: Vec::new() };
                let mut wake = *next_wake;
                while let Step::Next = step(plan, None, workload, &mut child, rng, &mut wake) {}
                plan.shm.add_fork(workload, diff(&before, &read_counters()).runtime_ns);
                sys::exit_now(0);
            }
        }
        Op::SetSched { policy, nice, rt_priority } => {
            if let Err(e) = sys::sched_setattr(0, policy_num(*policy), if policy.is_rt() { 0 } else { *nice }, *rt_priority, 0) {
                if let Some(t) = task {
                    plan.shm.task(t).set_error(1, e.raw_os_error().unwrap_or(0));
                }
            }
        }
        Op::SetAffinity { mask } => {
            let host: Vec<usize> = plan.affinity_masks[*mask as usize].iter().filter_map(|c| plan.cpu_map.get(c).copied()).collect();
            if let Err(e) = sys::sched_setaffinity(0, &host) {
                if let Some(t) = task {
                    plan.shm.task(t).set_error(2, e.raw_os_error().unwrap_or(0));
                }
            }
        }
        // Refused before the run unless cgroups are off (--no-cgroups).
        Op::SetCgroup { .. } => {}
        Op::Exit => return Step::Exit,
        Op::Loop { to, count, slot } => {
            let c = &mut cur.loops[*slot as usize];
            *c += 1;
            if count.is_none_or(|n| *c < n) {
                cur.pc = *to as usize;
            } else {
                *c = 0;
            }
        }
        Op::Work => {
            if let Some(t) = task {
                plan.shm.task(t).add_work();
            }
        }
        // Steps real mode does not execute yet are skipped and reported.
        #[allow(unreachable_patterns)]
        _ => {
            if let Some(t) = task {
                plan.shm.task(t).set_error(3, 0);
            }
        }
    }
    Step::Next
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Both ways of counting burn at least the CPU time asked for, and a
    /// deadline that has passed stops them.
    #[test]
    fn busy_burns_the_cpu_time_asked_for() {
        let spin_per_us = calibrate_spin();
        for clock in [BusyClock::Sparse, BusyClock::Poll] {
            let t0 = sys::thread_cpu_ns();
            assert!(busy(3_000_000, spin_per_us, u64::MAX, None, clock));
            assert!(sys::thread_cpu_ns() - t0 >= 3_000_000, "{clock:?}");
            assert!(!busy(1_000_000_000, spin_per_us, sys::now_ns(), None, clock), "{clock:?}");
        }
    }
}
