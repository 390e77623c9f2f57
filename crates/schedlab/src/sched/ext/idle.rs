//! Built-in idle tracking and the default CPU selection (ext_idle.c).
//!
//! A CPU is in the idle mask while it runs the idle task and nobody has
//! claimed it; `test_and_clear_cpu_idle` claims it. The SMT mask holds CPUs
//! whose whole core is idle.

use crate::machine::cpumask::CpuMask;
use crate::engine::{Cpu, TaskId};
use crate::sched::ext::abi::CpumaskC;
use crate::sched::ext::ops::{ops_flags, pick_idle_flags, Op};
use crate::sched::wf;
use crate::sched::sim::Sim;

impl Sim {
    /// update_builtin_idle() plus ops.update_idle(): `cpu` enters or leaves idle.
    pub(crate) fn scx_update_idle(&mut self, cpu: Cpu, idle: bool) {
        if !self.scx.enabled() {
            return;
        }
        if self.scx.has(Op::UpdateIdle) && !self.scx.bypassing {
            self.scx_call(Op::UpdateIdle, cpu, None, |o, s| o.update_idle(s, cpu, idle));
            if self.scx.ops_flags & ops_flags::KEEP_BUILTIN_IDLE == 0 {
                return;
            }
        }
        self.scx_set_builtin_idle(cpu, idle);
    }

    pub(crate) fn scx_set_builtin_idle(&mut self, cpu: Cpu, idle: bool) {
        let c = cpu as usize;
        let node = self.scx_cpu_node_if_enabled(c);
        let siblings = self.topo.smt_siblings(c);
        let masks = self.scx.idle_masks_mut(node);
        if idle {
            masks.cpu.set(c);
            if siblings.is_subset_of(&masks.cpu) {
                masks.smt.or_assign(siblings);
            }
        } else {
            masks.cpu.clear(c);
            masks.smt.andnot_assign(siblings);
        }
    }

    /// scx_idle_test_and_clear_cpu(): claim an idle CPU. Claiming one CPU
    /// of a core also takes the core out of the SMT mask.
    pub(crate) fn scx_test_and_clear_idle(&mut self, cpu: Cpu) -> bool {
        let c = cpu as usize;
        let node = self.scx_cpu_node_if_enabled(c);
        let siblings = self.topo.smt_siblings(c);
        let m = self.scx.idle_masks_mut(node);
        if m.smt.test(c) {
            m.smt.andnot_assign(siblings);
        }
        if m.cpu.test(c) {
            m.cpu.clear(c);
            true
        } else {
            false
        }
    }

    /// cpumask_any_and_distribute(): the first CPU of the idle mask `smt`
    /// (else `cpu`) of `node`, `allowed` and `extra` after this CPU's
    /// previous pick, wrapping, so that repeated picks spread out.
    fn any_and_distribute(&mut self, node: Option<usize>, smt: bool, allowed: &CpuMask, extra: Option<&CpuMask>) -> Option<usize> {
        let this = self.this_cpu as usize;
        let start = (self.rqs[this].scx.distribute_prev + 1) % self.nr_cpus();
        let m = self.scx.idle_masks(node);
        let idle = if smt { &m.smt } else { &m.cpu };
        let found = idle.next_and_wrap(allowed, extra, start)?;
        self.rqs[this].scx.distribute_prev = found;
        Some(found)
    }

    /// The node whose idle masks track `cpu`: its own with
    /// SCX_OPS_BUILTIN_IDLE_PER_NODE, else `None` (the global masks)
    /// (scx_cpu_node_if_enabled()).
    pub(crate) fn scx_cpu_node_if_enabled(&self, cpu: usize) -> Option<usize> {
        (self.scx.ops_flags & ops_flags::BUILTIN_IDLE_PER_NODE != 0).then(|| self.topo.node_of(cpu))
    }

    /// pick_idle_cpu_in_node(): an idle CPU of `allowed` in the idle masks
    /// of `node` (`None`: the global ones), whole idle cores first.
    fn pick_idle_cpu_in_node(&mut self, allowed: &CpuMask, node: Option<usize>, flags: u64) -> Option<Cpu> {
        self.pick_idle_cpu_in_node_and(allowed, None, node, flags)
    }

    /// pick_idle_cpu_in_node() over `allowed & extra`, without building
    /// the intersection.
    fn pick_idle_cpu_in_node_and(&mut self, allowed: &CpuMask, extra: Option<&CpuMask>, node: Option<usize>, flags: u64) -> Option<Cpu> {
        let smt_active = self.scx.smt_active;
        loop {
            let mut pick = None;
            if smt_active {
                pick = self.any_and_distribute(node, true, allowed, extra);
                if pick.is_none() && flags & pick_idle_flags::CORE != 0 {
                    return None;
                }
            }
            if pick.is_none() {
                pick = self.any_and_distribute(node, false, allowed, extra);
            }
            let cpu = pick? as Cpu;
            if self.scx_test_and_clear_idle(cpu) {
                return Some(cpu);
            }
        }
    }

