/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * exit: unregisters itself cleanly from BPF with scx_bpf_exit().
 *
 * Test-only scheduler. It is a global FIFO until the exit_after-th enqueue,
 * which calls scx_bpf_exit(exit_code, ...). That is not an error: the kernel
 * disables the scheduler with SCX_EXIT_UNREG_BPF, passes exit_code and the
 * message through scx_exit_info to ops.exit() (recorded in uei), and moves
 * the tasks back to the fair class. Tests check the kind, the code and the
 * message.
 *
 * Options (rodata):
 *   exit_after  50  enqueue number that requests the exit (0 means 1)
 *   exit_code   42  code passed to scx_bpf_exit()
 */
#include <scx/common.bpf.h>

char _license[] SEC("license") = "GPL";

const volatile u32 exit_after = 50;
const volatile s64 exit_code = 42;

u64 nr_enqueued;
bool exit_requested;

UEI_DEFINE(uei);

void BPF_STRUCT_OPS(exit_enqueue, struct task_struct *p, u64 enq_flags)
{
	u64 seq = __sync_fetch_and_add(&nr_enqueued, 1) + 1;
	u32 limit = exit_after ?: 1;

	if (seq == limit) {
		exit_requested = true;
		scx_bpf_exit(exit_code, "exit.bpf.c: leaving after %llu enqueues",
			     seq);
	}

	scx_bpf_dsq_insert(p, SCX_DSQ_GLOBAL, SCX_SLICE_DFL, enq_flags);
}

void BPF_STRUCT_OPS(exit_exit, struct scx_exit_info *ei)
{
	UEI_RECORD(uei, ei);
}

SCX_OPS_DEFINE(exit_ops,
	       .enqueue		= (void *)exit_enqueue,
	       .exit		= (void *)exit_exit,
	       .name		= "exit");
