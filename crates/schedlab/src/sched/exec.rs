//! Behaviour programs: what a task does while it is on a CPU. Instant steps
//! run back to back at the moment the task makes progress; `Run` consumes CPU
//! time; blocking steps take the task off the CPU through schedule().

use crate::engine::{Cpu, Event, TaskId};
use crate::sched::{wf, SchedClass};
use crate::sched::sim::Sim;
use crate::sched::task::{next_timer_expiry, Dist, Measure, Op, TaskState};
use crate::engine::time::Ns;

/// Upper bound on instant steps in a row; a program that loops without ever
/// running, sleeping or blocking would otherwise spin the engine forever.
const MAX_INSTANT_STEPS: u32 = 100_000;

/// A pause-loop-exit vCPU's lock handoff latency when the holder releases.
const LOCK_HANDOFF_NS: Ns = 100;

impl Sim {
    fn draw(&mut self, p: TaskId, d: &Dist) -> Ns {
        d.draw(&mut self.task_rngs[p as usize])
    }

    /// The running task on `cpu` finished its step (or became able to make progress).
    /// Inlined into the event loop, where most events are step ends.
    #[inline(always)]
    pub(crate) fn on_step_done(&mut self, cpu: Cpu) {
        self.commit_progress(cpu);
        let Some(p) = self.rq(cpu).curr else { return };
        if self.task(p).spinning.is_some() {
            self.on_spin_event(cpu, p);
            return;
        }
        if self.task(p).refill_left > 0 {
            self.arm_step(cpu);
            return;
        }
        self.run_program(cpu, p);
    }

