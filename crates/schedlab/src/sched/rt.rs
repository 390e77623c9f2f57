//! The RT class (kernel/sched/rt.c): SCHED_FIFO and SCHED_RR over 100
//! priority lists, immediate preemption of lower priorities, push/pull
//! between CPUs, and RT bandwidth (legacy throttling or the fair server).

use crate::engine::{Cpu, Event, TaskId};
use crate::sched::{enq, SchedClass};
use crate::engine::time::{Ns, NSEC_PER_MSEC};
use crate::sched::sim::Sim;
use crate::sched::task::{ClassId, Policy};

/// The RT class's tunables (rt.c's sysctls, and the fair deadline server
/// that protects fair tasks from RT), with the kernel's defaults.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RtTunables {
    /// RR quantum (RR_TIMESLICE, 100 ms).
    pub rr_timeslice_ns: Ns,
    /// RT bandwidth period and runtime (sched_rt_period_us / sched_rt_runtime_us).
    pub rt_period_ns: Ns,
    /// RT runtime allowed per period (sched_rt_runtime_us, 950 ms).
    pub rt_runtime_ns: Ns,
    /// What happens when RT tasks exhaust it.
    pub rt_bandwidth: RtBandwidth,
    /// Fair deadline server runtime per period (50 ms per 1 s).
    pub fair_server_runtime_ns: Ns,
}

impl Default for RtTunables {
    fn default() -> Self {
        RtTunables {
            rr_timeslice_ns: 100 * NSEC_PER_MSEC,
            rt_period_ns: 1_000 * NSEC_PER_MSEC,
            rt_runtime_ns: 950 * NSEC_PER_MSEC,
            rt_bandwidth: RtBandwidth::FairServer,
            fair_server_runtime_ns: 50 * NSEC_PER_MSEC,
        }
    }
}

/// How RT tasks are kept from starving the fair class.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RtBandwidth {
    /// 6.12+: a deferred deadline server runs fair tasks for 50 ms per second when RT starves them.
    FairServer,
    /// Legacy RT throttling: RT may use 950 ms per second on each CPU.
    Throttle,
    /// No protection (sched_rt_runtime_us = -1).
    Off,
}

/// The RT class (`rt_sched_class`): SCHED_FIFO and SCHED_RR.
pub(crate) struct RtClass;
/// The RT class object.
pub(crate) static RT_CLASS: RtClass = RtClass;

impl Sim {
    fn rr_ticks(&self) -> u32 {
        (self.tunables.rt.rr_timeslice_ns / self.costs.tick_ns()).max(1) as u32
    }

    /// Priority of what `cpu` runs, as cpupri sees it: RT prio, 100 for fair, 101 for idle.
    fn cpu_prio(&self, cpu: Cpu) -> i32 {
        let rq = self.rq(cpu);
        let running = rq.curr.map(|c| if self.task(c).class == ClassId::Rt { self.task(c).prio } else { 100 }).unwrap_or(101);
        running.min(rq.rt.highest_prio())
    }

    fn update_pushable(&mut self, cpu: Cpu, p: TaskId) {
        let t = self.task(p);
        let key = (t.prio, p);
        let pushable = t.rt.on_rq && self.rq(cpu).curr != Some(p) && t.nr_cpus_allowed > 1;
        let rt = &mut self.rq_mut(cpu).rt;
        if pushable {
            rt.pushable.insert(key);
        } else {
            rt.pushable.remove(&key);
        }
    }

    /// find_lowest_rq(): the CPU running the least important work that `p`
    /// could preempt, preferring its previous CPU, then the closest by domain.
    fn find_lowest_rq(&self, p: TaskId) -> Option<Cpu> {
        let t = self.task(p);
        let mut lowest = t.prio;
        let mut candidates = Vec::new();
        for c in t.cpus_allowed.iter() {
            let prio = self.cpu_prio(c as Cpu);
            if prio > lowest {
                lowest = prio;
                candidates.clear();
            }
            if prio == lowest && prio > t.prio {
                candidates.push(c as Cpu);
            }
        }
        if candidates.is_empty() {
            return None;
        }
        let prev = t.cpu;
        if candidates.contains(&prev) {
            return Some(prev);
        }
        for sd in &self.domains[prev as usize] {
            if let Some(&c) = candidates.iter().find(|&&c| sd.spans(c as usize)) {
                return Some(c);
            }
        }
        candidates.first().copied()
    }

