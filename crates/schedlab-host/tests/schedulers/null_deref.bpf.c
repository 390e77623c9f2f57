/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * null_deref: dereferences a map lookup's result without a NULL check.
 *
 * Test-only scheduler for fault containment (issue 13). A global FIFO that
 * counts enqueues per task in a hash map. The fault_after-th enqueue looks
 * up a key nobody inserted and writes through the NULL it gets back: the
 * kernel's verifier refuses such a program ("invalid mem access
 * 'map_value_or_null'"); natively it is a SIGSEGV, which schedlab turns
 * into an error exit naming ops.enqueue, address 0x0 and this file's line.
 *
 * Options (rodata):
 *   fault_after  20  enqueue number that faults (0 means 1)
 */
#include <scx/common.bpf.h>

char _license[] SEC("license") = "GPL";

const volatile u32 fault_after = 20;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, s32);
	__type(value, u64);
} seen SEC(".maps");

u64 nr_enqueued;
u64 nr_exit_calls;

UEI_DEFINE(uei);

void BPF_STRUCT_OPS(null_deref_enqueue, struct task_struct *p, u64 enq_flags)
{
	u64 seq = __sync_fetch_and_add(&nr_enqueued, 1) + 1;
	s32 key = p->pid;
	u64 one = 1, *cnt;

	if (seq == (fault_after ?: 1))
		key = -1; /* never inserted */
	else
		bpf_map_update_elem(&seen, &key, &one, BPF_NOEXIST);
	cnt = bpf_map_lookup_elem(&seen, &key);
	*cnt += 1; /* the missing NULL check */

	scx_bpf_dsq_insert(p, SCX_DSQ_GLOBAL, SCX_SLICE_DFL, enq_flags);
}

void BPF_STRUCT_OPS(null_deref_exit, struct scx_exit_info *ei)
{
	nr_exit_calls++;
	UEI_RECORD(uei, ei);
}

SCX_OPS_DEFINE(null_deref_ops,
	       .enqueue		= (void *)null_deref_enqueue,
	       .exit		= (void *)null_deref_exit,
	       .name		= "null_deref");