    /// Interprets `p`'s program until it runs, blocks or exits.
    ///
    /// The common steps reach the task's fields through one index of the
    /// task table each, and the step is matched in place rather than
    /// copied out whole: each kind of step reads only its own fields.
    fn run_program(&mut self, cpu: Cpu, p: TaskId) {
        let pi = p as usize;
        for _ in 0..MAX_INSTANT_STEPS {
            let t = &self.tasks[pi];
            let Some(op) = self.programs[t.prog as usize].ops.get(t.pc as usize) else {
                self.task_exit(cpu, p);
                return;
            };
            match *op {
                Op::Run(d) => {
                    let t = &mut self.tasks[pi];
                    match t.run_left {
                        None => {
                            let ns = d.draw(&mut self.task_rngs[pi]);
                            t.run_left = Some(ns);
                            if ns > 0 {
                                self.arm_step(cpu);
                                return;
                            }
                        }
                        Some(0) => {
                            t.run_left = None;
                            t.pc += 1;
                        }
                        Some(_) => {
                            self.arm_step(cpu);
                            return;
                        }
                    }
                }
                Op::Sleep(d) => {
                    let ns = self.draw(p, &d);
                    self.task_mut(p).pc += 1;
                    let until = self.now() + ns;
                    self.sleep_until(cpu, p, until);
                    return;
                }
                Op::SleepPeriodic { period } => {
                    let now = self.now();
                    if self.task(p).measure_on_run {
                        let lat = now.saturating_sub(self.task(p).next_wake);
                        let w = self.task(p).workload as usize;
                        self.metrics[w].record_latency(lat);
                        let t = self.task_mut(p);
                        t.measure_on_run = false;
                        t.pc += 1;
                        continue;
                    }
                    let t = self.task_mut(p);
                    t.next_wake += period;
                    let target = t.next_wake;
                    t.measure_on_run = true;
                    if target <= now {
                        // Overrun: clock_nanosleep on a past time returns at once.
                        continue;
                    }
                    self.sleep_until(cpu, p, target);
                    return;
                }
                Op::Wait { obj } => {
                    let o = &mut self.objs[obj as usize];
                    if o.tokens == 0 {
                        o.readers.push_back(p);
                        self.block(cpu, p);
                        return;
                    }
                    let was_full = o.tokens >= o.capacity;
                    o.tokens -= 1;
                    let stamp = o.stamps.as_mut().map(|q| q.pop_front().flatten());
                    let from_llc = o.last_post_llc;
                    // Like pipe_read(): a reader that leaves data behind wakes
                    // the next reader; one that made room in a full buffer wakes a writer.
                    let next_reader = if o.tokens > 0 { o.readers.pop_front() } else { None };
                    let writer = if was_full { o.writers.pop_front() } else { None };
                    self.task_mut(p).pc += 1;
                    if let Some(stamp) = stamp {
                        self.task_mut(p).stamp = stamp;
                    }
                    let here = self.topo.llc_of(cpu as usize) as u32;
                    if from_llc.is_some_and(|l| l != here) {
                        // The data crosses LLCs: paid before the reader goes on.
                        let cost = self.costs.xllc_msg_ns;
                        self.task_mut(p).refill_left += cost;
                    }
                    if let Some(r) = next_reader {
                        self.task_mut(r).woken_at = Some(self.now());
                        self.try_to_wake_up(r, 0);
                    }
                    if let Some(w) = writer {
                        self.try_to_wake_up(w, wf::SYNC);
                    }
                }
                Op::Post { obj, sync } => {
                    let o = &mut self.objs[obj as usize];
                    if o.tokens >= o.capacity {
                        o.writers.push_back(p);
                        self.block(cpu, p);
                        return;
                    }
                    o.tokens += 1;
                    o.last_post_llc = Some(self.topo.llc_of(cpu as usize) as u32);
                    if let Some(q) = o.stamps.as_mut() {
                        q.push_back(self.tasks[p as usize].stamp);
                    }
                    // Like pipe_write(): wake a reader, and pass the turn to the
                    // next blocked writer while room remains.
                    let reader = o.readers.pop_front();
                    let next_writer = if o.tokens < o.capacity { o.writers.pop_front() } else { None };
                    self.task_mut(p).pc += 1;
                    if let Some(r) = reader {
                        // The waker's timestamp, as schbench's wake_time.
                        self.task_mut(r).woken_at = Some(self.now());
                        self.try_to_wake_up(r, if sync { wf::SYNC } else { 0 });
                    }
                    if let Some(w) = next_writer {
                        self.try_to_wake_up(w, 0);
                    }
                }
                Op::Yield => {
                    self.task_mut(p).pc += 1;
                    let cls = crate::sched::class_of(self.task(p).class);
                    cls.yield_task(self, cpu);
                    self.resched_curr(cpu);
                    return;
                }
                Op::YieldTo { slot } => {
                    self.task_mut(p).pc += 1;
                    if let Some(&target) = self.task(p).peers.get(slot as usize) {
                        if self.yield_to(cpu, target) {
                            self.resched_curr(cpu);
                            return;
                        }
                    }
                }
                Op::Lock { lock, ple_ns } => {
                    if self.try_lock(cpu, p, lock, ple_ns) {
                        continue;
                    }
                    return;
                }
                Op::Unlock { lock } => {
                    self.task_mut(p).pc += 1;
                    self.unlock(lock);
                }
                Op::Fork { prog } => {
                    self.task_mut(p).pc += 1;
                    self.fork_task(p, prog);
                }
                Op::SetSched { policy, nice, rt_priority } => {
                    self.task_mut(p).pc += 1;
                    self.sched_setattr(p, policy, nice, rt_priority);
                    if self.rq(cpu).need_resched {
                        // The change takes effect on return from the syscall.
                        return;
                    }
                }
                Op::SetAffinity { mask } => {
                    let cpus = self.affinity_masks[mask as usize].clone();
                    self.task_mut(p).pc += 1;
                    self.set_cpus_allowed(p, cpus);
                    if self.rq(cpu).curr != Some(p) || self.rq(cpu).need_resched {
                        return;
                    }
                }
                Op::SetCgroup { group } => {
                    self.task_mut(p).pc += 1;
                    // A move the kernel refuses (a cpuset that leaves the
                    // task no CPU, ops.cgroup_prep_move() failing) leaves the
                    // task where it is, as the failed write would.
                    self.cgroup_attach_task(p, group);
                    if self.rq(cpu).curr != Some(p) || self.rq(cpu).need_resched {
                        return;
                    }
                }
                Op::Exit => {
                    self.task_exit(cpu, p);
                    return;
                }
                Op::Loop { to, count, slot } => {
                    let t = self.task_mut(p);
                    // An endless loop keeps no count: its slot's counter,
                    // on the heap, is never read.
                    match count {
                        None => t.pc = to,
                        Some(n) => {
                            let c = &mut t.loop_counts[slot as usize];
                            *c += 1;
                            if *c < n {
                                t.pc = to;
                            } else {
                                *c = 0;
                                t.pc += 1;
                            }
                        }
                    }
                }
                Op::Work => {
                    let t = &mut self.tasks[pi];
                    t.stats.work += 1;
                    t.pc += 1;
                    self.metrics[t.workload as usize].work += 1;
                }
                Op::Stamp => {
                    let now = self.now();
                    let t = self.task_mut(p);
                    t.stamp = Some(now);
                    t.pc += 1;
                }
                Op::Record { what } => {
                    let now = self.now();
                    let t = self.task_mut(p);
                    t.pc += 1;
                    let w = t.workload as usize;
                    match what {
                        Measure::Wakeup => {
                            if let Some(at) = t.woken_at.take() {
                                self.metrics[w].record_latency(now.saturating_sub(at));
                            }
                        }
                        Measure::Request => {
                            if let Some(at) = t.stamp {
                                self.metrics[w].record_request(now.saturating_sub(at));
                            }
                        }
                    }
                }
                Op::LockCpu { base } => {
                    let lock = base + cpu;
                    // Spinning on another CPU's lock after a migration: look
                    // up this CPU's lock instead (lock_this_cpu() retries).
                    if let Some(old) = self.task(p).spinning.filter(|&l| l != lock) {
                        self.locks[old as usize].spinners.retain(|&s| s != p);
                        self.task_mut(p).spinning = None;
                    }
                    if self.try_lock(cpu, p, lock, None) {
                        self.task_mut(p).cpu_lock = Some(lock);
                        continue;
                    }
                    return;
                }
                Op::UnlockCpu => {
                    self.task_mut(p).pc += 1;
                    if let Some(lock) = self.task_mut(p).cpu_lock.take() {
                        self.unlock(lock);
                    }
                }
                Op::Barrier { obj, parties } => {
                    let o = &mut self.objs[obj as usize];
                    o.arrived += 1;
                    if o.arrived < parties {
                        o.readers.push_back(p);
                        self.block(cpu, p);
                        return;
                    }
                    // The last one in releases everybody (pthread_cond_broadcast).
                    o.arrived = 0;
                    let waiters: Vec<_> = o.readers.drain(..).collect();
                    self.task_mut(p).pc += 1;
                    for r in waiters {
                        self.task_mut(r).pc += 1;
                        self.task_mut(r).woken_at = Some(self.now());
                        self.try_to_wake_up(r, 0);
                    }
                }
                Op::Timer { slot, period, absolute, record } => {
                    let now = self.now();
                    if self.task(p).measure_on_run {
                        let lat = now.saturating_sub(self.task(p).next_wake);
                        let w = self.task(p).workload as usize;
                        if record {
                            self.metrics[w].record_latency(lat);
                        }
                        let t = self.task_mut(p);
                        t.measure_on_run = false;
                        t.pc += 1;
                        continue;
                    }
                    let period = self.draw(p, &period);
                    let t = self.task_mut(p);
                    let Some(next) = next_timer_expiry(&mut t.timers, slot as usize, now, period, absolute) else {
                        t.pc += 1;
                        continue;
                    };
                    t.next_wake = next;
                    t.measure_on_run = true;
                    self.sleep_until(cpu, p, next);
                    return;
                }
            }
        }
        panic!("task {p} ran {MAX_INSTANT_STEPS} instant steps without running or blocking: its program has a loop with no Run, Sleep or blocking step");
    }

