//! Getting tasks into DSQs: do_enqueue_task() and its fast paths, the
//! direct dispatch of a verdict select_cpu/enqueue gave,
//! find_dsq_for_dispatch(), dispatch_enqueue() (FIFO or vtime order,
//! custody, the DSQ locks) with local_dsq_post_enq(), and
//! dispatch_dequeue() (ext.c, 7.1). Taking tasks out of DSQs to run them
//! is `dispatch`.
use crate::engine::time::Ns;
use crate::engine::{Cpu, TaskId};
use crate::sched::features::Feature;
use crate::sched::ext::dsq::{Dsq, DsqIdx, DsqKey, DsqKind, DsqOrder};
use crate::sched::ext::ops::{dsq_id, enq_flags, task_flags, Op, SLICE_BYPASS_NS, SLICE_DFL_NS};
use crate::sched::ext::{rq_flags, OpsState, ScxSched, ScxTask};
use crate::sched::sim::Sim;
use crate::sched::task::{ClassId, TaskState};

impl Sim {
    /// The slice a task gets when the kernel, not the scheduler, picks it
    /// (sch->slice_dfl: SCX_SLICE_DFL; SCX_SLICE_BYPASS while bypassing, 6.19+).
    pub(crate) fn scx_slice_dfl(&self) -> u64 {
        if self.scx.bypassing && self.features.on(Feature::SCX_BYPASS_PERCPU) {
            SLICE_BYPASS_NS
        } else {
            SLICE_DFL_NS
        }
    }

    /// refill_task_slice_dfl().
    pub(crate) fn scx_refill_slice_dfl(&mut self, p: TaskId) {
        let s = self.scx_slice_dfl();
        self.task_mut(p).scx.cx_mut().slice = s;
        self.scx.stats.dfl_slice_refills += 1;
    }

    /// do_enqueue_task(): the kernel's fast paths, then ops.enqueue().
    ///
    /// Inlined up to the sticky test: a remote move (half the enqueues)
    /// goes straight to the local DSQ.
    #[inline]
    pub(crate) fn scx_do_enqueue(&mut self, cpu: Cpu, p: TaskId, flags: u64, sticky: Option<Cpu>) {
        if sticky == Some(cpu) {
            // Moved here for this CPU's local DSQ; no slice refill. The
            // DSQ is `cpu`'s local one by construction: its kind is not
            // looked up.
            self.scx_enqueue_local_dsq(self.scx.local(cpu), cpu, p, flags);
            return;
        }
        self.scx_do_enqueue_work(cpu, p, flags);
    }

    /// [`Sim::scx_do_enqueue`] of a task not moved here.
    #[inline(never)]
    fn scx_do_enqueue_work(&mut self, cpu: Cpu, p: TaskId, flags: u64) {
        // A fresh enqueue ends IMMED protection.
        let t = &mut self.tasks[p as usize].scx;
        t.set_flag(task_flags::IMMED, false);
        if self.scx.bypassing {
            t.ddsp = None;
            self.scx_refill_slice_dfl(p);
            let dsq = if self.features.on(Feature::SCX_BYPASS_PERCPU) {
                self.scx.bypass_dsq(cpu)
            } else {
                self.scx.global(self.topo.node_of(cpu as usize) as u32)
            };
            self.scx_dispatch_enqueue(dsq, p, flags);
            return;
        }
        // A verdict from select_cpu, or else one ops.enqueue gives, is
        // carried out below: one call site, which inlines it. The verdict
        // is taken in the lookup of the task that finds it.
        let verdict = match t.take_verdict() {
            Some(v) => v,
            None => {
                if !self.scx.has(Op::Enqueue) {
                    self.scx_refill_slice_dfl(p);
                    let g = self.scx.global(self.topo.node_of(cpu as usize) as u32);
                    self.scx_dispatch_enqueue(g, p, flags);
                    return;
                }
                self.scx.next_qseq += 1;
                let qseq = self.scx.next_qseq;
                t.ops_state = OpsState::Queueing;
                t.cx_mut().ops_state = 1 | qseq << 2;
                self.scx_call(Op::Enqueue, cpu, Some(p), |o, s| o.enqueue(s, p, flags));
                let t = &mut self.tasks[p as usize].scx;
                match t.take_verdict() {
                    Some(v) => v,
                    None => {
                        if t.ops_state == OpsState::Queueing {
                            // Not inserted directly: the BPF scheduler holds the task now.
                            t.ops_state = OpsState::Queued { qseq };
                            t.cx_mut().ops_state = 2 | qseq << 2;
                            t.set_flag(task_flags::IN_CUSTODY, true);
                        }
                        return;
                    }
                }
            }
        };
        self.scx_direct_dispatch(cpu, p, verdict, flags);
    }