    /// pick_idle_cpu_from_online_nodes(): the other nodes, nearest first
    /// (for_each_node_numadist(): by node_distance from `node`, ties by id).
    fn pick_idle_cpu_from_online_nodes(&mut self, allowed: &CpuMask, node: usize, flags: u64) -> Option<Cpu> {
        let mut others: Vec<usize> = (0..self.topo.nr_nodes()).filter(|&n| n != node).collect();
        let dist = &self.topo.node_distance;
        others.sort_by_key(|&n| (dist.get(node).and_then(|d| d.get(n)).copied().unwrap_or(u32::MAX), n));
        others.into_iter().find_map(|n| self.pick_idle_cpu_in_node(allowed, Some(n), flags))
    }

    /// scx_pick_idle_cpu(): an idle CPU in `allowed`, whole idle cores first.
    /// `node` is `None` when idle tracking is global; with per-node tracking
    /// the search starts in `node` and goes on to the other nodes, nearest
    /// first, unless SCX_PICK_IDLE_IN_NODE.
    pub(crate) fn scx_pick_idle(&mut self, allowed: &CpuMask, flags: u64, node: Option<usize>) -> Option<Cpu> {
        if let Some(c) = self.pick_idle_cpu_in_node(allowed, node, flags) {
            return Some(c);
        }
        match node {
            Some(n) if flags & pick_idle_flags::IN_NODE == 0 => self.pick_idle_cpu_from_online_nodes(allowed, n, flags),
            _ => None,
        }
    }

    pub(crate) fn node_mask(&self, node: usize) -> CpuMask {
        CpuMask::clone(&self.scx.node_masks[node])
    }

    /// scx_select_cpu_dfl(): the default wakeup placement. Returns the CPU
    /// and whether it was idle (and is now claimed). `flags` are
    /// SCX_PICK_IDLE_* (scx_bpf_select_cpu_and()). With per-node idle
    /// tracking the LLC and node searches look in prev's node's idle masks
    /// and the last one goes on to the other nodes, nearest first.
    ///
    /// Inlined up to the test for nothing idle; the search is out of line.
    #[inline]
    pub(crate) fn scx_select_cpu_dfl(&mut self, p: TaskId, prev: Cpu, wake_flags: u64, allowed: Option<&CpuMask>, flags: u64) -> (Cpu, bool) {
        self.scx.cost_acc += self.costs.scan_cpu_ns * 4;
        if self.scx_select_cpu_dfl_finds_none() {
            return (prev, false);
        }
        self.scx_select_cpu_dfl_search(p, prev, wake_flags, allowed, flags)
    }

    /// Whether [`scx_select_cpu_dfl`](Self::scx_select_cpu_dfl) answers
    /// prev, unclaimed, without searching or reading its `allowed` mask:
    /// nothing is idle anywhere (the whole-core mask is a subset of this
    /// one), so every step of the search would find nothing, claim nothing
    /// and leave the distribution cursor where it is. A busy machine's
    /// every wakeup comes here, before the affinity is lent out or
    /// intersected (or, for scx_bpf_select_cpu_and(), copied).
    #[inline]
    pub(crate) fn scx_select_cpu_dfl_finds_none(&self) -> bool {
        self.scx.ops_flags & ops_flags::BUILTIN_IDLE_PER_NODE == 0 && self.scx.idle.cpu.is_empty()
    }

    #[inline(never)]
    fn scx_select_cpu_dfl_search(&mut self, p: TaskId, prev: Cpu, wake_flags: u64, allowed: Option<&CpuMask>, flags: u64) -> (Cpu, bool) {
        // The search reads the task's affinity, not the task: it is lent out
        // for the search instead of copied (a heap copy per wakeup beyond
        // 256 CPUs), and put back whichever way the search ends.
        let task_mask = std::mem::replace(&mut self.task_mut(p).cpus_allowed, CpuMask::new(0));
        let r = match allowed {
            Some(a) => self.select_cpu_dfl_in(prev, wake_flags, &a.and(&task_mask), flags),
            None => self.select_cpu_dfl_in(prev, wake_flags, &task_mask, flags),
        };
        self.task_mut(p).cpus_allowed = task_mask;
        r
    }