    /// The task blocks (TASK_INTERRUPTIBLE) and the CPU reschedules.
    fn block(&mut self, cpu: Cpu, p: TaskId) {
        self.task_mut(p).state = TaskState::Blocked;
        self.resched_curr(cpu);
    }

    /// hrtimer sleep: SCHED_OTHER gets timer slack (the timer may fire
    /// anywhere in [until, until + slack], and fires early when a tick on a
    /// busy CPU falls in that window); RT tasks get none.
    fn sleep_until(&mut self, cpu: Cpu, p: TaskId, until: Ns) {
        let slack = if self.task(p).policy.is_rt() { 0 } else { self.costs.timer_slack_ns };
        let mut fire = until + slack;
        if slack > 0 && self.rq(cpu).tick_armed {
            let tick = self.costs.tick_ns();
            let next_tick = until.div_ceil(tick) * tick;
            if next_tick <= fire {
                fire = next_tick;
            }
        }
        let t = self.task_mut(p);
        t.timer_gen = t.timer_gen.wrapping_add(1);
        let gen = t.timer_gen;
        self.engine.schedule(fire, Event::Timer { task: p, gen });
        self.block(cpu, p);
    }

    fn task_exit(&mut self, cpu: Cpu, p: TaskId) {
        let now = self.now();
        let t = self.task_mut(p);
        t.state = TaskState::Dead;
        t.exited_at = Some(now);
        let w = t.workload as usize;
        let m = &mut self.metrics[w];
        m.exited += 1;
        m.last_exit_ns = m.last_exit_ns.max(now);
        self.resched_curr(cpu);
    }

