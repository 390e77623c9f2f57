//! The `struct cgroup`s lent to BPF code: one per task group of the
//! simulator's cgroup tree (`Sim::cg`), with the fields schedulers read
//! (`level`, `kn->id`, `ancestors[]`, `self.parent`), a `struct css_set`
//! per cgroup for `p->cgroups`, and the lookups behind
//! scx_bpf_task_cgroup(), bpf_cgroup_ancestor() and bpf_cgroup_from_id().
//!
//! Cgroup ids: the root is 1 (cgroup v2's root kernfs node), task group
//! `g` is `g + 1`. Objects are created when first needed and live as long
//! as the scheduler, so every address BPF keeps (as a CGRP_STORAGE owner,
//! say) stays valid. The simulator never removes a cgroup, so
//! bpf_cgroup_acquire() / release() only check the pointer.

use std::collections::BTreeMap;
use std::ffi::CString;

use schedlab::sched::sim::Sim;

use super::kobj::{CgroupC, CssC, CssSetC, KernfsNodeC, ScxTaskGroupC, TaskGroupC, CGROUP_SUBSYS_COUNT, CPU_CGRP_ID, ROOT_CGROUP_ID};

/// Deepest cgroup level the host lays out (`ancestors[]` has one slot per
/// level up to this); cgroup v2's own default limit is far above what a
/// scenario nests.
pub(super) const MAX_LEVEL: usize = 63;

/// `struct cgroup` followed by its `ancestors[]` (a flexible array in C).
#[repr(C)]
struct CgroupAlloc {
    cg: CgroupC,
    ancestors: [*mut CgroupC; MAX_LEVEL + 1],
}

struct CgroupObj {
    alloc: Box<CgroupAlloc>,
    _kn: Box<KernfsNodeC>,
    _name: CString,
    cset: Box<CssSetC>,
    /// The cpu controller's state (`cgrp->subsys[cpu_cgrp_id]`).
    tg: Box<TaskGroupC>,
}

/// The cgroups lent to one scheduler.
#[derive(Default)]
pub(super) struct Cgroups {
    objs: Vec<CgroupObj>,
    /// `struct cgroup` address -> task group.
    by_addr: BTreeMap<usize, u32>,
}

/// The cgroup id of task group `g`.
pub(super) fn id_of(g: u32) -> u64 {
    g as u64 + ROOT_CGROUP_ID
}

impl Cgroups {
    /// Creates the objects of task groups that have none yet (parents
    /// come before their children in `Sim::cg`). Err: a cgroup nested
    /// deeper than [`MAX_LEVEL`].
    pub(super) fn ensure(&mut self, sim: &Sim) -> Result<(), String> {
        while self.objs.len() < sim.cg.groups.len() {
            let g = self.objs.len() as u32;
            let tg = &sim.cg.groups[g as usize];
            let level = tg.depth as usize;
            if level > MAX_LEVEL {
                return Err(format!("cgroup {} is {level} levels deep; the host lays out at most {MAX_LEVEL}", tg.path));
            }
            let name = CString::new(tg.path.rsplit('/').next().unwrap_or("").replace('\0', " ")).unwrap_or_default();
            let mut kn = Box::new(KernfsNodeC { id: id_of(g), name: name.as_ptr() });
            let parent = tg.parent.map(|p| &mut self.objs[p as usize].alloc.cg as *mut CgroupC);
            let mut alloc = Box::new(CgroupAlloc {
                cg: CgroupC {
                    self_: CssC { cgroup: std::ptr::null_mut(), parent: std::ptr::null_mut() },
                    flags: 0,
                    level: level as i32,
                    max_depth: i32::MAX,
                    kn: &mut *kn,
                    subsys: [std::ptr::null_mut(); CGROUP_SUBSYS_COUNT],
                    ancestors: [],
                },
                ancestors: [std::ptr::null_mut(); MAX_LEVEL + 1],
            });
            let me: *mut CgroupC = &mut alloc.cg;
            alloc.cg.self_.cgroup = me;
            if let Some(p) = parent {
                // SAFETY: `p` is the parent's boxed cgroup, alive in `objs`.
                let pa = unsafe { &*p };
                alloc.cg.self_.parent = std::ptr::addr_of!(pa.self_).cast_mut();
                let pobj = &self.objs[tg.parent.unwrap_or(0) as usize].alloc;
                alloc.ancestors[..level].copy_from_slice(&pobj.ancestors[..level]);
            }
            alloc.ancestors[level] = me;
            let css: *mut CssC = &mut alloc.cg.self_;
            let cset = Box::new(CssSetC { subsys: [css; CGROUP_SUBSYS_COUNT], dfl_cgrp: me });
            let ptg = tg.parent.map_or(std::ptr::null_mut(), |p| &mut self.objs[p as usize].tg.css as *mut CssC);
            let mut tgc = Box::new(TaskGroupC { css: CssC { cgroup: me, parent: ptg }, scx: ScxTaskGroupC::default() });
            alloc.cg.subsys = [css; CGROUP_SUBSYS_COUNT];
            alloc.cg.subsys[CPU_CGRP_ID] = &mut tgc.css;
            self.by_addr.insert(me as usize, g);
            self.objs.push(CgroupObj { alloc, _kn: kn, _name: name, cset, tg: tgc });
        }
        Ok(())
    }