    /// The body of scx_select_cpu_dfl() (7.3), in its order: a
    /// synchronous wakeup's prev or waker CPU; with SMT, prev's whole idle
    /// core, then an idle core in prev's LLC, node, anywhere; prev; prev's
    /// idle SMT sibling; an idle CPU in prev's LLC, node, anywhere. The LLC
    /// and node steps run only where the static keys enable them (an LLC
    /// that spans every CPU adds nothing to the last step). Nothing idle:
    /// prev, not claimed.
    fn select_cpu_dfl_in(&mut self, prev: Cpu, wake_flags: u64, allowed: &CpuMask, flags: u64) -> (Cpu, bool) {
        let this = self.this_cpu;
        let pc = prev as usize;
        let prev_ok = allowed.test(pc);
        let node = self.scx_cpu_node_if_enabled(pc);
        // The LLC and node searches look in `allowed` within these spans
        // (shared, not copied: no mask is built per wakeup).
        let llc = self.scx.selcpu_topo_llc.then(|| std::sync::Arc::clone(&self.scx.llc_masks[self.topo.llc_of(pc)]));
        let numa = self.scx.selcpu_topo_numa.then(|| std::sync::Arc::clone(&self.scx.node_masks[self.topo.node_of(pc)]));
        let spans = [llc.as_deref(), numa.as_deref()];
        if wake_flags & (wf::SYNC as u64) != 0 {
            // The waker's CPU shares the cache with an idle prev: no migration.
            if prev_ok && self.topo.cpus_share_cache(this as usize, pc) && self.scx_test_and_clear_idle(prev) {
                return (prev, true);
            }
            // The waker's local DSQ is empty and some CPU idles: the
            // waker's CPU (claimed if idle, taken either way).
            let waker_node = self.scx_cpu_node_if_enabled(this as usize);
            let exiting = self.rq(this).curr.is_some_and(|w| self.task(w).state == crate::sched::task::TaskState::Dead);
            let local = self.scx.local(this);
            if !exiting
                && self.scx.dsqs[local as usize].nr() == 0
                && (flags & pick_idle_flags::IN_NODE == 0 || waker_node == node)
                && !self.scx.idle_masks(waker_node).cpu.is_empty()
                && allowed.test(this as usize)
            {
                self.scx_test_and_clear_idle(this);
                return (this, true);
            }
        }
        if self.scx.smt_active {
            // A whole idle core: prev's, then in the LLC, node, anywhere.
            if prev_ok && self.scx.idle_masks(node).smt.test(pc) && self.scx_test_and_clear_idle(prev) {
                return (prev, true);
            }
            for span in spans.into_iter().flatten() {
                if let Some(c) = self.pick_idle_cpu_in_node_and(allowed, Some(span), node, pick_idle_flags::CORE) {
                    return (c, true);
                }
            }
            if let Some(c) = self.scx_pick_idle(allowed, flags | pick_idle_flags::CORE, node) {
                return (c, true);
            }
            if flags & pick_idle_flags::CORE != 0 {
                return (prev, false);
            }
        }
        if prev_ok && self.scx_test_and_clear_idle(prev) {
            return (prev, true);
        }
        if self.scx.smt_active {
            // prev's idle SMT sibling, in CPU order (a core has a few).
            let mut next = self.topo.smt_siblings(pc).first();
            while let Some(c) = next {
                if c != pc && allowed.test(c) && self.scx_test_and_clear_idle(c as Cpu) {
                    return (c as Cpu, true);
                }
                next = self.topo.smt_siblings(pc).next_set(c + 1);
            }
        }
        for span in spans.into_iter().flatten() {
            if let Some(c) = self.pick_idle_cpu_in_node_and(allowed, Some(span), node, 0) {
                return (c, true);
            }
        }
        match self.scx_pick_idle(allowed, flags, node) {
            Some(c) => (c, true),
            None => (prev, false),
        }
    }

    /// select_task_rq_scx(): ops.select_cpu(), or the default placement with
    /// a direct dispatch to the local DSQ when it found an idle CPU.
    pub(crate) fn scx_select_task_rq(&mut self, p: TaskId, prev: Cpu, wake_flags: u32) -> Cpu {
        let wf = wake_flags as u64;
        let cpu = if self.scx.has(Op::SelectCpu) && !self.scx.bypassing {
            let this = self.this_cpu;
            let cpu = self.scx_call(Op::SelectCpu, this, Some(p), |o, s| o.select_cpu(s, p, prev, wf)).unwrap_or(prev);
            if (cpu as usize) < self.nr_cpus() {
                cpu
            } else {
                self.scx_error(format!("invalid CPU {cpu} from ops.select_cpu()"));
                prev
            }
        } else {
            let (cpu, idle) = self.scx_select_cpu_dfl(p, prev, wf, None, 0);
            if idle {
                let s = self.scx_slice_dfl();
                let t = &mut self.task_mut(p).scx;
                t.c.scx.slice = s;
                t.ddsp = Some((crate::sched::ext::ops::dsq_id::LOCAL, 0));
            }
            cpu
        };
        self.task_mut(p).scx.selected_cpu = Some(cpu);
        self.task_mut(p).scx.c.scx.selected_cpu = cpu as i32;
        cpu
    }