    /// direct_dispatch(): carry out the verdict (DSQ id, flags) that
    /// select_cpu/enqueue gave, taken from the task.
    #[inline]
    fn scx_direct_dispatch(&mut self, cpu: Cpu, p: TaskId, (id, dflags): (u64, u64), flags: u64) {
        self.scx.stats.direct_dispatches += 1;
        let f = flags | dflags;
        let dsq = self.scx_find_dsq(cpu, id, p);
        // The DSQ's kind, looked up once, settles both the deferral and
        // which insert.
        match self.scx.dsqs[dsq as usize].kind {
            DsqKind::Local(target) if target != cpu => {
                // A remote local DSQ needs the target's lock: park the task
                // and defer the move (ddsp_deferred_locals).
                self.task_mut(p).scx.ddsp = Some((dsq_id::LOCAL_ON | target as u64, f));
                let r = &mut self.rqs[cpu as usize].scx;
                r.ddsp_deferred.push(p);
                r.deferred_pending = true;
                self.scx_schedule_deferred(cpu);
            }
            DsqKind::Local(target) => self.scx_enqueue_local_dsq(dsq, target, p, f),
            _ => self.scx_dispatch_enqueue_any(dsq, p, f),
        }
    }

    /// find_dsq_for_dispatch(): resolve a DSQ id as seen from `cpu`.
    ///
    /// Inlined for the common verdicts, SCX_DSQ_LOCAL and a user DSQ; the
    /// other built-in ids and the errors, which need the task's node, are
    /// out of line.
    #[inline]
    pub(crate) fn scx_find_dsq(&mut self, cpu: Cpu, id: u64, p: TaskId) -> DsqIdx {
        if id == dsq_id::LOCAL {
            return self.scx.local(cpu);
        }
        if id & dsq_id::BUILTIN == 0 {
            if let Some(&idx) = self.scx.user_dsqs.get(&id) {
                return idx;
            }
        }
        self.scx_find_dsq_other(id, p)
    }

    #[inline(never)]
    fn scx_find_dsq_other(&mut self, id: u64, p: TaskId) -> DsqIdx {
        let node = self.topo.node_of(self.task(p).cpu as usize) as u32;
        if id & dsq_id::LOCAL_ON == dsq_id::LOCAL_ON {
            let c = (id & dsq_id::LOCAL_CPU_MASK) as usize;
            if c < self.nr_cpus() {
                return self.scx.local(c as Cpu);
            }
            self.scx_error(format!("invalid CPU {c} in SCX_DSQ_LOCAL_ON dispatch verdict"));
            return self.scx.global(node);
        }
        if id == dsq_id::GLOBAL {
            return self.scx.global(node);
        }
        self.scx_error(format!("non-existent DSQ 0x{id:x}"));
        self.scx.global(node)
    }

    /// "comm[pid]" as ext.c prints tasks.
    pub(crate) fn task_comm(&self, p: TaskId) -> String {
        format!("{}[{}]", self.task(p).name, self.task(p).scx.c.pid)
    }

    /// dispatch_enqueue(): put `p` into `dsq` (FIFO, or by vtime with
    /// SCX_ENQ_DSQ_PRIQ).
    ///
    /// Inlined up to the test for a FIFO insert into a local DSQ (half the
    /// inserts: every remote move ends in one), which goes straight to
    /// [`Sim::scx_local_enqueue`].
    #[inline]
    pub(crate) fn scx_dispatch_enqueue(&mut self, dsq: DsqIdx, p: TaskId, flags: u64) {
        if let DsqKind::Local(cpu) = self.scx.dsqs[dsq as usize].kind {
            return self.scx_enqueue_local_dsq(dsq, cpu, p, flags);
        }
        self.scx_dispatch_enqueue_any(dsq, p, flags);
    }

    /// dispatch_enqueue() into `cpu`'s local DSQ `dsq`, whose kind the
    /// caller knows: the FIFO insert, unless SCX_ENQ_DSQ_PRIQ asks for a
    /// vtime one, which goes the long way to be refused.
    #[inline]
    fn scx_enqueue_local_dsq(&mut self, dsq: DsqIdx, cpu: Cpu, p: TaskId, flags: u64) {
        if flags & enq_flags::DSQ_PRIQ == 0 {
            self.scx_local_enqueue(dsq, cpu, p, flags);
        } else {
            self.scx_dispatch_enqueue_any(dsq, p, flags);
        }
    }