    /// push_rt_task(): move the highest pushable task to a CPU running lower priority work.
    fn push_rt_task(&mut self, cpu: Cpu) -> bool {
        let Some(&(prio, p)) = self.rq(cpu).rt.pushable.iter().next() else { return false };
        if let Some(curr) = self.rq(cpu).curr {
            if self.task(curr).class != ClassId::Rt || prio < self.task(curr).prio {
                self.resched_curr(cpu);
                return false;
            }
        }
        let Some(target) = self.find_lowest_rq(p) else { return false };
        if target == cpu {
            return false;
        }
        // Pre: a queued, not running RT task of this CPU, going to a CPU it
        // may run on that runs lower-priority work (find_lowest_rq()).
        debug_assert!(self.task(p).class == ClassId::Rt && self.task(p).on_rq && self.task(p).cpu == cpu, "push_rt_task: task {p} is not queued RT on cpu{cpu}");
        debug_assert!(self.rq(cpu).curr != Some(p), "push_rt_task: task {p} is running");
        debug_assert!(self.task(p).cpus_allowed.test(target as usize), "push_rt_task: cpu{target} is outside task {p}'s affinity");
        debug_assert!(self.cpu_prio(target) > prio, "push_rt_task: cpu{target} runs prio {} ahead of task {p}'s {prio}", self.cpu_prio(target));
        self.move_queued_task(p, target);
        // Post: queued on the target, no longer pushable from here.
        debug_assert!(self.task(p).cpu == target && self.task(p).on_rq, "push_rt_task: task {p} did not arrive on cpu{target}");
        debug_assert!(!self.rq(cpu).rt.pushable.contains(&(prio, p)), "push_rt_task: task {p} still pushable on cpu{cpu}");
        true
    }

    fn push_rt_tasks(&mut self, cpu: Cpu) {
        for _ in 0..self.nr_cpus() {
            if !self.push_rt_task(cpu) {
                break;
            }
        }
    }

    /// pull_rt_task(): take a waiting higher-priority RT task from an overloaded CPU.
    fn pull_rt_task(&mut self, cpu: Cpu) {
        // An overloaded CPU queues two RT tasks or more: with fewer queued
        // on the other CPUs together, none is, and no CPU is read.
        if self.rt_queued - self.rq(cpu).rt.rt_nr_running < 2 {
            return;
        }
        let overloaded: Vec<Cpu> = (0..self.nr_cpus() as Cpu).filter(|&c| c != cpu && self.rq(c).rt.overloaded()).collect();
        for src in overloaded {
            let this_prio = self.rq(cpu).rt.highest_prio();
            let candidate = self.rq(src).rt.pushable.iter().find(|&&(_, p)| self.task(p).allowed_on(cpu as usize)).copied();
            let Some((prio, p)) = candidate else { continue };
            if prio >= this_prio {
                continue;
            }
            // Do not pull a task that is about to run where it is.
            if let Some(sc) = self.rq(src).curr {
                if self.task(sc).class == ClassId::Rt && self.task(sc).prio > prio {
                    continue;
                }
            }
            // Pre: a waiting RT task of `src` that may run here, ahead of
            // everything queued here.
            debug_assert!(self.task(p).class == ClassId::Rt && self.task(p).on_rq && self.task(p).cpu == src, "pull_rt_task: task {p} is not queued RT on cpu{src}");
            debug_assert!(self.rq(src).curr != Some(p), "pull_rt_task: task {p} is running on cpu{src}");
            self.move_queued_task(p, cpu);
            // Post: it is queued here and is this CPU's highest RT priority.
            debug_assert!(self.task(p).cpu == cpu && self.task(p).on_rq, "pull_rt_task: task {p} did not arrive on cpu{cpu}");
            debug_assert!(self.rq(cpu).rt.highest_prio() <= prio, "pull_rt_task: cpu{cpu} has no prio {prio} task after pulling {p}");
        }
    }

    /// RT runtime accounting of the running RT task (update_curr_rt).
    fn update_curr_rt(&mut self, cpu: Cpu) {
        let Some(p) = self.rq(cpu).curr else { return };
        if self.task(p).class != ClassId::Rt {
            return;
        }
        let delta = self.update_se(p);
        self.rq_mut(cpu).rt.rt_time += delta;
    }

    /// Per-tick RT bandwidth bookkeeping: arms the period timer on first use.
    pub(crate) fn rt_bandwidth_tick(&mut self, cpu: Cpu) {
        if self.tunables.rt.rt_bandwidth == RtBandwidth::Off {
            return;
        }
        let rq = self.rq(cpu);
        if rq.rt.rt_nr_running == 0 || rq.bw_timer_armed {
            return;
        }
        let now = self.now();
        let rq = self.rq_mut(cpu);
        rq.bw_timer_armed = true;
        rq.bw_period_start = now;
        rq.rt.rt_time = 0;
        rq.fair_time = 0;
        self.arm_bandwidth_timer(cpu);
    }