    /// Refreshes the C copies of the idle masks for a scheduler to read.
    pub(crate) fn scx_idle_masks_c(&mut self, node: Option<usize>) -> (&CpumaskC, &CpumaskC) {
        let m = self.scx.idle_masks_mut(node);
        m.cpu_c.assign(&m.cpu);
        m.smt_c.assign(&m.smt);
        (&m.cpu_c, &m.smt_c)
    }
}

#[cfg(test)]
mod tests {
    use std::rc::Rc;

    use crate::engine::{Cpu, TaskId};
    use crate::sched::ext::ops::{pick_idle_flags, DefaultOps};
    use crate::sched::sim::Sim;
    use crate::sched::wf;

    /// A sched_ext simulation on `preset` with one task (its id returned).
    fn sim_on(preset: &str) -> (Sim, TaskId) {
        let toml = format!("seed = 1\nduration = \"10ms\"\n[machine]\npreset = \"{preset}\"\n[[workload]]\nkind = \"hog\"\ncount = 1\nrun = \"1ms\"\n");
        let s = crate::workload::scenario::Scenario::parse(&toml, "t.toml", &[]).unwrap();
        let mut sim = crate::workload::world::build(&s, "t.toml").unwrap();
        sim.scx_enable(Rc::new(DefaultOps)).unwrap();
        sim.run_until(0);
        let p = sim.tasks.iter().find(|t| t.workload == 0).expect("the hog").id;
        (sim, p)
    }

    /// Marks exactly the CPUs in `idle` idle in the built-in masks.
    fn idle_only(sim: &mut Sim, idle: &[usize]) {
        for c in 0..sim.nr_cpus() {
            sim.scx_set_builtin_idle(c as Cpu, idle.contains(&c));
        }
    }

    #[test]
    fn the_llc_and_node_steps_run_where_the_kernel_enables_them() {
        let keys = |preset: &str| {
            let (s, _) = sim_on(preset);
            (s.scx.selcpu_topo_llc, s.scx.selcpu_topo_numa)
        };
        // One LLC: nothing to prefer. Four LLCs on one node: the LLC only.
        // Two nodes of several LLCs each: both.
        assert_eq!(keys("4cpu"), (false, false));
        assert_eq!(keys("ryzen-3900x"), (true, false));
        assert_eq!(keys("epyc-2s-192"), (true, true));
    }

    #[test]
    fn prevs_idle_smt_sibling_comes_before_the_rest_of_the_llc() {
        // ryzen-3900x: CPU 4's sibling is 16; 5 shares their LLC. No core
        // is wholly idle, prev is busy: the sibling, although the LLC's
        // walk would meet 5 first.
        let (mut sim, p) = sim_on("ryzen-3900x");
        idle_only(&mut sim, &[5, 16]);
        assert_eq!(sim.scx_select_cpu_dfl(p, 4, 0, None, 0), (16, true));
        // Claimed: it is no longer idle.
        assert!(!sim.scx.idle_masks(None).cpu.test(16));
    }

    #[test]
    fn a_sync_wakeup_takes_the_wakers_cpu_when_something_idles() {
        // The waker (CPU 0) is in another LLC than prev (4) and busy, its
        // local DSQ is empty and CPU 20 idles: the waker's CPU.
        let (mut sim, p) = sim_on("ryzen-3900x");
        idle_only(&mut sim, &[20]);
        sim.this_cpu = 0;
        assert_eq!(sim.scx_select_cpu_dfl(p, 4, wf::SYNC as u64, None, 0), (0, true));
        // Nothing idle anywhere: no shortcut, and prev, unclaimed.
        idle_only(&mut sim, &[]);
        assert_eq!(sim.scx_select_cpu_dfl(p, 4, wf::SYNC as u64, None, 0), (4, false));
    }

    #[test]
    fn with_nothing_idle_the_search_returns_prev_and_moves_no_cursor() {
        let (mut sim, p) = sim_on("epyc-2s-192");
        idle_only(&mut sim, &[]);
        let cursors = |s: &Sim| s.rqs.iter().map(|rq| rq.scx.distribute_prev).collect::<Vec<_>>();
        let before = cursors(&sim);
        for flags in [0, pick_idle_flags::CORE] {
            assert_eq!(sim.scx_select_cpu_dfl(p, 7, 0, None, flags), (7, false));
        }
        assert_eq!(cursors(&sim), before);
        // One idle CPU in the other node is found, and claimed.
        idle_only(&mut sim, &[150]);
        assert_eq!(sim.scx_select_cpu_dfl(p, 7, 0, None, 0), (150, true));
        assert!(sim.scx.idle_masks(None).cpu.is_empty());
    }
}
