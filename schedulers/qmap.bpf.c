/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * qmap: five weight-class FIFOs of pids, drained in weighted round-robin.
 *
 * A test scheduler modelled on the kernel's scx_qmap. It is not meant to
 * schedule well; it is meant to drive many sched_ext paths (BPF-side
 * queueing, direct dispatch, LOCAL_ON insertion, IMMED enqueues, re-enqueue,
 * stalls, errors, dump) from one program whose behaviour is easy to predict.
 *
 * Queueing
 * --------
 * Tasks are kept BPF-side, by pid, in five BPF_MAP_TYPE_QUEUE maps. The
 * queue is chosen from the task's compound weight (p->scx.weight, 100 for
 * nice 0):
 *
 *	queue 0: weight <= 25		(about nice 6 and lower priority)
 *	queue 1: weight 26..50		(about nice 3..5)
 *	queue 2: weight 51..199		(about nice -3..2, nice 0 lands here)
 *	queue 3: weight 200..399	(about nice -6..-4)
 *	queue 4: weight >= 400		(about nice -7 and higher priority)
 *
 * Dispatch
 * --------
 * Each CPU keeps a cursor (dsp_idx) over the five queues and a quota
 * (dsp_cnt). When the quota of the current queue is used up the cursor
 * moves to the next queue and the quota becomes 2^idx: one task from queue
 * 0, two from queue 1, four from queue 2, eight from queue 3 and sixteen from
 * queue 4 per round. Popped pids are turned back into tasks and inserted
 * into a shared user DSQ (SHARED_DSQ), at most dsp_batch of them per
 * ops.dispatch() call; the CPU then moves the head of SHARED_DSQ to its
 * local DSQ. SHARED_DSQ is consumed first on every dispatch, so tasks
 * pulled by one CPU but left over can be picked by any CPU. A pulled task
 * that cannot run on the pulling CPU gets its own CPU kicked so it is not
 * stranded in SHARED_DSQ.
 *
 * Direct dispatch
 * ---------------
 * ops.select_cpu() looks for an idle CPU (the previous CPU first). If it
 * finds one it marks the task force_local and ops.enqueue() inserts it
 * straight into that CPU's local DSQ. ops.enqueue() does the same idle
 * search when ops.select_cpu() was skipped. A task re-enqueued by the kernel
 * (SCX_ENQ_REENQ) that finds no idle CPU goes to SHARED_DSQ and an idle CPU
 * is kicked to fetch it.
 *
 * IMMED (7.1)
 * -----------
 * With always_enq_immed (qmap -I) the loader sets SCX_OPS_ALWAYS_ENQ_IMMED
 * in ops.flags, and every insertion into a local DSQ here carries
 * SCX_ENQ_IMMED too: the task must start running on that CPU right away or
 * the kernel hands it back through ops.enqueue() with SCX_ENQ_REENQ. A
 * pinned task is then only placed directly on its CPU when that CPU is idle.
 * immed_stress_nth (qmap -F N) forces every Nth enqueue that is not a
 * re-enqueue into the local DSQ of the task's previous CPU (the prev_cpu
 * its last ops.select_cpu() saw; the task may have moved since), busy
 * or not, so that local DSQs hold more than one task, tasks land on remote
 * CPUs' local DSQs, and the IMMED hand-back paths run (seed 000).
 *
 * Failure injection
 * -----------------
 * stall_user_nth / stall_kernel_nth (qmap -t / -T) silently drop every Nth
 * enqueue of a user task / kernel thread: the task is never inserted
 * anywhere and the watchdog must eject the scheduler after timeout_ms.
 * dsp_inf_loop_after (qmap -l) makes ops.dispatch(), once more than that many
 * tasks were dispatched, keep inserting pid 2 (kthreadd, normally asleep)
 * into the local DSQ: the insert is ignored because the task is not queued,
 * so the kernel calls ops.dispatch() again and again. test_error_cnt
 * (writable, qmap -e) triggers scx_bpf_error() on the Nth enqueue.
 *
 * The BPF queue maps cannot remove an element, so ops.dequeue() only counts.
 * A pid may therefore be popped for a task that has since been dequeued,
 * dispatched elsewhere, or exited; the kernel ignores inserts of tasks the
 * BPF scheduler no longer owns, and a pid without a task is counted in
 * nr_lost_pids.
 *
 * Options (rodata unless noted; the scx_qmap flag each mirrors in brackets):
 *   slice_ns            0      slice per task, 0 means SCX_SLICE_DFL   [-s]
 *   dsp_batch           0      tasks moved to SHARED_DSQ per dispatch,
 *                              0 means 1                               [-b]
 *   stall_user_nth      0      drop every Nth user-task enqueue         [-t]
 *   stall_kernel_nth    0      drop every Nth kthread enqueue           [-T]
 *   dsp_inf_loop_after  0      dispatch livelock after N dispatches     [-l]
 *   print_shared_dsq    false  list SHARED_DSQ in ops.dump              [-P]
 *   suppress_dump       false  no qmap lines in ops.dump*               [-S]
 *   disallow_tgid       0      tgid whose tasks may not join SCHED_EXT  [-d]
 *   always_enq_immed    false  IMMED local inserts (loader sets the
 *                              SCX_OPS_ALWAYS_ENQ_IMMED flag)           [-I]
 *   immed_stress_nth    0      every Nth enqueue to prev CPU's local DSQ [-F]
 *   test_error_cnt (bss) 0     scx_bpf_error() on the Nth enqueue       [-e]
 */
