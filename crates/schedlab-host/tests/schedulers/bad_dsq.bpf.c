/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * bad_dsq: inserts a task into a DSQ that was never created.
 *
 * Test-only scheduler for ejection tests. The first bad_after enqueues go to
 * SCX_DSQ_GLOBAL as normal; the next one is inserted into user DSQ
 * BOGUS_DSQ, which ops.init() never created. The kernel finds no such DSQ
 * and reports a runtime error ("non-existent DSQ"), which ejects the
 * scheduler with SCX_EXIT_ERROR; every task falls back to the fair class.
 *
 * Options (rodata):
 *   bad_after  0  good enqueues before the bad one
 */
#include <scx/common.bpf.h>

char _license[] SEC("license") = "GPL";

/* Any id with the builtin bit clear that nobody created. */
#define BOGUS_DSQ 0x5eedULL

const volatile u32 bad_after;

u64 nr_enqueued;
u64 nr_bad_inserts;

UEI_DEFINE(uei);

void BPF_STRUCT_OPS(bad_dsq_enqueue, struct task_struct *p, u64 enq_flags)
{
	u64 seq = __sync_fetch_and_add(&nr_enqueued, 1);

	if (seq < bad_after) {
		scx_bpf_dsq_insert(p, SCX_DSQ_GLOBAL, SCX_SLICE_DFL, enq_flags);
		return;
	}

	__sync_fetch_and_add(&nr_bad_inserts, 1);
	scx_bpf_dsq_insert(p, BOGUS_DSQ, SCX_SLICE_DFL, enq_flags);
}

void BPF_STRUCT_OPS(bad_dsq_exit, struct scx_exit_info *ei)
{
	UEI_RECORD(uei, ei);
}

SCX_OPS_DEFINE(bad_dsq_ops,
	       .enqueue		= (void *)bad_dsq_enqueue,
	       .exit		= (void *)bad_dsq_exit,
	       .name		= "bad_dsq");
