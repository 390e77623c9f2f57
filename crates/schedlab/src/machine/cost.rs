//! The machine's cost model: what scheduling work costs in time.
//!
//! Every parameter has a default taken from public measurements; the sources
//! are named next to each value. All of them can be set in a scenario's
//! `[machine.costs]` table (field names below, durations as strings).

use serde::{Deserialize, Serialize};

use crate::engine::time::Ns;

/// One idle state (C-state): how long leaving it takes and how long the CPU
/// must expect to stay idle before entering it is worthwhile.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct IdleState {
    /// The cpuidle state's name ("C1", "C6", ...).
    pub name: String,
    /// cpuidle's exit_latency: waking the CPU out of this state.
    pub exit_latency_ns: Ns,
    /// cpuidle's target_residency: the shortest idle period worth entering it for.
    pub target_residency_ns: Ns,
}

/// What scheduling work costs in time on the modelled machine: the tick
/// rate, switch, IPI, wakeup and migration costs, the idle states, cache
/// refill and lock costs, each charged where the kernel pays it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CostModel {
    /// Scheduler tick frequency (CONFIG_HZ). 1000 on desktop distributions, 250 on many servers.
    pub hz: u32,
    /// Direct cost of a context switch (schedule + switch_to + return), charged to
    /// the incoming task. lmbench lat_ctx on current x86 reports ~1.5-4 us.
    pub context_switch_ns: Ns,
    /// IPI delivery from send to handler entry on the target: 1-3 us on x86
    /// (x2APIC; measured by ipi_benchmark / "smp_call_function" latency studies).
    pub ipi_ns: Ns,
    /// Hard-IRQ entry plus try_to_wake_up for a timer wakeup, charged on the timer CPU.
    pub wakeup_ns: Ns,
    /// Timer slack added to a SCHED_OTHER task's sleep (the default timer_slack_ns, 50 us).
    /// RT tasks get none (hrtimer_nanosleep ignores slack for rt_task()).
    pub timer_slack_ns: Ns,
    /// Idle states, shallowest first. "C-states off" is the single polling state
    /// (exit ~0). Defaults: C1 2 us / 2 us residency, C6 130 us / 600 us (Intel SKX
    /// ACPI tables; AMD CC6 is of the same order).
    pub idle_states: Vec<IdleState>,
    /// Bandwidth at which a migrated task refills its cache working set from the
    /// shared LLC (same LLC), in bytes per microsecond (~50 GB/s L3 bandwidth).
    pub refill_llc_bytes_per_us: u64,
    /// Refill bandwidth from DRAM or a remote LLC (different LLC), bytes per us (~15 GB/s per core).
    pub refill_mem_bytes_per_us: u64,
    /// Private cache size per core that a same-LLC migration must refill (L2, 512 KiB - 1 MiB).
    pub l2_bytes: u64,
    /// Cost of examining one CPU during an idle-CPU scan or load-balance pass (~30-100 ns
    /// of cache-line reads of remote runqueue state).
    pub scan_cpu_ns: Ns,
    /// Cost of moving one task between runqueues (detach + attach, both rq locks).
    pub migrate_task_ns: Ns,
    /// Extra cost of a switch between tasks of different processes (switch_mm:
    /// CR3 write and the TLB refill that follows; ~0.5-1 us with PCID).
    pub mm_switch_ns: Ns,
    /// Extra cost of consuming a message (pipe/socket/futex data) written from
    /// another LLC: the buffer's cache lines move between LLCs (cross-CCX /
    /// cross-socket line transfers of ~100-200 ns each, a few lines per message).
    pub xllc_msg_ns: Ns,
    /// One sched_ext callback: the struct_ops trampoline plus a short BPF
    /// program (~100-300 ns in perf profiles of scx_simple/scx_qmap).
    pub scx_op_ns: Ns,
    /// One kfunc call from a BPF scheduler (a direct call plus argument checks).
    pub scx_kfunc_ns: Ns,
    /// Taking and releasing an uncontended DSQ spinlock (a cache line that
    /// usually lives in another core's cache).
    pub dsq_lock_ns: Ns,
    /// Looking at one task while scanning a DSQ for one this CPU can run
    /// (pointer chasing through the task list: a cache miss per task).
    pub dsq_scan_task_ns: Ns,
    /// Taking and releasing another CPU's runqueue lock, uncontended: the
    /// lock's cache line comes over from the owner (a cross-CCX line
    /// transfer on Zen is ~100-150 ns, within one LLC ~40 ns). Part of every
    /// hold of a remote runqueue lock; waiting behind other holders is
    /// charged on top (a queued spinlock serves waiters in order).
    pub rq_lock_ns: Ns,
    /// The part of `migrate_task_ns` done under the source runqueue's lock
    /// when a task is pulled off it: deactivate_task() and set_task_cpu()
    /// (dequeue accounting, PELT/load updates, migrate_task_rq), a few
    /// hundred ns in perf profiles of migration-heavy loads.
    pub rq_detach_ns: Ns,
    /// One 100-byte write() to a pipe that neither blocks nor wakes a
    /// reader: syscall entry and exit, the pipe lock, the copy into the
    /// pipe's page. Charged to the writer; a wakeup it makes is charged
    /// where the wakeup is. 0.29 us measured on a 2-vCPU Firecracker guest
    /// (`schedlab calibrate`, `msg`); the default is the model's earlier
    /// constant.
    pub msg_write_pipe_ns: Ns,
    /// One 100-byte read() from a pipe with data in it (the copy out and
    /// the buffer release). Charged to the reader.
    pub msg_read_pipe_ns: Ns,
    /// One 100-byte write() to a unix stream socket that neither blocks nor
    /// wakes a reader: an skb allocated, the copy, the queueing on the
    /// peer's receive queue and the peer's sk_data_ready. 0.85 us measured
    /// on the same guest.
    pub msg_write_socket_ns: Ns,
    /// One 100-byte read() from a unix stream socket with data queued (the
    /// copy out, the skb freed, the sender's buffer space released).
    pub msg_read_socket_ns: Ns,
}

