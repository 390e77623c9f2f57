/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * wild_write: writes far past the end of an array map's value.
 *
 * Test-only scheduler for fault containment (issue 13). A global FIFO that
 * keeps a per-CPU-slot counter in an array map value. The index comes from
 * the task, and the bounds check ("guard") is wrong: it tests the wrong
 * variable, so the fault_after-th enqueue writes 8 GiB past the value.
 * The kernel's verifier refuses the program (the offset is not
 * provably inside the value: "invalid access to map value"); natively the
 * write hits unmapped memory (SIGSEGV), which schedlab turns into an error
 * exit naming ops.enqueue, the address and this file's line.
 *
 * Options (rodata):
 *   fault_after  20  enqueue number that faults (0 means 1)
 */
#include <scx/common.bpf.h>

char _license[] SEC("license") = "GPL";

const volatile u32 fault_after = 20;

#define NR_SLOTS 16

struct slots {
	u64 cnt[NR_SLOTS];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct slots);
} counters SEC(".maps");

u64 nr_enqueued;
u64 nr_exit_calls;

UEI_DEFINE(uei);

void BPF_STRUCT_OPS(wild_write_enqueue, struct task_struct *p, u64 enq_flags)
{
	u64 seq = __sync_fetch_and_add(&nr_enqueued, 1) + 1;
	u64 idx = p->pid % NR_SLOTS, wanted = idx;
	u32 zero = 0;
	struct slots *s;

	if (seq == (fault_after ?: 1))
		idx = 1ULL << 30; /* 8 GiB past the value */
	s = bpf_map_lookup_elem(&counters, &zero);
	if (s && wanted < NR_SLOTS) /* the guard checks the wrong index */
		s->cnt[idx]++;

	scx_bpf_dsq_insert(p, SCX_DSQ_GLOBAL, SCX_SLICE_DFL, enq_flags);
}

void BPF_STRUCT_OPS(wild_write_exit, struct scx_exit_info *ei)
{
	nr_exit_calls++;
	UEI_RECORD(uei, ei);
}

SCX_OPS_DEFINE(wild_write_ops,
	       .enqueue		= (void *)wild_write_enqueue,
	       .exit		= (void *)wild_write_exit,
	       .name		= "wild_write");
