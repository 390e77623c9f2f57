//! `SEC("tp_btf/NAME")` programs other than `sched_switch` (struct_ops.rs
//! hosts that one): each is called with the kernel tracepoint's arguments
//! (a BTF-enabled raw tracepoint gets them as an array of u64, one per
//! `TP_PROTO` argument) where the simulator does what the kernel traces.
//!
//! - `cgroup_attach_task(struct cgroup *dst_cgrp, const char *path,
//!   struct task_struct *task, bool threadgroup)`: after a write to
//!   cgroup.procs or cgroup.threads moved tasks (scx_layered re-matches
//!   the moved tasks to layers); `path` is the cgroup's path (`/` for the
//!   root);
//! - `task_rename(struct task_struct *task, const char *comm)`: before a
//!   task's name changes (scx_layered re-matches it, and reads its
//!   `scx_cmd` join/leave commands from the new name). schedlab's
//!   workloads name tasks once; `Sim::set_task_comm()` renames;
//! - `hw_pressure_update(int cpu, unsigned long hw_pressure)`: when a
//!   CPU's capacity pressure changes (scx_p2dq's thermal tracking, compiled
//!   on arm64 only). schedlab's machines have no thermal pressure, so
//!   nothing fires it in a run; `Sim::scx_trace_event()` does.
//!
//! A `?` after the name (`tp_btf/hw_pressure_update?`) makes the attach
//! optional in libbpf; here every named tracepoint attaches.

use std::ffi::CString;

use schedlab::sched::ext::ops::TraceEvent;
use schedlab::sched::sim::Sim;

use super::kobj::Who;
use super::state::Callee;
use super::{rtfns, HostedScheduler};

/// The tracepoints [`HostedScheduler::fire_tracepoint`] calls programs of.
pub(crate) const HOSTED: &[&str] = &["cgroup_attach_task", "task_rename", "hw_pressure_update"];

/// A C string for a tracepoint argument (NULs become spaces).
fn c_string(s: &str) -> CString {
    CString::new(s.replace('\0', " ")).unwrap_or_default()
}

impl HostedScheduler {
    /// Runs the program attached to `ev`'s tracepoint, if any, with its
    /// arguments (strings live for the call).
    pub(crate) fn fire_tracepoint(&self, sim: &mut Sim, ev: &TraceEvent) {
        let name = ev.name();
        let Some(&f) = self.tracepoints.get(name) else { return };
        if self.state.dead() {
            return;
        }
        let text;
        let mut ctx: [u64; 4] = match ev {
            TraceEvent::CgroupAttachTask { cgrp, leader, threadgroup } => {
                let path = sim.cg.groups.get(*cgrp as usize).map_or(String::new(), |g| g.path.clone());
                text = c_string(if path.is_empty() { "/" } else { &path });
                let cg = rtfns::cgroup_ptr(sim, &self.state, *cgrp) as u64;
                let task = self.state.who_ptr(sim, Who::Task(*leader)) as u64;
                [cg, text.as_ptr() as u64, task, u64::from(*threadgroup)]
            }
            TraceEvent::TaskRename { task, comm } => {
                text = c_string(comm);
                let t = self.state.who_ptr(sim, Who::Task(*task)) as u64;
                [t, text.as_ptr() as u64, 0, 0]
            }
            TraceEvent::HwPressureUpdate { cpu, pressure } => {
                text = c_string("");
                // `int cpu`, sign-extended as the kernel passes it.
                [*cpu as i32 as i64 as u64, *pressure, 0, 0]
            }
        };
        self.state.call_c(sim, Callee::Tracepoint(name), f, [ctx.as_mut_ptr() as u64, 0, 0, 0]);
        drop(text);
    }
}