#include <scx/common.bpf.h>

char _license[] SEC("license") = "GPL";

enum qmap_consts {
	SHARED_DSQ	= 0,
	NR_QUEUES	= 5,
	QUEUE_DEPTH	= 4096,
	KTHREADD_PID	= 2,
};

const volatile u64 slice_ns;
const volatile u32 dsp_batch;
const volatile u32 stall_user_nth;
const volatile u32 stall_kernel_nth;
const volatile u32 dsp_inf_loop_after;
const volatile bool print_shared_dsq;
const volatile bool suppress_dump;
const volatile s32 disallow_tgid;
const volatile bool always_enq_immed;
const volatile u32 immed_stress_nth;

/* Writable by the loader at any time: error on the Nth enqueue. */
u32 test_error_cnt;

/* Counters, read by tests and by the loader's status line. */
u64 nr_enqueued;	/* pushed to one of the five queues */
u64 nr_dispatched;	/* popped from a queue and inserted into SHARED_DSQ */
u64 nr_reenqueued;	/* ops.enqueue() calls with SCX_ENQ_REENQ */
u64 nr_dequeued;	/* ops.dequeue() calls */
u64 nr_ddsp_from_enq;	/* direct local inserts decided in ops.enqueue() */
u64 nr_immed_stress;	/* enqueues forced to a local DSQ by immed_stress_nth */
u64 nr_stalled;		/* enqueues dropped by stall_*_nth */
u64 nr_overflowed;	/* queue full, task went to SHARED_DSQ instead */
u64 nr_lost_pids;	/* popped pids without a task */
u64 nr_kicked_home;	/* pulled tasks that could not run on the puller */

UEI_DEFINE(uei);

/* The five FIFOs, and a scratch queue ops.dump() uses to walk them. */
struct pid_queue {
	__uint(type, BPF_MAP_TYPE_QUEUE);
	__uint(max_entries, QUEUE_DEPTH);
	__type(value, s32);
};

struct pid_queue fifo0 SEC(".maps");
struct pid_queue fifo1 SEC(".maps");
struct pid_queue fifo2 SEC(".maps");
struct pid_queue fifo3 SEC(".maps");
struct pid_queue fifo4 SEC(".maps");
struct pid_queue dump_scratch SEC(".maps");

