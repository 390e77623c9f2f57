//! Changing a task's scheduling parameters and affinity at run time
//! (kernel/sched/syscalls.c: __sched_setscheduler, set_user_nice;
//! core.c: __set_cpus_allowed_ptr).

use crate::machine::cpumask::CpuMask;
use crate::engine::{Cpu, TaskId};
use crate::sched::enq;
use crate::sched::sim::Sim;
use crate::sched::task::{ClassId, LoadWeight, Policy, TaskState};


impl Sim {
    /// sched_setattr(): new policy, nice and RT priority for `p`.
    ///
    /// Like the kernel, the task is taken off its queue (DEQUEUE_SAVE) and
    /// out of the CPU if it runs, changed, and put back (ENQUEUE_RESTORE);
    /// then the class-change / priority-change checks decide on preemption.
    pub fn sched_setattr(&mut self, p: TaskId, policy: Policy, nice: i32, rt_priority: u32) {
        if self.task(p).state == TaskState::Dead {
            return;
        }
        self.finish_delayed_dequeue(p);
        let (old_class, old_prio) = (self.task(p).class, self.task(p).prio);
        let c = self.sched_change_begin(p, 0);
        // set_load_weight(): rescale the saved lag to the new weight. The
        // kernel does this only while the task is in the fair class (it calls
        // reweight_task before switching class) and sets the weight of an RT
        // task directly, so an RT task that returns to fair with another nice
        // carries a lag in the old scale. We always rescale, so that a saved
        // lag keeps its meaning in service time (the lag bound holds).
        //
        // A task in sched_ext is reweighted by reweight_task_scx(), which
        // sets only p->scx.weight: se.load keeps the weight it had, and the
        // task takes that stale weight back to the fair class if the BPF
        // scheduler is unloaded (seen on 7.3 by `compare --real --vm`).
        let in_ext = old_class == ClassId::Ext;
        let new_weight = LoadWeight::for_nice(nice, policy);
        if !in_ext && new_weight != self.task(p).se.load {
            self.reweight_dequeued_fair(p, new_weight);
        }
        {
            let t = self.task_mut(p);
            let load = t.se.load;
            t.policy = policy;
            t.nice = nice.clamp(-20, 19);
            t.rt_priority = if policy.is_rt() { rt_priority.clamp(1, 99) } else { 0 };
            t.set_sched_params();
            if in_ext {
                t.se.load = load;
            }
            if t.class == ClassId::Rt && old_class != ClassId::Rt {
                t.rt.time_slice = 0;
            }
        }
        let cls = self.scx_class_for(p);
        self.task_mut(p).class = cls;
        self.scx_setattr(p, old_class, cls);
        let new_class = self.task(p).class;
        let new_prio = self.task(p).prio;
        // A task whose priority is lowered goes to the head of its new list.
        let head = if new_class == ClassId::Rt && old_prio < new_prio { enq::HEAD } else { 0 };
        self.sched_change_end(p, c, head);
        self.check_class_changed(c.cpu, p, old_class, old_prio, c.running, c.queued);
    }

    /// check_class_changed(): switched_from / switched_to / prio_changed.
    fn check_class_changed(&mut self, cpu: Cpu, p: TaskId, old_class: ClassId, old_prio: i32, running: bool, queued: bool) {
        if !queued {
            return;
        }
        let new_prio = self.task(p).prio;
        if old_class != self.task(p).class {
            if running {
                // The running task changed class: let the pick decide.
                self.resched_curr(cpu);
            } else {
                self.wakeup_preempt(cpu, p, 0);
            }
            if old_class == ClassId::Rt && self.rq(cpu).rt.rt_nr_running == 0 {
                // switched_from_rt(): this CPU may now pull waiting RT work.
                self.balance_rt_after_switch(cpu);
            }
            return;
        }
        if new_prio == old_prio {
            return;
        }
        if running {
            // Our priority dropped: something queued may now deserve the CPU.
            if new_prio > old_prio {
                self.resched_curr(cpu);
            }
        } else {
            self.wakeup_preempt(cpu, p, 0);
        }
    }

    /// sched_setaffinity(): moves the task off CPUs it may no longer use.
    pub(crate) fn set_cpus_allowed(&mut self, p: TaskId, mask: CpuMask) {
        if mask.is_empty() || mask.nr_bits() != self.nr_cpus() || self.task(p).state == TaskState::Dead {
            return;
        }
        // The cpuset bounds the affinity; a mask outside it is refused (EINVAL).
        let g = self.task(p).cgrp;
        let mask = if g != 0 { mask.and(&self.cg.groups[g as usize].effective_cpus) } else { mask };
        if mask.is_empty() {
            return;
        }
        self.finish_delayed_dequeue(p);
        let cpu = self.task(p).cpu;
        let rt_queued = self.task(p).class == ClassId::Rt && self.task(p).rt.on_rq;
        let prio = self.task(p).prio;
        if rt_queued {
            self.rq_mut(cpu).rt.pushable.remove(&(prio, p));
        }
        {
            let t = self.task_mut(p);
            t.nr_cpus_allowed = mask.weight() as u32;
            t.cpus_allowed = mask;
        }
        self.scx_set_cpumask(p);
        if self.task(p).allowed_on(cpu as usize) {
            if rt_queued && self.rq(cpu).curr != Some(p) && self.task(p).nr_cpus_allowed > 1 {
                self.rq_mut(cpu).rt.pushable.insert((prio, p));
            }
            return;
        }
        // cpumask_any_and_distribute(): the next allowed CPU after the current one.
        let dest = self.task(p).cpus_allowed.iter_wrap(cpu as usize + 1).next().expect("mask is not empty") as Cpu;
        if self.rq(cpu).curr == Some(p) {
            // The migration stopper takes it off the CPU and moves it.
            self.preempt_and_migrate(cpu, p, dest);
        } else if self.task(p).on_rq {
            self.move_queued_task(p, dest);
        }
        // A sleeping task is placed on an allowed CPU when it wakes.
    }
}
