//! Fair group scheduling (fair.c's CONFIG_FAIR_GROUP_SCHED parts): each
//! task group has, per CPU, a runqueue of its own and an entity queued in
//! its parent's runqueue. Enqueue and dequeue walk up the hierarchy
//! (for_each_sched_entity), the pick walks down it, and a group entity's
//! weight is the group's shares spread over the CPUs by the load each
//! carries (calc_group_shares), refreshed where fair.c refreshes it
//! (update_cfs_group on enqueue, dequeue and the tick).
//!
//! Not modelled: a group entity is never delayed (DELAY_DEQUEUE applies
//! to tasks; a group entity leaves when its runqueue empties), a group
//! entity's slice is its runqueue's shortest slice when it is enqueued and
//! is not refreshed while it stays queued, and load averages are not
//! propagated up the hierarchy (each runqueue's average follows its own
//! queued weight, so a move between CPUs reaches the root through the
//! group entities' shares).

use crate::engine::time::Ns;
use crate::engine::{Cpu, TaskId};
use crate::sched::cgroup::{Cq, Se, GSE, MIN_SHARES, ROOT_TG};
use crate::sched::rq::CfsRq;
use crate::sched::sim::Sim;
use crate::sched::task::{LoadWeight, Policy, SchedEntity};
use crate::sched::{deq, enq};

impl Sim {
    /// A runqueue by its id: the CPU's root one or a group's. The group
    /// case is out of line, so the flat path is one compare and an index.
    #[inline(always)]
    pub(crate) fn cfs(&self, q: Cq) -> &CfsRq {
        if q.tg != ROOT_TG {
            return self.group_cfs(q);
        }
        &self.rqs[q.cpu as usize].cfs
    }

    /// The fair runqueue `q`, mutably.
    #[inline(always)]
    pub(crate) fn cfs_mut(&mut self, q: Cq) -> &mut CfsRq {
        if q.tg != ROOT_TG {
            return self.group_cfs_mut(q);
        }
        &mut self.rqs[q.cpu as usize].cfs
    }

    #[cold]
    #[inline(never)]
    fn group_cfs(&self, q: Cq) -> &CfsRq {
        &self.cg.cfs_rqs[q.tg as usize * self.cg.nr_cpus + q.cpu as usize]
    }

    #[cold]
    #[inline(never)]
    fn group_cfs_mut(&mut self, q: Cq) -> &mut CfsRq {
        let n = self.cg.nr_cpus;
        &mut self.cg.cfs_rqs[q.tg as usize * n + q.cpu as usize]
    }

    /// An entity by its id: a task's, or a group's on one CPU (out of line).
    #[inline(always)]
    pub(crate) fn se(&self, e: Se) -> &SchedEntity {
        if e & GSE != 0 {
            return self.group_se(e);
        }
        &self.tasks[e as usize].se
    }

    /// An entity by its id, mutably.
    #[inline(always)]
    pub(crate) fn se_mut(&mut self, e: Se) -> &mut SchedEntity {
        if e & GSE != 0 {
            return self.group_se_mut(e);
        }
        &mut self.tasks[e as usize].se
    }

    #[cold]
    #[inline(never)]
    fn group_se(&self, e: Se) -> &SchedEntity {
        &self.cg.ses[(e & !GSE) as usize]
    }

    #[cold]
    #[inline(never)]
    fn group_se_mut(&mut self, e: Se) -> &mut SchedEntity {
        &mut self.cg.ses[(e & !GSE) as usize]
    }

    /// [`Sim::cfs`] with group scheduling as a compile-time switch, as
    /// CONFIG_FAIR_GROUP_SCHED is in the kernel: the fair paths are built
    /// twice, and with `G = false` (no cgroup but the root, so every
    /// runqueue is a CPU's root one and every entity a task's) the group
    /// cases and their branches are not there at all. [`FairClass`]'s
    /// entry points pick the build with `cg.enabled()`, which is fixed once
    /// the world is built.
    ///
    /// [`FairClass`]: crate::sched::fair::FairClass
    #[inline(always)]
    pub(crate) fn cfs_g<const G: bool>(&self, q: Cq) -> &CfsRq {
        if G {
            return self.cfs(q);
        }
        debug_assert_eq!(q.tg, ROOT_TG, "a group runqueue on the flat path");
        &self.rqs[q.cpu as usize].cfs
    }