struct qmap_task_ctx {
	bool	force_local;	/* ops.select_cpu() found an idle CPU */
	s32	last_queue;	/* queue of the last push, -1 if none */
	s32	prev_cpu;	/* prev_cpu of the last ops.select_cpu(), -1 if none */
	u64	nr_pushed;	/* how often this task went through a queue */
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct qmap_task_ctx);
} task_ctxs SEC(".maps");

struct qmap_cpu_ctx {
	u64	dsp_idx;	/* queue the cursor is on */
	u64	dsp_cnt;	/* tasks still to take from it this round */
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct qmap_cpu_ctx);
} cpu_ctxs SEC(".maps");

static __always_inline u64 task_slice(void)
{
	return slice_ns ?: SCX_SLICE_DFL;
}

/* Flags for an insertion into a local DSQ. */
static __always_inline u64 local_flags(u64 enq_flags)
{
	return always_enq_immed ? enq_flags | SCX_ENQ_IMMED : enq_flags;
}

static u32 queue_of_weight(u32 weight)
{
	if (weight <= 25)
		return 0;
	if (weight <= 50)
		return 1;
	if (weight < 200)
		return 2;
	if (weight < 400)
		return 3;
	return 4;
}

/*
 * One call per map keeps every helper call on a known map, which is what the
 * verifier wants to see.
 */
static long queue_push(u32 idx, s32 *pid)
{
	switch (idx) {
	case 0: return bpf_map_push_elem(&fifo0, pid, 0);
	case 1: return bpf_map_push_elem(&fifo1, pid, 0);
	case 2: return bpf_map_push_elem(&fifo2, pid, 0);
	case 3: return bpf_map_push_elem(&fifo3, pid, 0);
	case 4: return bpf_map_push_elem(&fifo4, pid, 0);
	default: return -EINVAL;
	}
}

static long queue_pop(u32 idx, s32 *pid)
{
	switch (idx) {
	case 0: return bpf_map_pop_elem(&fifo0, pid);
	case 1: return bpf_map_pop_elem(&fifo1, pid);
	case 2: return bpf_map_pop_elem(&fifo2, pid);
	case 3: return bpf_map_pop_elem(&fifo3, pid);
	case 4: return bpf_map_pop_elem(&fifo4, pid);
	default: return -EINVAL;
	}
}

static struct qmap_task_ctx *task_ctx(struct task_struct *p)
{
	struct qmap_task_ctx *tctx;

	tctx = bpf_task_storage_get(&task_ctxs, p, NULL, 0);
	if (!tctx)
		scx_bpf_error("qmap: no task context for %s[%d]", p->comm, p->pid);
	return tctx;
}

/*
 * An idle CPU @p can be put on directly, or -1. @prev_cpu is tried first. A
 * task pinned to one CPU may queue on it even when it is busy, except under
 * IMMED, where that would only bounce back.
 */
static s32 pick_direct_cpu(struct task_struct *p, s32 prev_cpu)
{
	s32 cpu;

	if (!always_enq_immed && p->nr_cpus_allowed == 1)
		return prev_cpu;

	if (scx_bpf_test_and_clear_cpu_idle(prev_cpu))
		return prev_cpu;

	cpu = scx_bpf_pick_idle_cpu(p->cpus_ptr, 0);
	return cpu >= 0 ? cpu : -1;
}

s32 BPF_STRUCT_OPS(qmap_select_cpu, struct task_struct *p, s32 prev_cpu,
		   u64 wake_flags)
{
	struct qmap_task_ctx *tctx;
	s32 cpu;

	tctx = task_ctx(p);
	if (!tctx)
		return prev_cpu;
	tctx->prev_cpu = prev_cpu;

	cpu = pick_direct_cpu(p, prev_cpu);
	if (cpu < 0)
		return prev_cpu;

	tctx->force_local = true;
	return cpu;
}

