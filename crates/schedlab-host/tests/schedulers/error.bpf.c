/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * error: reports a runtime error through scx_bpf_error().
 *
 * Test-only scheduler for ejection tests. It is a global FIFO (every task
 * goes to SCX_DSQ_GLOBAL) until the error_after-th enqueue, which calls
 * scx_bpf_error(). The kernel records the message, ejects the scheduler with
 * SCX_EXIT_ERROR_BPF, and ops.exit() sees it. The task of that enqueue is
 * still inserted so that nothing is lost before the ejection takes effect.
 *
 * Options (rodata):
 *   error_after  100  enqueue number that triggers the error (0 means 1)
 */
#include <scx/common.bpf.h>

char _license[] SEC("license") = "GPL";

const volatile u32 error_after = 100;

u64 nr_enqueued;
bool error_raised;

UEI_DEFINE(uei);

void BPF_STRUCT_OPS(error_enqueue, struct task_struct *p, u64 enq_flags)
{
	u64 seq = __sync_fetch_and_add(&nr_enqueued, 1) + 1;
	u32 limit = error_after ?: 1;

	if (seq == limit) {
		error_raised = true;
		scx_bpf_error("error.bpf.c: deliberate error at enqueue %llu (%s[%d])",
			      seq, p->comm, p->pid);
	}

	scx_bpf_dsq_insert(p, SCX_DSQ_GLOBAL, SCX_SLICE_DFL, enq_flags);
}

void BPF_STRUCT_OPS(error_exit, struct scx_exit_info *ei)
{
	UEI_RECORD(uei, ei);
}

SCX_OPS_DEFINE(error_ops,
	       .enqueue		= (void *)error_enqueue,
	       .exit		= (void *)error_exit,
	       .name		= "error");