    fn arm_bandwidth_timer(&mut self, cpu: Cpu) {
        let now = self.now();
        let rq = self.rq(cpu);
        let period_end = rq.bw_period_start + self.tunables.rt.rt_period_ns;
        let at = match self.tunables.rt.rt_bandwidth {
            RtBandwidth::FairServer if !rq.fair_server_active => {
                // Deferred server: it activates when the fair class could only
                // just get its runtime before the period ends (zero laxity).
                // Once that point has passed with nothing starved, the next
                // decision is at the period's end.
                let left = self.tunables.rt.fair_server_runtime_ns.saturating_sub(rq.fair_time);
                let zero_laxity = period_end.saturating_sub(left);
                if zero_laxity > now { zero_laxity } else { period_end }
            }
            RtBandwidth::Throttle if !rq.rt.throttled => {
                let left = self.tunables.rt.rt_runtime_ns.saturating_sub(rq.rt.rt_time);
                (now + left).min(period_end)
            }
            _ => period_end,
        };
        self.engine.schedule(at, Event::RtBandwidth { cpu });
    }

    /// The RT bandwidth / fair-server timer.
    pub(crate) fn on_rt_bandwidth(&mut self, cpu: Cpu) {
        let now = self.now();
        self.update_curr_rt(cpu);
        if let Some(c) = self.rq(cpu).curr {
            if self.task(c).class == ClassId::Fair {
                self.update_curr_fair::<true>(cpu);
            }
        }
        let period_end = self.rq(cpu).bw_period_start + self.tunables.rt.rt_period_ns;
        if now >= period_end {
            let rq = self.rq_mut(cpu);
            rq.bw_period_start = now;
            rq.rt.rt_time = 0;
            rq.fair_time = 0;
            rq.rt.throttled = false;
            rq.fair_server_active = false;
            if rq.rt.rt_nr_running == 0 {
                rq.bw_timer_armed = false;
                self.resched_curr(cpu);
                return;
            }
            self.resched_curr(cpu);
        } else {
            match self.tunables.rt.rt_bandwidth {
                RtBandwidth::FairServer => {
                    // The fair server, and since 6.19 the ext server, run
                    // starved fair / sched_ext tasks.
                    let starved = self.rq(cpu).cfs.h_nr_runnable > 0 || self.rqs[cpu as usize].scx.nr_running > 0;
                    let left = self.tunables.rt.fair_server_runtime_ns.saturating_sub(self.rq(cpu).fair_time);
                    if self.rq(cpu).fair_server_active {
                        self.rq_mut(cpu).fair_server_active = false;
                        self.resched_curr(cpu);
                    } else if starved && left > 0 {
                        self.rq_mut(cpu).fair_server_active = true;
                        self.resched_curr(cpu);
                        self.engine.schedule(now + left, Event::RtBandwidth { cpu });
                        return;
                    }
                }
                RtBandwidth::Throttle => {
                    if self.rq(cpu).rt.rt_time >= self.tunables.rt.rt_runtime_ns {
                        self.rq_mut(cpu).rt.throttled = true;
                        self.resched_curr(cpu);
                    }
                }
                RtBandwidth::Off => {}
            }
        }
        self.arm_bandwidth_timer(cpu);
    }

    /// switched_from_rt(): the last RT task left this CPU's RT queue.
    pub(crate) fn balance_rt_after_switch(&mut self, cpu: Cpu) {
        self.pull_rt_task(cpu);
    }

    /// Pull before picking when this CPU's RT priority is about to drop (balance_rt).
    pub(crate) fn balance_rt(&mut self, cpu: Cpu, prev: Option<TaskId>) {
        let Some(p) = prev else {
            return;
        };
        if self.task(p).class != ClassId::Rt {
            return;
        }
        // need_pull_rt_task(): prev left the RT queue and nothing queued
        // here is as important.
        if !self.task(p).rt.on_rq && self.rq(cpu).rt.highest_prio() > self.task(p).prio {
            self.pull_rt_task(cpu);
        }
    }
}

impl SchedClass for RtClass {
    fn id(&self) -> ClassId {
        ClassId::Rt
    }

    fn enqueue_task(&self, sim: &mut Sim, cpu: Cpu, p: TaskId, flags: u32) {
        let prio = sim.task(p).prio;
        {
            let ticks = sim.rr_ticks();
            let t = sim.task_mut(p);
            t.rt.on_rq = true;
            if t.rt.time_slice == 0 {
                t.rt.time_slice = ticks;
            }
        }
        let rt = &mut sim.rq_mut(cpu).rt;
        if flags & enq::HEAD != 0 {
            rt.queues[prio as usize].push_front(p);
        } else {
            rt.queues[prio as usize].push_back(p);
        }
        rt.mark(prio);
        rt.rt_nr_running += 1;
        sim.rt_queued += 1;
        sim.update_pushable(cpu, p);
    }

