/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * cpu0: run everything on CPU 0.
 *
 * A deliberately terrible scheduler, modelled on the kernel's scx_cpu0
 * (added with the 6.19 bypass-mode scalability series, seed 002). It piles
 * every runnable task onto CPU 0 so that, when the scheduler is disabled or
 * the kernel falls back to bypass mode, the bypass path starts from the worst
 * possible task concentration: one CPU with a very long queue and all other
 * CPUs idle. Without bypass-mode load balancing that queue takes too long to
 * drain and tasks hang.
 *
 * Algorithm
 * ---------
 * ops.select_cpu() always answers CPU 0, so wakeups are queued on CPU 0's
 * runqueue (the kernel substitutes an allowed CPU for tasks that may not run
 * there). ops.enqueue() inserts every task that may run on CPU 0 into one
 * FIFO user DSQ (DSQ_CPU0), and only CPU 0's ops.dispatch() consumes it;
 * the other CPUs never dispatch anything and stay idle. If the task is not
 * on CPU 0 when it is queued (e.g. it was running elsewhere when the
 * scheduler was loaded), CPU 0 is kicked so it looks at the queue; moving
 * the task to CPU 0's local DSQ migrates it there.
 *
 * A task that may not run on CPU 0 at all cannot be helped by CPU 0; it is
 * queued on the local DSQ of the CPU it is on, which it is allowed to use.
 *
 * With use_local_on the user DSQ is skipped and tasks are inserted directly
 * into CPU 0's local DSQ (SCX_DSQ_LOCAL_ON | 0); the kernel moves them to
 * CPU 0 and wakes it. Same concentration, no ops.dispatch() involvement.
 *
 * Statistics: a per-CPU array counts local-DSQ insertions (index 0) and
 * CPU 0 insertions (index 1); nr_dispatched counts moves from DSQ_CPU0.
 *
 * Options (rodata):
 *   use_local_on  false  insert into SCX_DSQ_LOCAL_ON | 0 instead of DSQ_CPU0
 *   slice_ns      0      slice per task, 0 means SCX_SLICE_DFL
 */
#include <scx/common.bpf.h>

char _license[] SEC("license") = "GPL";

const volatile bool use_local_on;
const volatile u64 slice_ns;

UEI_DEFINE(uei);

/* The user DSQ only CPU 0 consumes. */
#define DSQ_CPU0 0

enum cpu0_stat_idx {
	STAT_LOCAL,	/* task may not run on CPU 0: its own CPU's local DSQ */
	STAT_CPU0,	/* queued for CPU 0 */
	NR_STATS,
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(key_size, sizeof(u32));
	__uint(value_size, sizeof(u64));
	__uint(max_entries, NR_STATS);
} stats SEC(".maps");

u64 nr_dispatched;

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

s32 BPF_STRUCT_OPS(cpu0_select_cpu, struct task_struct *p, s32 prev_cpu,
		   u64 wake_flags)
{
	return 0;
}

void BPF_STRUCT_OPS(cpu0_enqueue, struct task_struct *p, u64 enq_flags)
{
	if (!bpf_cpumask_test_cpu(0, p->cpus_ptr)) {
		count(STAT_LOCAL);
		scx_bpf_dsq_insert(p, SCX_DSQ_LOCAL, task_slice(), enq_flags);
		return;
	}

	count(STAT_CPU0);

	if (use_local_on) {
		scx_bpf_dsq_insert(p, SCX_DSQ_LOCAL_ON | 0, task_slice(),
				   enq_flags);
		return;
	}

	scx_bpf_dsq_insert(p, DSQ_CPU0, task_slice(), enq_flags);

	/* Queued from another CPU: CPU 0 may be idle and not know. */
	if (scx_bpf_task_cpu(p) != 0)
		scx_bpf_kick_cpu(0, SCX_KICK_IDLE);
}

void BPF_STRUCT_OPS(cpu0_dispatch, s32 cpu, struct task_struct *prev)
{
	if (cpu != 0)
		return;

	if (scx_bpf_dsq_move_to_local(DSQ_CPU0, 0))
		__sync_fetch_and_add(&nr_dispatched, 1);
}

s32 BPF_STRUCT_OPS_SLEEPABLE(cpu0_init)
{
	s32 ret;

	ret = scx_bpf_create_dsq(DSQ_CPU0, -1);
	if (ret)
		scx_bpf_error("cpu0: cannot create DSQ_CPU0 (%d)", ret);
	return ret;
}

void BPF_STRUCT_OPS(cpu0_exit, struct scx_exit_info *ei)
{
	UEI_RECORD(uei, ei);
}

SCX_OPS_DEFINE(cpu0_ops,
	       .select_cpu	= (void *)cpu0_select_cpu,
	       .enqueue		= (void *)cpu0_enqueue,
	       .dispatch	= (void *)cpu0_dispatch,
	       .init		= (void *)cpu0_init,
	       .exit		= (void *)cpu0_exit,
	       .name		= "cpu0");
