/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * endless: an ops.dispatch() loop that never ends.
 *
 * Test-only scheduler for fault containment (issue 13). Tasks go to a
 * shared DSQ; ops.dispatch() moves one to the local DSQ. From the
 * fault_after-th dispatch on, the loop's exit condition is wrong (it waits
 * for the shared DSQ to have a negative length), so dispatch spins forever.
 * The kernel's verifier refuses a loop it cannot bound; natively schedlab's
 * watchdog ends the call after the op budget (scheduler.op_timeout) and
 * ejects the scheduler, naming ops.dispatch.
 *
 * Options (rodata):
 *   fault_after  20  dispatch number that loops (0 means 1)
 *   call_kfunc   0   1: the loop calls a kfunc each time around (so most of
 *                    its time is spent outside the scheduler's code)
 */
#include <scx/common.bpf.h>

char _license[] SEC("license") = "GPL";

const volatile u32 fault_after = 20;
const volatile u32 call_kfunc = 0;

#define SHARED_DSQ 0

volatile u64 spins;
u64 nr_dispatched;
u64 nr_exit_calls;

UEI_DEFINE(uei);

void BPF_STRUCT_OPS(endless_enqueue, struct task_struct *p, u64 enq_flags)
{
	scx_bpf_dsq_insert(p, SHARED_DSQ, SCX_SLICE_DFL, enq_flags);
}

void BPF_STRUCT_OPS(endless_dispatch, s32 cpu, struct task_struct *prev)
{
	u64 seq = __sync_fetch_and_add(&nr_dispatched, 1) + 1;

	if (seq >= (fault_after ?: 1)) {
		s64 len = 0;

		while (len >= 0) {
			spins++;
			if (call_kfunc)
				len = scx_bpf_dsq_nr_queued(SHARED_DSQ);
		}
	}
	scx_bpf_dsq_move_to_local(SHARED_DSQ);
}

s32 BPF_STRUCT_OPS_SLEEPABLE(endless_init)
{
	return scx_bpf_create_dsq(SHARED_DSQ, -1);
}

void BPF_STRUCT_OPS(endless_exit, struct scx_exit_info *ei)
{
	nr_exit_calls++;
	UEI_RECORD(uei, ei);
}

SCX_OPS_DEFINE(endless_ops,
	       .enqueue		= (void *)endless_enqueue,
	       .dispatch	= (void *)endless_dispatch,
	       .init		= (void *)endless_init,
	       .exit		= (void *)endless_exit,
	       .name		= "endless");