void BPF_STRUCT_OPS(qmap_enqueue, struct task_struct *p, u64 enq_flags)
{
	static u32 user_seq, kthread_seq, stress_seq;
	bool reenq = enq_flags & SCX_ENQ_REENQ;
	struct qmap_task_ctx *tctx;
	u64 slice = task_slice();
	u32 idx = queue_of_weight(p->scx.weight);
	s32 pid = p->pid;
	s32 cpu;

	if (reenq)
		__sync_fetch_and_add(&nr_reenqueued, 1);

	/* Deliberate stalls for watchdog tests: the task is lost for good. */
	if (p->flags & PF_KTHREAD) {
		if (stall_kernel_nth && !(++kthread_seq % stall_kernel_nth)) {
			__sync_fetch_and_add(&nr_stalled, 1);
			return;
		}
	} else if (stall_user_nth && !(++user_seq % stall_user_nth)) {
		__sync_fetch_and_add(&nr_stalled, 1);
		return;
	}

	if (test_error_cnt && !--test_error_cnt)
		scx_bpf_error("qmap: error requested through test_error_cnt");

	tctx = task_ctx(p);
	if (!tctx)
		return;

	/* IMMED stress: straight onto the current CPU, however busy it is. */
	if (immed_stress_nth && !reenq && !(++stress_seq % immed_stress_nth)) {
		cpu = scx_bpf_task_cpu(p);
		if (tctx->prev_cpu >= 0 &&
		    bpf_cpumask_test_cpu(tctx->prev_cpu, p->cpus_ptr))
			cpu = tctx->prev_cpu;
		tctx->force_local = false;
		__sync_fetch_and_add(&nr_immed_stress, 1);
		scx_bpf_dsq_insert(p, SCX_DSQ_LOCAL_ON | cpu, slice,
				   local_flags(enq_flags));
		return;
	}

	/* ops.select_cpu() reserved an idle CPU for us. */
	if (tctx->force_local) {
		tctx->force_local = false;
		scx_bpf_dsq_insert(p, SCX_DSQ_LOCAL, slice,
				   local_flags(enq_flags));
		return;
	}

	/* No ops.select_cpu() on this path: look for an idle CPU here. */
	if (!__COMPAT_is_enq_cpu_selected(enq_flags)) {
		cpu = pick_direct_cpu(p, scx_bpf_task_cpu(p));
		if (cpu >= 0) {
			__sync_fetch_and_add(&nr_ddsp_from_enq, 1);
			scx_bpf_dsq_insert(p, SCX_DSQ_LOCAL_ON | cpu, slice,
					   local_flags(enq_flags));
			return;
		}
	}

	/*
	 * Handed back by the kernel (its CPU was taken, or an IMMED insert
	 * could not run at once). Let any CPU have it, and wake one if we
	 * can find it idle.
	 */
	if (reenq) {
		scx_bpf_dsq_insert(p, SHARED_DSQ, slice, enq_flags);
		cpu = scx_bpf_pick_idle_cpu(p->cpus_ptr, 0);
		if (cpu >= 0)
			scx_bpf_kick_cpu(cpu, SCX_KICK_IDLE);
		return;
	}

	if (queue_push(idx, &pid)) {
		/* Queue full: SHARED_DSQ never refuses. */
		__sync_fetch_and_add(&nr_overflowed, 1);
		scx_bpf_dsq_insert(p, SHARED_DSQ, slice, enq_flags);
		return;
	}

	tctx->last_queue = idx;
	tctx->nr_pushed++;
	__sync_fetch_and_add(&nr_enqueued, 1);
}

void BPF_STRUCT_OPS(qmap_dequeue, struct task_struct *p, u64 deq_flags)
{
	__sync_fetch_and_add(&nr_dequeued, 1);
}

/*
 * Pop pids from the queue under the cursor into SHARED_DSQ until the batch or
 * the queue's quota is used up, or the queue is empty. Returns true when the
 * batch is used up (or the kernel has no dispatch slots left).
 */