impl Default for CostModel {
    fn default() -> Self {
        CostModel {
            hz: 1000,
            context_switch_ns: 2_000,
            ipi_ns: 1_500,
            wakeup_ns: 1_000,
            timer_slack_ns: 50_000,
            idle_states: vec![
                IdleState { name: "POLL".into(), exit_latency_ns: 0, target_residency_ns: 0 },
                IdleState { name: "C1".into(), exit_latency_ns: 2_000, target_residency_ns: 2_000 },
                IdleState { name: "C6".into(), exit_latency_ns: 130_000, target_residency_ns: 600_000 },
            ],
            refill_llc_bytes_per_us: 50_000,
            refill_mem_bytes_per_us: 15_000,
            l2_bytes: 1 << 20,
            scan_cpu_ns: 50,
            migrate_task_ns: 1_000,
            mm_switch_ns: 500,
            xllc_msg_ns: 600,
            scx_op_ns: 150,
            scx_kfunc_ns: 40,
            dsq_lock_ns: 60,
            dsq_scan_task_ns: 40,
            rq_lock_ns: 100,
            rq_detach_ns: 400,
            msg_write_pipe_ns: 1_500,
            msg_read_pipe_ns: 1_500,
            msg_write_socket_ns: 2_500,
            msg_read_socket_ns: 2_500,
        }
    }
}

impl CostModel {
    /// Nanoseconds per scheduler tick.
    pub fn tick_ns(&self) -> Ns {
        1_000_000_000 / self.hz as Ns
    }

    /// Switches C-states off: only the polling state remains (idle=poll /
    /// cpuidle disabled), so waking an idle CPU costs nothing extra.
    pub fn cstates_off(&mut self) {
        self.idle_states.retain(|s| s.exit_latency_ns == 0);
        if self.idle_states.is_empty() {
            self.idle_states.push(IdleState { name: "POLL".into(), exit_latency_ns: 0, target_residency_ns: 0 });
        }
    }

    /// Exit latency of the idle state a CPU idle for `idle_for` is in. The
    /// governor is modelled as an oracle: the deepest state whose target
    /// residency the idle period has reached.
    pub fn idle_exit_ns(&self, idle_for: Ns) -> Ns {
        self.idle_states
            .iter()
            .filter(|s| s.target_residency_ns <= idle_for)
            .map(|s| s.exit_latency_ns)
            .max()
            .unwrap_or(0)
    }

    /// CPU time of writing and of reading one message of `datasize` bytes
    /// on a pipe (`pipe`) or a unix stream socket, neither blocking nor
    /// waking anyone: the 100-byte costs above, and beyond 100 bytes the
    /// rest of the copy at 10 bytes per ns (copy_to/from_user of a few KiB
    /// runs at 10-20 GB/s).
    pub fn msg_ns(&self, pipe: bool, datasize: u64) -> (Ns, Ns) {
        let copy = datasize.saturating_sub(100) / 10;
        if pipe {
            (self.msg_write_pipe_ns + copy, self.msg_read_pipe_ns + copy)
        } else {
            (self.msg_write_socket_ns + copy, self.msg_read_socket_ns + copy)
        }
    }

    /// Time to refill `working_set` bytes after a migration: a same-LLC move
    /// refills only the private cache from L3, a cross-LLC move refills the
    /// whole working set from memory.
    pub fn refill_ns(&self, working_set: u64, same_llc: bool) -> Ns {
        if working_set == 0 {
            return 0;
        }
        if same_llc {
            working_set.min(self.l2_bytes) * 1_000 / self.refill_llc_bytes_per_us.max(1)
        } else {
            working_set * 1_000 / self.refill_mem_bytes_per_us.max(1)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idle_exit_depends_on_depth() {
        let mut c = CostModel::default();
        assert_eq!(c.idle_exit_ns(0), 0);
        assert_eq!(c.idle_exit_ns(10_000), 2_000);
        assert_eq!(c.idle_exit_ns(1_000_000), 130_000);
        c.cstates_off();
        assert_eq!(c.idle_exit_ns(1_000_000), 0);
    }

    #[test]
    fn message_costs_keep_the_old_constants_and_copy_term() {
        let c = CostModel::default();
        assert_eq!(c.msg_ns(true, 100), (1_500, 1_500));
        assert_eq!(c.msg_ns(false, 100), (2_500, 2_500));
        assert_eq!(c.msg_ns(false, 1), (2_500, 2_500));
        assert_eq!(c.msg_ns(true, 4_196), (1_500 + 409, 1_500 + 409));
    }

    #[test]
    fn refill_scales_with_distance() {
        let c = CostModel::default();
        assert_eq!(c.refill_ns(0, false), 0);
        assert!(c.refill_ns(4 << 20, false) > c.refill_ns(4 << 20, true));
        assert_eq!(c.refill_ns(4 << 20, true), c.refill_ns(8 << 20, true));
    }
}
