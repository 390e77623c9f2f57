//! Runqueue locks as CPU time: who takes which CPU's rq lock when sched_ext
//! moves tasks between runqueues, and how long they wait in line.
//!
//! A runqueue lock is a queued spinlock (raw_spin_rq_lock(), core.c): takers
//! are served in arrival order and a waiter spins, doing nothing else. The
//! kernel takes another CPU's lock where ext.c moves a task off or onto a
//! runqueue that is not the caller's own:
//!
//! - consuming a DSQ task that sits on another runqueue
//!   (consume_remote_task(): the puller drops its own lock, switches to the
//!   source's for deactivate_task() + set_task_cpu(), then back to its own
//!   for activate_task());
//! - dispatch_to_local_dsq() and scx_bpf_dsq_move() towards a local DSQ:
//!   the source's lock, then the destination's when that is a third CPU;
//! - the bypass load balancer, which holds the donor's lock, IRQs off, for
//!   batches of moves (bypass_lb_cpu());
//! - scx_bypass(), which holds each runqueue's lock while it cycles that
//!   runqueue's tasks through dequeue/enqueue;
//! - the disable path, which switches each task back to fair under its
//!   runqueue's lock.
//!
//! A CPU also takes its own lock in __schedule(); there it queues behind the
//! remote holders. In simulated time each lock is one "free again at"
//! instant (`ScxRq::lock_held_until`); takers serialise in event order, so
//! this is a FIFO lock, like the DSQ locks (`Dsq::lock`). Fair's load
//! balancer migrates tasks its own way (detach_tasks() under the busiest
//! runqueue's lock) and is not modelled here.

use crate::engine::time::Ns;
use crate::engine::Cpu;
use crate::sched::ext::ScxRq;
use crate::sched::sim::Sim;

impl ScxRq {
    /// Takes this runqueue's lock at simulated time `at` and holds it for
    /// `hold` ns; returns the time spent waiting behind earlier holders.
    pub fn lock(&mut self, at: Ns, hold: Ns) -> Ns {
        let start = at.max(self.lock_held_until);
        self.lock_held_until = start + hold;
        start - at
    }
}

impl Sim {
    /// When the CPU running the current operation gets to its next step:
    /// after the scheduler work already charged to it (irq_until) and this
    /// operation's so far.
    fn scx_op_clock(&self) -> Ns {
        self.now().max(self.rq(self.this_cpu).irq_until) + self.scx.cost_acc
    }

    /// raw_spin_rq_lock() of `cpu` from the CPU running this operation:
    /// waits in line, then holds the lock for its cache-line transfer until
    /// [`Sim::scx_rq_unlock`]. Waiting and holding are the caller's CPU time.
    pub(crate) fn scx_rq_lock(&mut self, cpu: Cpu) {
        let at = self.scx_op_clock();
        let hold = self.costs.rq_lock_ns;
        let wait = self.rqs[cpu as usize].scx.lock(at, hold);
        self.scx.cost_acc += wait + hold;
        self.scx.stats.rq_lock_wait_ns += wait;
    }

    /// raw_spin_rq_unlock(): the work charged since [`Sim::scx_rq_lock`] was
    /// done holding `cpu`'s lock.
    pub(crate) fn scx_rq_unlock(&mut self, cpu: Cpu) {
        let at = self.scx_op_clock();
        let r = &mut self.rqs[cpu as usize].scx;
        r.lock_held_until = r.lock_held_until.max(at);
    }

    /// Does `work_ns` of work under `cpu`'s rq lock: with the lock dance if
    /// `cpu` is another CPU's runqueue, as plain CPU time on the caller's own.
    /// Inlined up to the own-runqueue case (one end of every remote move).
    #[inline]
    pub(crate) fn scx_rq_locked_work(&mut self, cpu: Cpu, work_ns: Ns) {
        if cpu == self.this_cpu {
            self.scx.cost_acc += work_ns;
            return;
        }
        self.scx_rq_locked_work_remote(cpu, work_ns);
    }

    /// [`Sim::scx_rq_lock`], the work, [`Sim::scx_rq_unlock`] in one: the
    /// unlock's clock is the lock's plus the wait, the hold and the work
    /// (nothing else is charged in between), which is where the lock's own
    /// "free again at" would be moved to, so the lock is simply held for
    /// the hold and the work.
    #[inline(never)]
    fn scx_rq_locked_work_remote(&mut self, cpu: Cpu, work_ns: Ns) {
        let at = self.scx_op_clock();
        let hold = self.costs.rq_lock_ns;
        let wait = self.rqs[cpu as usize].scx.lock(at, hold + work_ns);
        self.scx.cost_acc += wait + hold + work_ns;
        self.scx.stats.rq_lock_wait_ns += wait;
        debug_assert_eq!(self.rqs[cpu as usize].scx.lock_held_until, self.scx_op_clock());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rq_lock_serialises_takers_in_order() {
        let mut r = ScxRq::default();
        assert_eq!(r.lock(100, 50), 0);
        assert_eq!(r.lock(120, 50), 30);
        assert_eq!(r.lock(130, 10), 70);
        assert_eq!(r.lock(500, 10), 0);
        assert_eq!(r.lock_held_until, 510);
    }
}
