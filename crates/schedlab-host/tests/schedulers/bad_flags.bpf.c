/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * bad_flags: sets an ops flag the kernel does not know.
 *
 * Test-only scheduler. ops.flags carries bit 40, which is neither a public
 * SCX_OPS_* flag nor one of the kernel's internal bits. The kernel checks
 * ops.flags against SCX_OPS_ALL_FLAGS while it copies the struct_ops in
 * and refuses the load with -EINVAL; no callback ever runs and ops.exit()
 * is not called. Otherwise this is a plain global FIFO.
 */
#include <scx/common.bpf.h>

char _license[] SEC("license") = "GPL";

#define UNKNOWN_OPS_FLAG (1LLU << 40)

u64 nr_enqueued;

UEI_DEFINE(uei);

void BPF_STRUCT_OPS(bad_flags_enqueue, struct task_struct *p, u64 enq_flags)
{
	__sync_fetch_and_add(&nr_enqueued, 1);
	scx_bpf_dsq_insert(p, SCX_DSQ_GLOBAL, SCX_SLICE_DFL, enq_flags);
}

void BPF_STRUCT_OPS(bad_flags_exit, struct scx_exit_info *ei)
{
	UEI_RECORD(uei, ei);
}

SCX_OPS_DEFINE(bad_flags_ops,
	       .flags		= SCX_OPS_ENQ_LAST | UNKNOWN_OPS_FLAG,
	       .enqueue		= (void *)bad_flags_enqueue,
	       .exit		= (void *)bad_flags_exit,
	       .name		= "bad_flags");
