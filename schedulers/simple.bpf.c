/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * simple: one shared queue for the whole machine.
 *
 * Algorithm
 * ---------
 * Every task that is not placed directly on an idle CPU goes to a single
 * user DSQ (SHARED_DSQ) which all CPUs consume from. The queue is ordered
 * in one of two ways:
 *
 *  - weighted virtual time (default): each task carries a virtual time in
 *    p->scx.dsq_vtime. When it stops running it is charged the part of its
 *    slice it used, scaled by 100 / weight, so a nice -5 task (weight ~335)
 *    advances about three times slower than a nice 0 task (weight 100) and
 *    gets about three times the CPU. The DSQ is vtime-ordered, so the task
 *    with the smallest vtime runs next.
 *
 *  - FIFO (rodata fifo_sched = true): insertion order, no vtime.
 *
 * Wakeup placement uses the kernel's default idle-CPU selection
 * (scx_bpf_select_cpu_dfl). If it found an idle CPU, the task is inserted
 * straight into that CPU's local DSQ from ops.select_cpu() and ops.enqueue()
 * is skipped. Everything else goes through ops.enqueue() into SHARED_DSQ,
 * and ops.dispatch() pulls the head of SHARED_DSQ into the dispatching CPU's
 * local DSQ.
 *
 * Global virtual time
 * -------------------
 * vtime_now follows the largest vtime of any task that started running. A
 * task that slept for a long time still has an old, small vtime; without a
 * limit it would monopolise the CPUs until it caught up. Its vtime is
 * therefore raised to at least vtime_now - one slice when it is queued:
 * sleeping earns at most one slice of credit. Tasks entering the scheduler
 * (ops.enable) start at vtime_now.
 *
 * There is no preemption: a task runs until its slice runs out or it blocks.
 * With one queue shared by every CPU, the head of the queue still gets a CPU
 * soon when there are enough CPUs.
 *
 * Statistics: a per-CPU array counts direct local insertions (index 0) and
 * SHARED_DSQ insertions (index 1); nr_dispatched counts successful moves
 * from SHARED_DSQ to a local DSQ.
 *
 * Options (rodata, set by the loader before load):
 *   fifo_sched  false  FIFO instead of weighted vtime (scx_simple -f)
 *   slice_ns    0      slice given to every task; 0 means SCX_SLICE_DFL
 */
#include <scx/common.bpf.h>

char _license[] SEC("license") = "GPL";

const volatile bool fifo_sched;
const volatile u64 slice_ns;

UEI_DEFINE(uei);

/*
 * The built-in DSQs (SCX_DSQ_GLOBAL, local DSQs) are FIFO only; a user DSQ
 * is needed to get vtime ordering.
 */
#define SHARED_DSQ 0

enum simple_stat_idx {
	STAT_LOCAL,	/* inserted into a local DSQ from ops.select_cpu() */
	STAT_GLOBAL,	/* inserted into SHARED_DSQ from ops.enqueue() */
	NR_STATS,
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(key_size, sizeof(u32));
	__uint(value_size, sizeof(u64));
	__uint(max_entries, NR_STATS);
} stats SEC(".maps");

/* Moves from SHARED_DSQ to a local DSQ that found a task. */
u64 nr_dispatched;

/* Largest vtime seen at ops.running(); the reference for the sleep credit. */
static u64 vtime_now;

static __always_inline u64 task_slice(void)
{
	return slice_ns ?: SCX_SLICE_DFL;
}

static void count(u32 idx)
{
	u64 *cnt = bpf_map_lookup_elem(&stats, &idx);

	if (cnt)
		(*cnt)++;
}

s32 BPF_STRUCT_OPS(simple_select_cpu, struct task_struct *p, s32 prev_cpu,
		   u64 wake_flags)
{
	bool found_idle = false;
	s32 cpu;

	cpu = scx_bpf_select_cpu_dfl(p, prev_cpu, wake_flags, &found_idle);
	if (found_idle) {
		/* The CPU is ours and idle: skip ops.enqueue() altogether. */
		count(STAT_LOCAL);
		scx_bpf_dsq_insert(p, SCX_DSQ_LOCAL, task_slice(), 0);
	}
	return cpu;
}

void BPF_STRUCT_OPS(simple_enqueue, struct task_struct *p, u64 enq_flags)
{
	u64 slice = task_slice();
	u64 floor, vtime;

	count(STAT_GLOBAL);

	if (fifo_sched) {
		scx_bpf_dsq_insert(p, SHARED_DSQ, slice, enq_flags);
		return;
	}

	/* A long sleep is worth at most one slice ahead of vtime_now. */
	vtime = p->scx.dsq_vtime;
	floor = vtime_now - slice;
	if (time_before(vtime, floor))
		vtime = floor;

	scx_bpf_dsq_insert_vtime(p, SHARED_DSQ, slice, vtime, enq_flags);
}

void BPF_STRUCT_OPS(simple_dispatch, s32 cpu, struct task_struct *prev)
{
	if (scx_bpf_dsq_move_to_local(SHARED_DSQ, 0))
		__sync_fetch_and_add(&nr_dispatched, 1);
}

void BPF_STRUCT_OPS(simple_running, struct task_struct *p)
{
	if (fifo_sched)
		return;

	/*
	 * Racy read-modify-write from several CPUs: a lost update only makes
	 * vtime_now lag briefly, and the next task that starts fixes it.
	 */
	if (time_after(p->scx.dsq_vtime, vtime_now))
		vtime_now = p->scx.dsq_vtime;
}

void BPF_STRUCT_OPS(simple_stopping, struct task_struct *p, bool runnable)
{
	u64 slice = task_slice();
	u64 used, weight;

	if (fifo_sched)
		return;

	/*
	 * p->scx.slice counts down while the task runs, so what is missing
	 * from the full slice is what it used. A yield zeroes the remaining
	 * slice and is charged as a full slice.
	 */
	used = p->scx.slice < slice ? slice - p->scx.slice : 0;
	weight = p->scx.weight ?: 1;

	scx_bpf_task_set_dsq_vtime(p, p->scx.dsq_vtime + used * 100 / weight);
}

void BPF_STRUCT_OPS(simple_enable, struct task_struct *p)
{
	scx_bpf_task_set_dsq_vtime(p, vtime_now);
}

s32 BPF_STRUCT_OPS_SLEEPABLE(simple_init)
{
	s32 ret;

	ret = scx_bpf_create_dsq(SHARED_DSQ, -1);
	if (ret)
		scx_bpf_error("cannot create SHARED_DSQ (%d)", ret);
	return ret;
}

void BPF_STRUCT_OPS(simple_exit, struct scx_exit_info *ei)
{
	UEI_RECORD(uei, ei);
}

SCX_OPS_DEFINE(simple_ops,
	       .select_cpu	= (void *)simple_select_cpu,
	       .enqueue		= (void *)simple_enqueue,
	       .dispatch	= (void *)simple_dispatch,
	       .running		= (void *)simple_running,
	       .stopping	= (void *)simple_stopping,
	       .enable		= (void *)simple_enable,
	       .init		= (void *)simple_init,
	       .exit		= (void *)simple_exit,
	       .name		= "simple");
