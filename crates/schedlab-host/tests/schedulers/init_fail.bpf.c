/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * init_fail: ops.init() fails, so the scheduler never gets enabled.
 *
 * Test-only scheduler. ops.init() returns -ENOMEM. The kernel aborts the
 * enable (no task ever switches to SCHED_EXT) with an error exit
 * ("ops.init() failed (-12)", kind SCX_EXIT_ERROR), and still calls
 * ops.exit(), which records it in uei; SCX_EFLAG_INITIALIZED stays clear in
 * the exit info because ops.init() never succeeded. ops.enqueue() exists
 * only to make this a complete scheduler; it must never run (nr_enqueued
 * stays 0).
 */
#include <scx/common.bpf.h>

char _license[] SEC("license") = "GPL";

u64 nr_enqueued;
u64 nr_init_calls;

UEI_DEFINE(uei);

void BPF_STRUCT_OPS(init_fail_enqueue, struct task_struct *p, u64 enq_flags)
{
	__sync_fetch_and_add(&nr_enqueued, 1);
	scx_bpf_dsq_insert(p, SCX_DSQ_GLOBAL, SCX_SLICE_DFL, enq_flags);
}

s32 BPF_STRUCT_OPS_SLEEPABLE(init_fail_init)
{
	__sync_fetch_and_add(&nr_init_calls, 1);
	return -ENOMEM;
}

void BPF_STRUCT_OPS(init_fail_exit, struct scx_exit_info *ei)
{
	UEI_RECORD(uei, ei);
}

SCX_OPS_DEFINE(init_fail_ops,
	       .enqueue		= (void *)init_fail_enqueue,
	       .init		= (void *)init_fail_init,
	       .exit		= (void *)init_fail_exit,
	       .name		= "init_fail");
