//! sched_ext's invariants, checked after every event beside the fair and
//! RT ones (`Sim::assert_invariants`, core.rs) in debug builds, tests and
//! `schedlab run --check`. They hold between events, when no callback is in
//! progress; each failure names the task or CPU and the rule broken.

use crate::engine::Cpu;
use crate::sched::sim::Sim;

use super::dsq::DsqKind;
use super::ops::task_flags;
use super::{EnableState, OpsState};

impl Sim {
    /// Checks sched_ext's bookkeeping against its queues:
    /// - every task whose state names a DSQ position is in that DSQ at that
    ///   position, and every DSQ entry is a task that names it back;
    /// - a task being dispatched (`SCX_OPSS_DISPATCHING`) is in no DSQ;
    /// - each CPU's `scx.nr_running` equals the ext tasks queued on it;
    /// - each CPU's IMMED count equals the IMMED tasks in its local DSQ, so
    ///   it is at most the local DSQ's length.
    ///
    /// Cost: O(tasks + queued) per call, and nothing while no scheduler was
    /// ever loaded.
    pub fn check_scx(&self) {
        if self.scx.state == EnableState::Disabled && self.scx.dsqs.iter().all(|d| d.list.is_empty()) {
            return;
        }
        let n = self.nr_cpus();
        let kicks: usize = self.rqs.iter().map(|rq| rq.scx.kicks.len()).sum();
        assert_eq!(self.scx.kicks_queued as usize, kicks, "scx: the count of queued kicks drifted");
        let mut queued = vec![0u32; n];
        for (p, st) in self.tasks.iter().map(|t| &t.scx).enumerate() {
            if let Some((idx, key)) = st.dsq {
                let dsq = self.scx.dsqs.get(idx as usize).unwrap_or_else(|| panic!("scx: task {p} names DSQ index {idx}, which does not exist"));
                assert_eq!(dsq.list.get(&key).map(|&q| q as usize), Some(p), "scx: task {p} names DSQ {:#x} at {key:?} but is not there", dsq.id);
            }
            if st.ops_state == OpsState::Dispatching {
                assert!(st.dsq.is_none(), "scx: task {p} is being dispatched but sits in a DSQ");
            }
            if st.queued() {
                if let Some(c) = queued.get_mut(self.tasks[p].cpu as usize) {
                    *c += 1;
                }
            }
        }
        for (idx, dsq) in self.scx.dsqs.iter().enumerate() {
            for (key, p) in dsq.list.iter() {
                assert_eq!(self.task(p).scx.dsq, Some((idx as u32, key)), "scx: DSQ {:#x} holds task {p}, whose state names {:?}", dsq.id, self.task(p).scx.dsq);
            }
        }
        for (c, &nr) in queued.iter().enumerate() {
            let rq = &self.rqs[c].scx;
            assert_eq!(rq.nr_running, nr, "scx: cpu{c}'s nr_running is {} but {nr} ext tasks are queued there", rq.nr_running);
            let local = &self.scx.dsqs[self.scx.local(c as Cpu) as usize];
            debug_assert_eq!(local.kind, DsqKind::Local(c as Cpu));
            let immed = local.list.values().filter(|&p| self.task(p).scx.has_flag(task_flags::IMMED)).count() as u32;
            assert_eq!(rq.nr_immed, immed, "scx: cpu{c}'s IMMED count is {} but its local DSQ holds {immed} IMMED tasks", rq.nr_immed);
            assert!(rq.nr_immed as usize <= local.nr(), "scx: cpu{c}'s IMMED count {} exceeds its local DSQ's {} tasks", rq.nr_immed, local.nr());
        }
    }
}