    /// [`Sim::cfs_mut`], built with or without groups (see [`Sim::cfs_g`]).
    #[inline(always)]
    pub(crate) fn cfs_mut_g<const G: bool>(&mut self, q: Cq) -> &mut CfsRq {
        if G {
            return self.cfs_mut(q);
        }
        debug_assert_eq!(q.tg, ROOT_TG, "a group runqueue on the flat path");
        &mut self.rqs[q.cpu as usize].cfs
    }

    /// [`Sim::se`], built with or without groups (see [`Sim::cfs_g`]).
    #[inline(always)]
    pub(crate) fn se_g<const G: bool>(&self, e: Se) -> &SchedEntity {
        if G {
            return self.se(e);
        }
        debug_assert_eq!(e & GSE, 0, "a group entity on the flat path");
        &self.tasks[e as usize].se
    }

    /// [`Sim::se_mut`], built with or without groups (see [`Sim::cfs_g`]).
    #[inline(always)]
    pub(crate) fn se_mut_g<const G: bool>(&mut self, e: Se) -> &mut SchedEntity {
        if G {
            return self.se_mut(e);
        }
        debug_assert_eq!(e & GSE, 0, "a group entity on the flat path");
        &mut self.tasks[e as usize].se
    }

    /// [`Sim::cfs_rq_of`], built with or without groups (see [`Sim::cfs_g`]).
    #[inline(always)]
    pub(crate) fn cfs_rq_of_g<const G: bool>(&self, e: Se) -> Cq {
        if G {
            return self.cfs_rq_of(e);
        }
        Cq::root(self.tasks[e as usize].cpu)
    }

    /// [`Sim::parent_entity`], built with or without groups (see [`Sim::cfs_g`]).
    #[inline(always)]
    pub(crate) fn parent_entity_g<const G: bool>(&self, e: Se) -> Option<Se> {
        if G {
            return self.parent_entity(e);
        }
        None
    }

    /// The group and CPU of a group entity.
    #[inline]
    fn gse_group(&self, e: Se) -> (u32, Cpu) {
        let i = (e & !GSE) as usize;
        ((i / self.cg.nr_cpus) as u32, (i % self.cg.nr_cpus) as Cpu)
    }

    /// cfs_rq_of(): the runqueue an entity is queued in.
    #[inline]
    pub(crate) fn cfs_rq_of(&self, e: Se) -> Cq {
        if e & GSE == 0 {
            let t = &self.tasks[e as usize];
            Cq { cpu: t.cpu, tg: t.cgrp }
        } else {
            let (g, cpu) = self.gse_group(e);
            Cq { cpu, tg: self.cg.groups[g as usize].parent.unwrap_or(ROOT_TG) }
        }
    }

    /// group_cfs_rq(): the runqueue a group entity stands for.
    #[inline]
    pub(crate) fn group_cfs_rq(&self, e: Se) -> Cq {
        debug_assert!(e & GSE != 0);
        let (g, cpu) = self.gse_group(e);
        Cq { cpu, tg: g }
    }

    /// parent_entity(): the entity of the group an entity is queued in.
    #[inline]
    pub(crate) fn parent_entity(&self, e: Se) -> Option<Se> {
        let q = self.cfs_rq_of(e);
        if q.tg == ROOT_TG {
            None
        } else {
            Some(GSE | self.cg.idx(q.tg, q.cpu) as u32)
        }
    }

    /// update_se() for a group entity: its exec_start and runtime total.
    // Group paths only: kept out of line so the flat paths stay small.
    #[cold]
    #[inline(never)]
    pub(crate) fn update_se_group(&mut self, e: Se) -> Ns {
        let now = self.now();
        let se = self.se_mut(e);
        if now <= se.exec_start {
            return 0;
        }
        let delta = now - se.exec_start;
        se.exec_start = now;
        se.sum_exec_runtime += delta;
        delta
    }