static bool drain_one_queue(struct qmap_cpu_ctx *cctx, s32 this_cpu,
			    u32 *batch)
{
	struct task_struct *p;
	s32 pid;

	bpf_repeat(BPF_MAX_LOOPS) {
		if (queue_pop(cctx->dsp_idx, &pid))
			break;

		p = bpf_task_from_pid(pid);
		if (!p) {
			__sync_fetch_and_add(&nr_lost_pids, 1);
			continue;
		}

		__sync_fetch_and_add(&nr_dispatched, 1);
		scx_bpf_dsq_insert(p, SHARED_DSQ, task_slice(), 0);

		/*
		 * Any CPU can pop any pid. If this one cannot run @p, make sure
		 * a CPU that can looks at SHARED_DSQ soon.
		 */
		if (!bpf_cpumask_test_cpu(this_cpu, p->cpus_ptr)) {
			__sync_fetch_and_add(&nr_kicked_home, 1);
			scx_bpf_kick_cpu(scx_bpf_task_cpu(p), 0);
		}
		bpf_task_release(p);

		(*batch)--;
		cctx->dsp_cnt--;
		if (!*batch || !scx_bpf_dispatch_nr_slots())
			return true;
		if (!cctx->dsp_cnt)
			break;
	}
	return false;
}

void BPF_STRUCT_OPS(qmap_dispatch, s32 cpu, struct task_struct *prev)
{
	struct qmap_cpu_ctx *cctx;
	u32 batch = dsp_batch ?: 1;
	u32 zero = 0;

	/* Leftovers first: what any CPU pulled and did not run yet. */
	if (scx_bpf_dsq_move_to_local(SHARED_DSQ, local_flags(0)))
		return;

	if (dsp_inf_loop_after && nr_dispatched > dsp_inf_loop_after) {
		struct task_struct *p;

		/*
		 * kthreadd is almost always asleep, so this insert is dropped
		 * and the kernel keeps calling ops.dispatch(): a livelock that
		 * the kernel's own checks have to catch.
		 */
		p = bpf_task_from_pid(KTHREADD_PID);
		if (p) {
			scx_bpf_dsq_insert(p, SCX_DSQ_LOCAL, task_slice(), 0);
			bpf_task_release(p);
			return;
		}
	}

	cctx = bpf_map_lookup_elem(&cpu_ctxs, &zero);
	if (!cctx) {
		scx_bpf_error("qmap: no cpu context on CPU %d", cpu);
		return;
	}

	/* At most one full turn over the five queues per call. */
	bpf_repeat(NR_QUEUES) {
		if (!cctx->dsp_cnt) {
			cctx->dsp_idx = (cctx->dsp_idx + 1) % NR_QUEUES;
			cctx->dsp_cnt = 1ULL << cctx->dsp_idx;
		}

		if (drain_one_queue(cctx, cpu, &batch))
			break;

		/* Queue ran dry or its quota is spent: next one. */
		cctx->dsp_cnt = 0;
	}

	scx_bpf_dsq_move_to_local(SHARED_DSQ, local_flags(0));
}

s32 BPF_STRUCT_OPS(qmap_init_task, struct task_struct *p,
		   struct scx_init_task_args *args)
{
	struct qmap_task_ctx *tctx;

	if (disallow_tgid && p->tgid == disallow_tgid)
		p->scx.disallow = true;

	tctx = bpf_task_storage_get(&task_ctxs, p, NULL,
				    BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!tctx)
		return -ENOMEM;

	tctx->force_local = false;
	tctx->last_queue = -1;
	tctx->prev_cpu = -1;
	tctx->nr_pushed = 0;
	return 0;
}

/*
 * Print one FIFO without losing it: queue maps can only be popped, so move
 * every pid to the scratch queue while printing, then move them back.
 */
