/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * A scheduler that depends on its loader, for the loader-profile tests
 * (tests/shim/loader.toml): like the kernel's scx_central it serves only
 * CPUs below `nr_cpu_ids` (rodata, 1 until the loader sets it) and keeps
 * per-CPU state in a RESIZABLE_ARRAY() sized to nr_cpu_ids; like
 * scx_bpfland and scx_tickless it learns its primary CPUs and SMT
 * siblings from SEC("syscall") programs, and one of them must run on the
 * CPU it names, after the attach.
 *
 * One shared DSQ; CPUs at or above nr_cpu_ids never take from it.
 */
#include <scx/common.bpf.h>

char _license[] SEC("license") = "GPL";

#define SHARED_DSQ 0
#define MAX_CPUS 64

const volatile u32 nr_cpu_ids = 1;
const volatile u64 slice_ns = 5000000;
const volatile bool smt_enabled;
const volatile u64 preferred_cpus[MAX_CPUS];

u64 RESIZABLE_ARRAY(data, cpu_runs);

/* Written by the loader into .bss / .data. */
s64 perf_lvl;
u32 node_of[MAX_CPUS];

/* An array of structs the loader fills member by member (scx_lavd's
 * cpdom_ctxs[], scx_layered's layers[]). */
struct dom_ctx {
	u8 valid;
	u16 nr_cpus;
	u64 mask[2];
	struct {
		u32 kind;
		char name[8];
	} match[2][3];
};
struct dom_ctx doms[4];

/* Set by the syscall programs. */
u64 primary_mask;
u64 nr_primary_resets;
s32 sibling_of[MAX_CPUS];
s32 timer_cpu = -1;
u64 map_sum;

struct cpu_arg {
	s32 cpu_id;
};

struct domain_arg {
	s32 cpu_id;
	s32 sibling_cpu_id;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_CPUS);
	__type(key, u32);
	__type(value, u32);
} cpu_node_map SEC(".maps");

UEI_DEFINE(uei);

SEC("syscall")
int enable_primary_cpu(struct cpu_arg *input)
{
	s32 cpu = input->cpu_id;

	if (cpu < 0) {
		primary_mask = 0;
		nr_primary_resets++;
		return 0;
	}
	if (cpu >= MAX_CPUS)
		return -EINVAL;
	primary_mask |= 1ULL << cpu;
	return 0;
}

SEC("syscall")
int enable_sibling_cpu(struct domain_arg *input)
{
	s32 cpu = input->cpu_id;

	if (cpu < 0 || cpu >= MAX_CPUS)
		return -EINVAL;
	sibling_of[cpu] = input->sibling_cpu_id;
	return 0;
}

SEC("syscall")
int start_timer(struct cpu_arg *input)
{
	u32 key;
	u32 *v;

	if (input->cpu_id != bpf_get_smp_processor_id())
		return -EINVAL;
	timer_cpu = input->cpu_id;
	bpf_for(key, 0, MAX_CPUS) {
		v = bpf_map_lookup_elem(&cpu_node_map, &key);
		if (v)
			map_sum += *v;
	}
	return 0;
}

s32 BPF_STRUCT_OPS(loader_select_cpu, struct task_struct *p, s32 prev_cpu, u64 wake_flags)
{
	bool is_idle = false;
	s32 cpu = scx_bpf_select_cpu_dfl(p, prev_cpu, wake_flags, &is_idle);

	return (u32)cpu < nr_cpu_ids ? cpu : 0;
}

void BPF_STRUCT_OPS(loader_enqueue, struct task_struct *p, u64 enq_flags)
{
	scx_bpf_dsq_insert(p, SHARED_DSQ, slice_ns, enq_flags);
}

void BPF_STRUCT_OPS(loader_dispatch, s32 cpu, struct task_struct *prev)
{
	if ((u32)cpu < nr_cpu_ids)
		scx_bpf_dsq_move_to_local(SHARED_DSQ, 0);
}

void BPF_STRUCT_OPS(loader_running, struct task_struct *p)
{
	s32 cpu = scx_bpf_task_cpu(p);
	u64 *runs = ARRAY_ELEM_PTR(cpu_runs, cpu, nr_cpu_ids);

	if (runs)
		(*runs)++;
}

s32 BPF_STRUCT_OPS_SLEEPABLE(loader_init)
{
	return scx_bpf_create_dsq(SHARED_DSQ, -1);
}

void BPF_STRUCT_OPS(loader_exit, struct scx_exit_info *ei)
{
	UEI_RECORD(uei, ei);
}

SCX_OPS_DEFINE(loader_ops,
	       .flags = SCX_OPS_ENQ_LAST,
	       .select_cpu = (void *)loader_select_cpu,
	       .enqueue = (void *)loader_enqueue,
	       .dispatch = (void *)loader_dispatch,
	       .running = (void *)loader_running,
	       .init = (void *)loader_init,
	       .exit = (void *)loader_exit,
	       .name = "loader");