    /// Adds to h_nr_queued / h_nr_runnable of every runqueue from the
    /// entity's up to the root (set_delayed / clear_delayed and the
    /// enqueue and dequeue walks).
    pub(crate) fn add_h_nr<const G: bool>(&mut self, e: Se, queued: i32, runnable: i32) {
        self.balance_touch(self.cfs_rq_of_g::<G>(e).cpu);
        let mut e = e;
        loop {
            let q = self.cfs_rq_of_g::<G>(e);
            let cfs = self.cfs_mut_g::<G>(q);
            cfs.h_nr_queued = cfs.h_nr_queued.wrapping_add_signed(queued);
            cfs.h_nr_runnable = cfs.h_nr_runnable.wrapping_add_signed(runnable);
            if G && self.cfs_rq_throttled(q) {
                return;
            }
            match self.parent_entity_g::<G>(e) {
                Some(pe) => e = pe,
                None => return,
            }
        }
    }

    /// set_next_buddy(): nominates the entity at every level.
    pub(crate) fn set_next_buddy(&mut self, p: TaskId) {
        let mut e = p;
        loop {
            let q = self.cfs_rq_of(e);
            self.cfs_mut(q).next = Some(e);
            match self.parent_entity(e) {
                Some(pe) => e = pe,
                None => return,
            }
        }
    }

    /// An entity's depth: 0 in the root runqueue.
    fn se_depth(&self, e: Se) -> u32 {
        let tg = self.cfs_rq_of(e).tg;
        self.cg.groups[tg as usize].depth
    }

    /// find_matching_se(): the ancestors of two entities that share a runqueue.
    pub(crate) fn find_matching_se(&self, a: Se, b: Se) -> (Se, Se) {
        let (mut a, mut b) = (a, b);
        let (mut da, mut db) = (self.se_depth(a), self.se_depth(b));
        while da > db {
            a = self.parent_entity(a).expect("deeper entity has a parent");
            da -= 1;
        }
        while db > da {
            b = self.parent_entity(b).expect("deeper entity has a parent");
            db -= 1;
        }
        while self.cfs_rq_of(a) != self.cfs_rq_of(b) {
            a = self.parent_entity(a).expect("entities meet at the root");
            b = self.parent_entity(b).expect("entities meet at the root");
        }
        (a, b)
    }

    /// se_is_idle(): a SCHED_IDLE task, or the entity of a cpu.idle group.
    pub(crate) fn se_is_idle(&self, e: Se) -> bool {
        if e & GSE == 0 {
            self.task(e).policy == Policy::Idle
        } else {
            self.cg.groups[self.gse_group(e).0 as usize].idle
        }
    }

    /// update_tg_load_avg(): publishes a group runqueue's load average into
    /// the group's total when it moved by more than 1/64.
    // Group paths only: kept out of line so the flat paths stay small.
    #[cold]
    #[inline(never)]
    pub(crate) fn update_tg_load_avg(&mut self, q: Cq) {
        let i = self.cg.idx(q.tg, q.cpu);
        let load = self.cfs(q).avg.load_avg;
        let contrib = self.cg.load_contrib[i];
        let delta = load as i64 - contrib as i64;
        if delta.unsigned_abs() > contrib / 64 {
            self.cg.groups[q.tg as usize].load_avg += delta;
            self.cg.load_contrib[i] = load;
        }
    }

    /// calc_group_shares(): the group's shares times this CPU's part of the
    /// group's load, within [MIN_SHARES, shares].
    fn calc_group_shares(&self, q: Cq) -> u64 {
        let tg = &self.cg.groups[q.tg as usize];
        let cfs = self.cfs(q);
        let load = cfs.load_weight.max(cfs.avg.load_avg);
        let contrib = self.cg.load_contrib[self.cg.idx(q.tg, q.cpu)];
        let tg_weight = (tg.load_avg - contrib as i64 + load as i64).max(0) as u64;
        let shares = tg.shares * load;
        let shares = shares.checked_div(tg_weight).unwrap_or(shares);
        shares.clamp(MIN_SHARES, tg.shares.max(MIN_SHARES))
    }

    /// update_cfs_group(): a group entity takes its current share.
    #[inline]
    pub(crate) fn update_cfs_group<const G: bool>(&mut self, e: Se) {
        if G && e & GSE != 0 {
            self.update_group_entity_shares(e);
        }
    }