static void dump_queue(u32 idx)
{
	s32 pid;

	scx_bpf_dump("QMAP FIFO[%u]:", idx);

	bpf_repeat(QUEUE_DEPTH) {
		if (queue_pop(idx, &pid))
			break;
		bpf_map_push_elem(&dump_scratch, &pid, 0);
		scx_bpf_dump(" %d", pid);
	}

	bpf_repeat(QUEUE_DEPTH) {
		if (bpf_map_pop_elem(&dump_scratch, &pid))
			break;
		queue_push(idx, &pid);
	}

	scx_bpf_dump("\n");
}

void BPF_STRUCT_OPS(qmap_dump, struct scx_dump_ctx *dctx)
{
	struct task_struct *p;
	u32 i;

	if (suppress_dump)
		return;

	scx_bpf_dump("QMAP: enqueued=%llu dispatched=%llu reenqueued=%llu dequeued=%llu\n",
		     nr_enqueued, nr_dispatched, nr_reenqueued, nr_dequeued);
	scx_bpf_dump("QMAP: stalled=%llu immed_stress=%llu lost_pids=%llu overflowed=%llu\n",
		     nr_stalled, nr_immed_stress, nr_lost_pids, nr_overflowed);

	bpf_for(i, 0, NR_QUEUES)
		dump_queue(i);

	if (!print_shared_dsq)
		return;

	scx_bpf_dump("QMAP SHARED_DSQ (%d queued):",
		     scx_bpf_dsq_nr_queued(SHARED_DSQ));
	bpf_for_each(scx_dsq, p, SHARED_DSQ, 0)
		scx_bpf_dump(" %s[%d]", p->comm, p->pid);
	scx_bpf_dump("\n");
}

void BPF_STRUCT_OPS(qmap_dump_cpu, struct scx_dump_ctx *dctx, s32 cpu, bool idle)
{
	struct qmap_cpu_ctx *cctx;
	u32 zero = 0;

	if (suppress_dump || idle)
		return;

	cctx = bpf_map_lookup_percpu_elem(&cpu_ctxs, &zero, cpu);
	if (!cctx)
		return;

	scx_bpf_dump("QMAP: dsp_idx=%llu dsp_cnt=%llu",
		     cctx->dsp_idx, cctx->dsp_cnt);
}

void BPF_STRUCT_OPS(qmap_dump_task, struct scx_dump_ctx *dctx,
		    struct task_struct *p)
{
	struct qmap_task_ctx *tctx;

	if (suppress_dump)
		return;

	tctx = bpf_task_storage_get(&task_ctxs, p, NULL, 0);
	if (!tctx)
		return;

	scx_bpf_dump("QMAP: force_local=%d last_queue=%d nr_pushed=%llu",
		     tctx->force_local, tctx->last_queue, tctx->nr_pushed);
}

s32 BPF_STRUCT_OPS_SLEEPABLE(qmap_init)
{
	s32 ret;

	ret = scx_bpf_create_dsq(SHARED_DSQ, -1);
	if (ret)
		scx_bpf_error("qmap: cannot create SHARED_DSQ (%d)", ret);
	return ret;
}

void BPF_STRUCT_OPS(qmap_exit, struct scx_exit_info *ei)
{
	UEI_RECORD(uei, ei);
}

SCX_OPS_DEFINE(qmap_ops,
	       .select_cpu	= (void *)qmap_select_cpu,
	       .enqueue		= (void *)qmap_enqueue,
	       .dequeue		= (void *)qmap_dequeue,
	       .dispatch	= (void *)qmap_dispatch,
	       .init_task	= (void *)qmap_init_task,
	       .dump		= (void *)qmap_dump,
	       .dump_cpu	= (void *)qmap_dump_cpu,
	       .dump_task	= (void *)qmap_dump_task,
	       .init		= (void *)qmap_init,
	       .exit		= (void *)qmap_exit,
	       .timeout_ms	= 5000U,
	       .name		= "qmap");