    /// [`Sim::scx_dispatch_enqueue`] in any case.
    #[inline(never)]
    fn scx_dispatch_enqueue_any(&mut self, dsq: DsqIdx, p: TaskId, flags: u64) {
        debug_assert!(self.task(p).scx.dsq.is_none(), "task {p} is already in a DSQ");
        let d = &self.scx.dsqs[dsq as usize];
        let kind = d.kind;
        let mut vtime = flags & enq_flags::DSQ_PRIQ != 0;
        if vtime && d.is_builtin() {
            self.scx_error("cannot use vtime ordering for built-in DSQs".into());
            vtime = false;
        } else if vtime && d.order == DsqOrder::Fifo {
            self.scx_error(format!("DSQ ID 0x{:016x} already had FIFO-enqueued tasks", d.id));
            vtime = false;
        } else if !vtime && d.order == DsqOrder::Vtime {
            self.scx_error(format!("DSQ ID 0x{:016x} already had PRIQ-enqueued tasks", d.id));
            vtime = true;
        }
        // Custody: a user DSQ keeps the task in the scheduler's hands; any
        // built-in DSQ takes it out (ops.dequeue, 7.1). A local DSQ needs
        // no DSQ lock (the rq lock covers it).
        match kind {
            DsqKind::Local(cpu) => {
                // A vtime insert refused above: a FIFO one.
                debug_assert!(!vtime);
                return self.scx_local_enqueue(dsq, cpu, p, flags & !enq_flags::DSQ_PRIQ);
            }
            DsqKind::User => {
                // Nothing is called between the lock and the insert: the
                // lock, the custody flag and the insert share one lookup
                // of the task and of the DSQ.
                let at = self.scx_dsq_lock_clock();
                let t = &mut self.tasks[p as usize].scx;
                let d = self.scx.lock_dsq(dsq, at, self.costs.dsq_lock_ns);
                t.set_flag(task_flags::IN_CUSTODY, true);
                return dsq_insert(d, dsq, t, p, flags, vtime);
            }
            _ => {
                self.scx_dsq_lock(dsq, 0);
                self.scx_leave_custody(p, 0);
            }
        }
        // The task and the DSQ are disjoint fields: both borrowed at once,
        // each looked up once.
        let t = &mut self.tasks[p as usize].scx;
        let d = &mut self.scx.dsqs[dsq as usize];
        dsq_insert(d, dsq, t, p, flags, vtime);
    }

    /// dispatch_enqueue() of a FIFO insert into `cpu`'s local DSQ `dsq`:
    /// none of the ordering checks apply (a local DSQ only ever takes FIFO
    /// inserts, its order is never set), nor a DSQ lock (the rq lock
    /// covers it).
    #[inline(never)]
    fn scx_local_enqueue(&mut self, dsq: DsqIdx, cpu: Cpu, p: TaskId, flags: u64) {
        let now = self.now();
        debug_assert!(self.task(p).scx.dsq.is_none(), "task {p} is already in a DSQ");
        debug_assert_eq!(self.scx.dsqs[dsq as usize].order, DsqOrder::Unset);
        self.scx_leave_custody(p, 0);
        let t = &mut self.tasks[p as usize].scx;
        let d = &mut self.scx.dsqs[dsq as usize];
        let key = d.fifo_key(flags & (enq_flags::HEAD | enq_flags::PREEMPT) != 0);
        link(d, dsq, t, p, key, false);
        let nr = d.nr();
        let c = t.cx_mut();
        // dsq_inc_nr(): IMMED tasks are counted, and one that cannot run at
        // once is reenqueued.
        if flags & enq_flags::IMMED != 0 {
            c.flags |= task_flags::IMMED;
        }
        let immed = c.flags & task_flags::IMMED != 0;
        t.local_since = Some(now);
        if immed {
            self.rqs[cpu as usize].scx.nr_immed += 1;
            if nr > 1 || !self.scx_rq_is_open(cpu, flags) {
                self.scx_schedule_reenq_local(cpu, 0);
            }
        }
        self.scx_local_post_enqueue(cpu, p, flags);
    }

    /// rq_is_open(): could a task inserted now run on `cpu` right away?
    pub(super) fn scx_rq_is_open(&self, cpu: Cpu, flags: u64) -> bool {
        let Some(curr) = self.rq(cpu).curr else { return true };
        if self.rqs[cpu as usize].scx.next_idle {
            return true;
        }
        match self.task(curr).class {
            ClassId::Rt | ClassId::Fair | ClassId::Idle => false,
            ClassId::Ext => {
                self.rqs[cpu as usize].scx.flags & rq_flags::IN_BALANCE != 0
                    || flags & enq_flags::PREEMPT != 0
                    || self.task(curr).state != TaskState::Runnable
            }
        }
    }

    /// local_dsq_post_enq(): preempt on SCX_ENQ_PREEMPT, wake an idle CPU.
    fn scx_local_post_enqueue(&mut self, cpu: Cpu, p: TaskId, flags: u64) {
        if self.rqs[cpu as usize].scx.flags & rq_flags::IN_BALANCE != 0 {
            return;
        }
        let curr = self.rq(cpu).curr;
        let mut preempt = false;
        if flags & enq_flags::PREEMPT != 0 {
            if let Some(c) = curr.filter(|&c| c != p && self.task(c).class == ClassId::Ext) {
                self.task_mut(c).scx.cx_mut().slice = 0;
                preempt = true;
            }
        }
        // rq->next_class below ext: the CPU is idle or about to go idle.
        if preempt || curr.is_none() || self.rqs[cpu as usize].scx.next_idle {
            self.resched_curr(cpu);
        }
    }