    /// update_cfs_group()'s work for a group entity.
    #[cold]
    #[inline(never)]
    fn update_group_entity_shares(&mut self, e: Se) {
        let gq = self.group_cfs_rq(e);
        let shares = self.calc_group_shares(gq);
        if self.se(e).load.weight == shares {
            return;
        }
        let q = self.cfs_rq_of(e);
        self.reweight_entity(q, e, shares);
    }

    /// reweight_entity(): a new weight for an entity, keeping its lag and
    /// its relative deadline in service time (a queued entity is taken out,
    /// rescaled and placed back).
    pub(crate) fn reweight_entity(&mut self, q: Cq, e: Se, weight: u64) {
        let is_curr = self.cfs(q).curr == Some(e);
        let on_rq = self.se(e).on_rq;
        if on_rq {
            if is_curr {
                self.update_curr::<true>(q);
            } else {
                self.dequeue_timeline::<true>(q, e);
            }
            self.update_entity_lag::<true>(q, e);
            let se = self.se_mut(e);
            se.deadline = se.deadline.wrapping_sub(se.vruntime);
            se.rel_deadline = true;
            let w = se.load.weight;
            let cfs = self.cfs_mut(q);
            cfs.nr_queued -= 1;
            cfs.load_weight -= w;
        }
        let se = self.se_mut(e);
        let (old_w, new_w) = (se.load.weight as i128, weight.max(1) as i128);
        se.vlag = (se.vlag as i128 * old_w / new_w) as i64;
        if se.rel_deadline {
            se.deadline = (se.deadline as i64 as i128 * old_w / new_w) as i64 as u64;
        }
        se.load = LoadWeight { weight, inv_weight: inv_weight(weight) };
        if on_rq {
            self.place_entity::<true>(q, e, 0);
            let cfs = self.cfs_mut(q);
            cfs.load_weight += weight;
            cfs.nr_queued += 1;
            if !is_curr {
                self.enqueue_timeline::<true>(q, e);
            }
        }
    }

    /// enqueue_task_fair(): the task into its group's runqueue, then each
    /// group entity that was not queued into its parent's; the groups above
    /// count the task and refresh their shares.
    pub(crate) fn enqueue_task_fair<const G: bool>(&mut self, cpu: Cpu, p: TaskId, flags: u32) {
        self.balance_touch(cpu);
        let q = self.cfs_rq_of_g::<G>(p);
        debug_assert_eq!(q.cpu, cpu);
        if flags & enq::DELAYED != 0 {
            self.requeue_delayed_entity::<G>(q, p);
            return;
        }
        self.enqueue_entity::<G>(q, p, flags);
        let cfs = self.cfs_mut_g::<G>(q);
        cfs.h_nr_queued += 1;
        cfs.h_nr_runnable += 1;
        if G && self.cfs_rq_throttled(q) {
            // enqueue_throttle: the task is not counted on the CPU.
            self.add_nr_running(cpu, -1);
            return;
        }
        let mut e = p;
        while let Some(pe) = self.parent_entity_g::<G>(e) {
            let pq = self.cfs_rq_of_g::<G>(pe);
            if !self.se_g::<G>(pe).on_rq {
                let slice = self.cfs_min_slice::<G>(self.group_cfs_rq(pe));
                if slice != u64::MAX {
                    self.se_mut_g::<G>(pe).slice = slice;
                }
                self.enqueue_entity::<G>(pq, pe, enq::WAKEUP);
            } else {
                self.update_load_avg::<G>(pq, Some(pe));
                self.update_cfs_group::<G>(pe);
            }
            let cfs = self.cfs_mut_g::<G>(pq);
            cfs.h_nr_queued += 1;
            cfs.h_nr_runnable += 1;
            if self.cfs_rq_throttled(pq) {
                self.add_nr_running(cpu, -1);
                return;
            }
            e = pe;
        }
    }

