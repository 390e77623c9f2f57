/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * recurse: unbounded recursion in ops.enqueue().
 *
 * Test-only scheduler for fault containment (issue 13). A global FIFO
 * whose fault_after-th enqueue walks a "chain" recursively with a stop
 * condition that never holds, until the stack overflows. BPF has 512
 * bytes of stack and the verifier bounds calls to 8 frames; natively the
 * thread's stack runs out (SIGSEGV on the guard page, handled on the
 * alternate signal stack), which schedlab turns into an error exit naming
 * ops.enqueue and the stack overflow.
 *
 * Options (rodata):
 *   fault_after  20  enqueue number that recurses (0 means 1)
 *   stop_at      ~0  depth at which the recursion would stop
 */
#include <scx/common.bpf.h>

char _license[] SEC("license") = "GPL";

const volatile u32 fault_after = 20;
const volatile u64 stop_at = ~0ULL;

u64 nr_enqueued;
u64 nr_exit_calls;

UEI_DEFINE(uei);

static __attribute__((noinline)) u64 walk(u64 depth, volatile u8 *parent)
{
	volatile u8 frame[256];

	frame[0] = parent ? parent[0] + 1 : 0;
	frame[255] = (u8)depth;
	if (depth == stop_at)
		return frame[0];
	return walk(depth + 1, frame) + frame[255];
}

void BPF_STRUCT_OPS(recurse_enqueue, struct task_struct *p, u64 enq_flags)
{
	u64 seq = __sync_fetch_and_add(&nr_enqueued, 1) + 1;

	if (seq == (fault_after ?: 1))
		p->scx.dsq_vtime += walk(0, NULL);

	scx_bpf_dsq_insert(p, SCX_DSQ_GLOBAL, SCX_SLICE_DFL, enq_flags);
}

void BPF_STRUCT_OPS(recurse_exit, struct scx_exit_info *ei)
{
	nr_exit_calls++;
	UEI_RECORD(uei, ei);
}

SCX_OPS_DEFINE(recurse_ops,
	       .enqueue		= (void *)recurse_enqueue,
	       .exit		= (void *)recurse_exit,
	       .name		= "recurse");