    /// dispatch_dequeue(): take `p` out of whatever DSQ holds it.
    #[inline]
    pub(crate) fn scx_dispatch_dequeue(&mut self, p: TaskId) {
        if self.task(p).scx.dsq.is_some() {
            self.scx_dispatch_dequeue_work(p);
        }
    }

    /// [`Sim::scx_dispatch_dequeue`] of a task known to sit in a DSQ.
    #[inline(never)]
    pub(crate) fn scx_dispatch_dequeue_work(&mut self, p: TaskId) {
        // Everything of the task at once: one lookup.
        let t = &mut self.tasks[p as usize].scx;
        let Some((dsq, key)) = t.dsq.take() else { return };
        let immed = t.has_flag(task_flags::IMMED);
        let since = t.local_since.take();
        let d = &mut self.scx.dsqs[dsq as usize];
        d.remove(key);
        if let DsqKind::Local(cpu) = d.kind {
            if immed {
                self.rqs[cpu as usize].scx.nr_immed -= 1;
            }
        }
        if let Some(since) = since {
            let stay = self.now() - since;
            let st = &mut self.scx.stats;
            if stay <= 1 {
                st.local_residence_instant += 1;
            } else {
                st.local_residence.get_or_insert_with(crate::sched::metrics::duration_histogram).saturating_record(stay);
            }
        }
    }

    /// When the calling CPU gets to a DSQ lock: once it has finished the
    /// scheduler work already charged to it (irq_until) and this
    /// operation's so far.
    #[inline]
    fn scx_dsq_lock_clock(&self) -> Ns {
        self.now().max(self.rq(self.this_cpu).irq_until) + self.scx.cost_acc
    }

    /// Takes a shared DSQ's lock for one operation that scans `scanned`
    /// tasks: waiting and holding are CPU time of the calling CPU.
    pub(crate) fn scx_dsq_lock(&mut self, dsq: DsqIdx, scanned: u64) {
        let at = self.scx_dsq_lock_clock();
        let hold = self.costs.dsq_lock_ns + scanned * self.costs.dsq_scan_task_ns;
        self.scx.lock_dsq(dsq, at, hold);
    }
}

impl ScxSched {
    /// Takes DSQ `dsq`'s lock at `at` (`Sim::scx_dsq_lock_clock`)
    /// for `hold` ns and charges the wait and the hold to the operation in
    /// progress; returns the DSQ, so that a caller inserting into it right
    /// away looks it up once. A method of the scheduler state alone: a
    /// caller may hold a task of `Sim::tasks` meanwhile.
    #[inline]
    pub(crate) fn lock_dsq(&mut self, dsq: DsqIdx, at: Ns, hold: Ns) -> &mut Dsq {
        let d = &mut self.dsqs[dsq as usize];
        let wait = d.lock(at, hold);
        self.cost_acc += wait + hold;
        self.stats.dsq_lock_wait_ns += wait;
        d
    }
}

/// dispatch_enqueue() into a shared DSQ once it is locked: the key in the
/// order asked for (FIFO at the head or tail, or by the task's vtime), then
/// the insert.
#[inline(always)]
fn dsq_insert(d: &mut Dsq, dsq: DsqIdx, t: &mut ScxTask, p: TaskId, flags: u64, vtime: bool) {
    let key = if vtime {
        d.order = DsqOrder::Vtime;
        d.vtime_key(t.cx().dsq_vtime)
    } else {
        if d.order == DsqOrder::Unset && d.kind == DsqKind::User {
            d.order = DsqOrder::Fifo;
        }
        d.fifo_key(flags & (enq_flags::HEAD | enq_flags::PREEMPT) != 0)
    };
    link(d, dsq, t, p, key, vtime);
}

/// The tail of dispatch_enqueue() for either order: files `p` under `key`
/// in `d` (DSQ `dsq`) and records where in the task and its C view. One
/// insert for both orders, its fast path inlined once per caller.
#[inline(always)]
fn link(d: &mut Dsq, dsq: DsqIdx, t: &mut ScxTask, p: TaskId, key: DsqKey, vtime: bool) {
    d.list.insert(key, p);
    t.dsq = Some((dsq, key));
    t.ops_state = OpsState::None;
    let c = t.cx_mut();
    c.dsq_seq = d.seq as u32;
    c.dsq_flags = vtime as u32;
    c.ops_state = 0;
}
