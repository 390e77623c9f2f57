/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * bad_cpu: inserts a task into the local DSQ of a CPU it may not run on.
 *
 * Test-only scheduler for ejection tests. Tasks that may run on every CPU
 * go to SCX_DSQ_GLOBAL. For a task with a restricted affinity mask, once
 * bad_after such enqueues have passed, ops.enqueue() picks the lowest CPU
 * outside the task's mask and inserts the task with
 * SCX_DSQ_LOCAL_ON | that CPU. The kernel refuses to put a task on a CPU
 * outside its cpumask and reports a runtime error, which ejects the
 * scheduler. The test therefore needs at least one pinned or affinity-
 * restricted task.
 *
 * Options (rodata):
 *   bad_after  0  restricted-task enqueues handled correctly before the bad one
 */
#include <scx/common.bpf.h>

char _license[] SEC("license") = "GPL";

const volatile u32 bad_after;

u64 nr_enqueued;
u64 nr_restricted;
u64 nr_bad_inserts;
s32 last_bad_cpu = -1;

UEI_DEFINE(uei);

/* Lowest CPU outside @p's mask, or -1 if @p may run everywhere. */
static s32 forbidden_cpu(struct task_struct *p)
{
	u32 nr_cpus = scx_bpf_nr_cpu_ids();
	s32 cpu;

	bpf_for(cpu, 0, nr_cpus) {
		if (!bpf_cpumask_test_cpu(cpu, p->cpus_ptr))
			return cpu;
	}
	return -1;
}

void BPF_STRUCT_OPS(bad_cpu_enqueue, struct task_struct *p, u64 enq_flags)
{
	s32 cpu;

	__sync_fetch_and_add(&nr_enqueued, 1);

	cpu = forbidden_cpu(p);
	if (cpu < 0 ||
	    __sync_fetch_and_add(&nr_restricted, 1) < bad_after) {
		scx_bpf_dsq_insert(p, SCX_DSQ_GLOBAL, SCX_SLICE_DFL, enq_flags);
		return;
	}

	__sync_fetch_and_add(&nr_bad_inserts, 1);
	last_bad_cpu = cpu;
	scx_bpf_dsq_insert(p, SCX_DSQ_LOCAL_ON | cpu, SCX_SLICE_DFL, enq_flags);
}

void BPF_STRUCT_OPS(bad_cpu_exit, struct scx_exit_info *ei)
{
	UEI_RECORD(uei, ei);
}

SCX_OPS_DEFINE(bad_cpu_ops,
	       .enqueue		= (void *)bad_cpu_enqueue,
	       .exit		= (void *)bad_cpu_exit,
	       .name		= "bad_cpu");