    fn fork_task(&mut self, parent: TaskId, prog: u32) {
        let mut child = self.task(parent).clone();
        child.prog = prog;
        child.pc = 0;
        child.run_left = None;
        child.stats = Default::default();
        child.parent = Some(parent);
        child.state = TaskState::New;
        child.on_rq = false;
        child.se = Default::default();
        child.rt = Default::default();
        child.spinning = None;
        child.measure_on_run = false;
        child.wait_start = None;
        child.refill_left = 0;
        child.exited_at = None;
        child.stamp = None;
        child.woken_at = None;
        child.cpu_lock = None;
        child.timers = Vec::new();
        child.name = format!("{}-child", self.task(parent).name);
        // fork() makes a new process (and mm).
        child.tgid = self.next_tgid;
        let id = self.add_task(child);
        let w = self.task(id).workload as usize;
        self.metrics[w].nr_tasks += 1;
        self.wake_up_new_task(id);
    }

    /// Tries to take `lock`; on contention the task spins on its CPU.
    fn try_lock(&mut self, cpu: Cpu, p: TaskId, lock: u32, ple_ns: Option<Ns>) -> bool {
        let now = self.now();
        let l = &mut self.locks[lock as usize];
        if l.holder.is_none() {
            l.holder = Some(p);
            l.acquisitions += 1;
            l.spinners.retain(|&s| s != p);
            let t = self.task_mut(p);
            t.spinning = None;
            t.spin_retry = false;
            t.ple_deadline = None;
            t.pc += 1;
            return true;
        }
        if !l.spinners.contains(&p) {
            l.spinners.push(p);
        }
        let t = self.task_mut(p);
        t.spin_retry = false;
        if t.spinning.is_none() {
            t.spinning = Some(lock);
            t.spin_start = now;
        }
        if t.ple_deadline.is_none() {
            t.ple_deadline = ple_ns.map(|d| now + d);
        }
        self.arm_step(cpu);
        false
    }

    /// Releases `lock`, handing it to a spinner that is on a CPU right now.
    fn unlock(&mut self, lock: u32) {
        let now = self.now();
        self.locks[lock as usize].holder = None;
        let spinners = self.locks[lock as usize].spinners.clone();
        for s in spinners {
            let cpu = self.task(s).cpu;
            if self.rq(cpu).curr == Some(s) && self.task(s).spinning == Some(lock) {
                // The spinner sees the release (after the cache line moves)
                // and retries its Lock step.
                self.commit_progress(cpu);
                self.task_mut(s).spin_retry = true;
                self.rq_mut(cpu).progress_from = now + LOCK_HANDOFF_NS;
                self.arm_step(cpu);
                return;
            }
        }
    }

    /// A spinning task's step event: it was switched back in or handed the
    /// lock (retry), or its pause-loop-exit window ran out (yield to the holder).
    fn on_spin_event(&mut self, cpu: Cpu, p: TaskId) {
        let Some(lock) = self.task(p).spinning else { return };
        let now = self.now();
        let ple_due = !self.task(p).spin_retry && self.task(p).ple_deadline.is_some_and(|d| now >= d);
        if !ple_due {
            // Re-run the Lock step: take the lock or keep spinning.
            self.run_program(cpu, p);
            return;
        }
        // Pause-loop exit: stop spinning and yield to the lock holder.
        let t = self.task_mut(p);
        t.spinning = None;
        t.ple_deadline = None;
        self.locks[lock as usize].spinners.retain(|&s| s != p);
        if let Some(holder) = self.locks[lock as usize].holder {
            if self.yield_to(cpu, holder) {
                self.resched_curr(cpu);
                return;
            }
        }
        // Nothing to yield to: go back to the Lock step.
        self.run_program(cpu, p);
    }
}
