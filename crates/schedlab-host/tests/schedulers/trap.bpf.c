/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * trap: executes an illegal instruction in ops.enqueue().
 *
 * Test-only scheduler for fault containment (issue 13). A global FIFO
 * whose fault_after-th enqueue reaches __builtin_trap() (what compilers
 * emit for code they proved unreachable): natively SIGILL, which schedlab
 * turns into an error exit naming ops.enqueue and this file's line.
 *
 * Options (rodata):
 *   fault_after  20  enqueue number that traps (0 means 1)
 */
#include <scx/common.bpf.h>

char _license[] SEC("license") = "GPL";

const volatile u32 fault_after = 20;

u64 nr_enqueued;
u64 nr_exit_calls;

UEI_DEFINE(uei);

void BPF_STRUCT_OPS(trap_enqueue, struct task_struct *p, u64 enq_flags)
{
	u64 seq = __sync_fetch_and_add(&nr_enqueued, 1) + 1;

	if (seq == (fault_after ?: 1))
		__builtin_trap();

	scx_bpf_dsq_insert(p, SCX_DSQ_GLOBAL, SCX_SLICE_DFL, enq_flags);
}

void BPF_STRUCT_OPS(trap_exit, struct scx_exit_info *ei)
{
	nr_exit_calls++;
	UEI_RECORD(uei, ei);
}

SCX_OPS_DEFINE(trap_ops,
	       .enqueue		= (void *)trap_enqueue,
	       .exit		= (void *)trap_exit,
	       .name		= "trap");
