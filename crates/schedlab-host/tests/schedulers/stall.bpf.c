/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * stall: loses tasks on purpose so the watchdog fires.
 *
 * Test-only scheduler for ejection tests. ops.enqueue() puts tasks on
 * SCX_DSQ_GLOBAL, except every stall_nth enqueue, which it simply drops: the
 * task is never inserted into any DSQ and nobody will ever run it. A task
 * that stays runnable without running for longer than ops.timeout_ms makes
 * the kernel's watchdog eject the scheduler (SCX_EXIT_ERROR_STALL, "runnable
 * task stall"). The timeout is short here so tests do not wait 30 s.
 *
 * Options (rodata):
 *   stall_nth  8  drop every Nth enqueue (0 means drop only the first)
 */
#include <scx/common.bpf.h>

char _license[] SEC("license") = "GPL";

const volatile u32 stall_nth = 8;

u64 nr_enqueued;
u64 nr_dropped;
s32 last_dropped_pid = -1;

UEI_DEFINE(uei);

void BPF_STRUCT_OPS(stall_enqueue, struct task_struct *p, u64 enq_flags)
{
	u64 seq = __sync_fetch_and_add(&nr_enqueued, 1) + 1;
	bool drop = stall_nth ? !(seq % stall_nth) : seq == 1;

	if (drop) {
		__sync_fetch_and_add(&nr_dropped, 1);
		last_dropped_pid = p->pid;
		return;
	}

	scx_bpf_dsq_insert(p, SCX_DSQ_GLOBAL, SCX_SLICE_DFL, enq_flags);
}

void BPF_STRUCT_OPS(stall_exit, struct scx_exit_info *ei)
{
	UEI_RECORD(uei, ei);
}

SCX_OPS_DEFINE(stall_ops,
	       .enqueue		= (void *)stall_enqueue,
	       .exit		= (void *)stall_exit,
	       .timeout_ms	= 1000U,
	       .name		= "stall");
