//! sched_ext's part of the return-from-interrupt path. The event loop
//! (sched/event_loop.rs) calls [`Sim::scx_irq_exit_begin`] when interrupts
//! come back on, before its reschedule check, and [`Sim::scx_irq_exit_end`]
//! after it; nothing else of sched_ext is visible there, as
//! kernel/sched/core.c reaches classes only through their hooks. Two hooks
//! rather than one because the kernel's order straddles the reschedule:
//! a CPU's kicks of itself take effect before it, the charge for the
//! scheduler's own work and the irq_work raised meanwhile come after it.

use crate::engine::Cpu;
use crate::sched::sim::Sim;

use super::HARDLOCKUP_NS;

impl Sim {
    /// Interrupts are enabled again on `cpu`: the kick irq_work runs, so
    /// kicks of this CPU by itself take effect before the reschedule check.
    /// Inlined into the event loop: it runs on every event and mostly
    /// finds nothing to do.
    #[inline]
    pub(crate) fn scx_irq_exit_begin(&mut self, cpu: Cpu) {
        debug_assert_eq!(cpu, self.this_cpu);
        self.scx_run_self_kicks();
    }

    /// After the reschedule check: the time sched_ext callbacks, kfuncs and
    /// DSQ locks took is CPU time of `cpu` (a hard lockup if it exceeds the
    /// watchdog threshold), and the irq_work raised on `cpu` is queued to
    /// run after it. Inlined like [`Sim::scx_irq_exit_begin`].
    #[inline]
    pub(crate) fn scx_irq_exit_end(&mut self, cpu: Cpu) {
        let cost = std::mem::take(&mut self.scx.cost_acc);
        if cost > 0 {
            self.scx.stats.overhead_ns += cost;
            self.charge_irq(cpu, cost);
            if cost > HARDLOCKUP_NS {
                self.scx_hardlockup(cpu);
            }
        }
        self.scx_flush_local_irq_work();
    }
}