    fn dequeue_task(&self, sim: &mut Sim, cpu: Cpu, p: TaskId, _flags: u32) -> bool {
        sim.update_curr_rt(cpu);
        let prio = sim.task(p).prio;
        let rt = &mut sim.rq_mut(cpu).rt;
        if let Some(i) = rt.queues[prio as usize].iter().position(|&x| x == p) {
            rt.queues[prio as usize].remove(i);
        }
        rt.mark(prio);
        rt.rt_nr_running -= 1;
        rt.pushable.remove(&(prio, p));
        sim.rt_queued -= 1;
        sim.task_mut(p).rt.on_rq = false;
        true
    }

    fn yield_task(&self, sim: &mut Sim, cpu: Cpu) {
        // requeue_task_rt(): to the tail of its priority list.
        let Some(p) = sim.rq(cpu).curr else { return };
        let prio = sim.task(p).prio as usize;
        let q = &mut sim.rq_mut(cpu).rt.queues[prio];
        if let Some(i) = q.iter().position(|&x| x == p) {
            q.remove(i);
            q.push_back(p);
        }
    }

    fn wakeup_preempt(&self, sim: &mut Sim, cpu: Cpu, p: TaskId, _wake_flags: u32) {
        let Some(curr) = sim.rq(cpu).curr else { return };
        if sim.task(p).prio < sim.task(curr).prio {
            sim.resched_curr(cpu);
        }
    }

    fn pick_task(&self, sim: &mut Sim, cpu: Cpu) -> Option<TaskId> {
        if sim.rt_queued == 0 {
            return None;
        }
        let rt = &sim.rq(cpu).rt;
        if rt.rt_nr_running == 0 || rt.throttled {
            return None;
        }
        let prio = rt.highest_prio();
        rt.queues.get(prio as usize)?.front().copied()
    }

    fn put_prev_task(&self, sim: &mut Sim, cpu: Cpu, prev: TaskId) {
        sim.update_curr_rt(cpu);
        if sim.task(prev).rt.on_rq {
            sim.update_pushable(cpu, prev);
        }
    }

    fn set_next_task(&self, sim: &mut Sim, cpu: Cpu, p: TaskId, _first: bool) {
        let now = sim.now();
        sim.task_mut(p).se.exec_start = now;
        sim.set_curr(cpu, Some(p));
        sim.update_pushable(cpu, p);
        // A preempted RT task left behind may run elsewhere (rt_queue_push_tasks).
        if !sim.rq(cpu).rt.pushable.is_empty() {
            sim.push_rt_tasks(cpu);
        }
    }

    fn select_task_rq(&self, sim: &mut Sim, p: TaskId, prev_cpu: Cpu, _wake_flags: u32) -> Cpu {
        // If prev runs RT work at least as important, look for a lower-priority CPU.
        let Some(curr) = sim.rq(prev_cpu).curr else { return prev_cpu };
        let c = sim.task(curr);
        let test = c.class == ClassId::Rt && (c.nr_cpus_allowed < 2 || c.prio <= sim.task(p).prio);
        if test && sim.task(p).nr_cpus_allowed > 1 {
            if let Some(target) = sim.find_lowest_rq(p) {
                if sim.task(p).prio < sim.cpu_prio(target) {
                    return target;
                }
            }
        }
        prev_cpu
    }

    fn task_tick(&self, sim: &mut Sim, cpu: Cpu, p: TaskId) {
        sim.update_curr_rt(cpu);
        if sim.task(p).policy != Policy::Rr {
            return;
        }
        let ticks = sim.rr_ticks();
        let t = sim.task_mut(p);
        t.rt.time_slice = t.rt.time_slice.saturating_sub(1);
        if t.rt.time_slice > 0 {
            return;
        }
        t.rt.time_slice = ticks;
        let prio = sim.task(p).prio as usize;
        // Requeue to the tail only if another task shares the priority.
        if sim.rq(cpu).rt.queues[prio].len() > 1 {
            self.yield_task(sim, cpu);
            sim.resched_curr(cpu);
        }
    }

    fn update_curr(&self, sim: &mut Sim, cpu: Cpu) {
        sim.update_curr_rt(cpu);
    }

    fn task_woken(&self, sim: &mut Sim, cpu: Cpu, p: TaskId) {
        // task_woken_rt(): push if it cannot preempt here.
        let Some(curr) = sim.rq(cpu).curr else { return };
        if curr == p || sim.rq(cpu).need_resched || sim.task(p).nr_cpus_allowed < 2 {
            return;
        }
        let c = sim.task(curr);
        if c.class == ClassId::Rt && (c.nr_cpus_allowed < 2 || c.prio <= sim.task(p).prio) {
            sim.push_rt_tasks(cpu);
        }
    }
}