    /// dequeue_task_fair() / dequeue_entities(): the task out of its
    /// group's runqueue, and each group entity whose runqueue that emptied
    /// out of its parent's. Returns false for a delayed dequeue.
    pub(crate) fn dequeue_task_fair<const G: bool>(&mut self, cpu: Cpu, p: TaskId, flags: u32) -> bool {
        self.balance_touch(cpu);
        let q = self.cfs_rq_of_g::<G>(p);
        debug_assert_eq!(q.cpu, cpu);
        let was_delayed = self.task(p).se.sched_delayed;
        if !self.dequeue_entity::<G>(q, p, flags) {
            return false;
        }
        let runnable = u32::from(!was_delayed);
        let cfs = self.cfs_mut_g::<G>(q);
        cfs.h_nr_queued -= 1;
        cfs.h_nr_runnable -= runnable;
        let mut empty = cfs.load_weight == 0;
        if G && self.cfs_rq_throttled(q) {
            // The task was not counted on the CPU: finish_dequeue's decrement is undone.
            self.add_nr_running(cpu, 1);
            return true;
        }
        let mut e = p;
        while let Some(pe) = self.parent_entity_g::<G>(e) {
            let pq = self.cfs_rq_of_g::<G>(pe);
            if empty && self.se_g::<G>(pe).on_rq {
                self.dequeue_entity::<G>(pq, pe, deq::SLEEP);
                empty = self.cfs_g::<G>(pq).load_weight == 0;
            } else {
                empty = false;
                self.update_load_avg::<G>(pq, Some(pe));
                self.update_cfs_group::<G>(pe);
            }
            let cfs = self.cfs_mut_g::<G>(pq);
            cfs.h_nr_queued -= 1;
            cfs.h_nr_runnable -= runnable;
            if self.cfs_rq_throttled(pq) {
                self.add_nr_running(cpu, 1);
                return true;
            }
            e = pe;
        }
        true
    }

    /// sched_move_task(): a task changes group. It is taken off its queue
    /// and the CPU (DEQUEUE_SAVE | DEQUEUE_MOVE), its load average moves
    /// with it (task_change_group_fair), and it is put back in the new
    /// group's runqueue.
    pub(crate) fn sched_move_task(&mut self, p: TaskId, g: u32) {
        if self.task(p).class != crate::sched::task::ClassId::Fair {
            // Only the fair class queues by group (ext: ext/cgroup.rs).
            self.sched_move_task_other(p, g);
            return;
        }
        self.finish_delayed_dequeue(p);
        let c = self.sched_change_begin(p, deq::MOVE);
        // detach_task_cfs_rq / attach_task_cfs_rq: the average changes runqueue.
        let old = self.cfs_rq_of(p);
        let w = self.task(p).se.load.weight;
        let mut avg = self.task(p).se.avg;
        let now = self.now();
        self.cfs_mut(old).avg.detach(&avg, w);
        self.balance_touch(old.cpu);
        self.task_mut(p).cgrp = g;
        self.scx_cgroup_move_task(p);
        let new = self.cfs_rq_of(p);
        let cfs = self.cfs_mut(new);
        let (lw, nr, run) = (cfs.load_weight, cfs.h_nr_runnable as u64, cfs.curr.is_some());
        cfs.avg.update_rq(now, lw, nr, run);
        cfs.avg.attach(&mut avg, w);
        self.task_mut(p).se.avg = avg;
        self.sched_change_end(p, c, enq::MOVE);
        if c.running {
            self.resched_curr(c.cpu);
        } else if c.queued {
            self.wakeup_preempt(c.cpu, p, 0);
        }
    }

    /// task_h_load(): a task's share of its CPU's load, through the group
    /// entities above it (update_cfs_rq_h_load).
    pub(crate) fn task_h_load_group(&self, p: TaskId) -> u64 {
        let mut load = self.task(p).se.avg.load_avg as u128;
        let mut e = p;
        while let Some(pe) = self.parent_entity(e) {
            let gq = self.group_cfs_rq(pe);
            let num = self.se(pe).avg.load_avg.max(self.se(pe).load.weight.min(1)) as u128;
            load = load * num / (self.cfs(gq).avg.load_avg as u128 + 1);
            e = pe;
        }
        load as u64
    }
}

/// The inverse weight (2^32 / w) the fixed-point divisions use
/// (__update_inv_weight).
pub(crate) fn inv_weight(w: u64) -> u32 {
    (1u64 << 32).checked_div(w).map_or(u32::MAX, |v| v.min(u32::MAX as u64) as u32)
}