    /// Brings task group `g`'s `tg->scx` up to date with the simulator's
    /// cpu.weight, cpu.max and cpu.idle (what the kernel keeps there).
    pub(super) fn sync_tg(&mut self, sim: &Sim, g: u32) {
        let (Some(o), Some(tg)) = (self.objs.get_mut(g as usize), sim.cg.groups.get(g as usize)) else { return };
        o.tg.scx.weight = tg.weight;
        o.tg.scx.idle = tg.idle;
        o.tg.scx.bw_period_us = tg.max.period_ns / 1000;
        // RUNTIME_INF reads as u64::MAX, as the kernel stores it.
        o.tg.scx.bw_quota_us = tg.max.quota_ns.map_or(u64::MAX, |q| q / 1000);
        o.tg.scx.bw_burst_us = tg.max.burst_ns / 1000;
    }

    /// Task group `g`'s `struct cgroup` (None: not created yet).
    pub(super) fn ptr(&mut self, g: u32) -> Option<*mut CgroupC> {
        self.objs.get_mut(g as usize).map(|o| &mut o.alloc.cg as *mut CgroupC)
    }

    /// Task group `g`'s css_set address, or 0 if not created yet.
    pub(super) fn cset_addr(&self, g: u32) -> usize {
        self.objs.get(g as usize).map_or(0, |o| &*o.cset as *const CssSetC as usize)
    }

    /// The task group of a `struct cgroup` (or its `self` css) address.
    pub(super) fn group_of(&self, addr: usize) -> Option<u32> {
        self.by_addr.get(&addr).copied()
    }

    /// The task group with cgroup id `id`.
    pub(super) fn group_with_id(&self, id: u64) -> Option<u32> {
        let g = id.checked_sub(ROOT_CGROUP_ID)?;
        (g < self.objs.len() as u64).then_some(g as u32)
    }

    /// The task group at `level` above (or at) `g`: `ancestors[level]`.
    pub(super) fn ancestor(&self, g: u32, level: i32) -> Option<u32> {
        let o = self.objs.get(g as usize)?;
        if level < 0 || level > o.alloc.cg.level {
            return None;
        }
        self.group_of(o.alloc.ancestors[level as usize] as usize)
    }

    /// Children of `g` in creation order.
    fn children(&self, sim: &Sim, g: u32) -> Vec<u32> {
        (0..self.objs.len() as u32).filter(|&c| sim.cg.groups[c as usize].parent == Some(g)).collect()
    }

    /// The cgroups a bpf_iter_css walk from `start` visits, in order
    /// (kernel/bpf/cgroup_iter.c's orders: self only, descendants pre- or
    /// post-order with `start` included, ancestors up to the root, children).
    pub(super) fn walk(&self, sim: &Sim, start: u32, order: u64) -> Vec<u32> {
        fn pre(c: &Cgroups, sim: &Sim, g: u32, out: &mut Vec<u32>) {
            out.push(g);
            for ch in c.children(sim, g) {
                pre(c, sim, ch, out);
            }
        }
        fn post(c: &Cgroups, sim: &Sim, g: u32, out: &mut Vec<u32>) {
            for ch in c.children(sim, g) {
                post(c, sim, ch, out);
            }
            out.push(g);
        }
        let mut out = Vec::new();
        match order {
            1 => out.push(start),
            2 => pre(self, sim, start, &mut out),
            3 => post(self, sim, start, &mut out),
            4 => {
                let mut g = Some(start);
                while let Some(x) = g {
                    out.push(x);
                    g = sim.cg.groups[x as usize].parent;
                }
            }
            5 => out = self.children(sim, start),
            _ => {}
        }
        out
    }
}
