/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * Tracepoint programs with the kernel's arguments
 * (tests/integration/ext_cgroup.rs): SEC("tp_btf/cgroup_attach_task")
 * and SEC("tp_btf/task_rename") as scx_layered declares them, and
 * SEC("tp_btf/hw_pressure_update?") as scx_p2dq does (optional attach).
 * Each records what it was given.
 */
#include <scx/common.bpf.h>

char _license[] SEC("license") = "GPL";

u64 attach_calls;
u64 attach_cgrp_id;
u64 attach_pid;
u64 attach_threadgroup;
char attach_path[32];

u64 rename_calls;
u64 rename_pid;
char rename_new[16];
char rename_old[16];

u64 pressure_calls;
s64 pressure_cpu;
u64 pressure_value;

SEC("tp_btf/cgroup_attach_task")
int BPF_PROG(tp_attach, struct cgroup *cgrp, const char *cgrp_path,
	     struct task_struct *leader, bool threadgroup)
{
	attach_calls++;
	attach_cgrp_id = cgrp->kn->id;
	attach_pid = leader->pid;
	attach_threadgroup = threadgroup;
	bpf_probe_read_kernel_str(attach_path, sizeof(attach_path), cgrp_path);
	return 0;
}

SEC("tp_btf/task_rename")
int BPF_PROG(tp_rename, struct task_struct *p, const char *buf)
{
	rename_calls++;
	rename_pid = p->pid;
	bpf_probe_read_str(rename_new, sizeof(rename_new), buf);
	__builtin_memcpy(rename_old, p->comm, sizeof(rename_old));
	return 0;
}

SEC("tp_btf/hw_pressure_update?")
int BPF_PROG(tp_pressure, u32 cpu, u64 hw_pressure)
{
	pressure_calls++;
	pressure_cpu = (s32)cpu;
	pressure_value = hw_pressure;
	return 0;
}

void BPF_STRUCT_OPS(tp_enqueue, struct task_struct *p, u64 enq_flags)
{
	scx_bpf_dsq_insert(p, SCX_DSQ_GLOBAL, SCX_SLICE_DFL, enq_flags);
}

SCX_OPS_DEFINE(tp_ops,
	       .enqueue			= (void *)tp_enqueue,
	       .name			= "tracepoints");
