/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * Kernel objects the runtime lends to BPF code and the BPF objects it
 * implements natively (included at the end of vmlinux.h).
 *
 * - struct rq: the view scx_bpf_cpu_rq(), scx_bpf_locked_rq() and
 *   bpf_per_cpu_ptr(&runqueues, cpu) return (host/kobj.rs fills it). Its
 *   first four fields are the ones scx's `struct rq___local` shadow reads,
 *   in that order: natively there is no CO-RE relocation, so the shadow's
 *   layout must be a prefix of ours.
 * - struct cgroup: one per cgroup of the scenario's tree (host/cgroup.rs);
 *   kn->id is the cgroup id (1 for the root), ancestors[] runs from the
 *   root (ancestors[0]) to the cgroup itself (ancestors[level]).
 * - bpf_dynptr, bpf_res_spin_lock, bpf_perf_event_value: sizes as in
 *   include/uapi/linux/bpf.h.
 */
#ifndef __SCHEDLAB_KOBJ_H__
#define __SCHEDLAB_KOBJ_H__

struct kernfs_node {
	u64 id;
	/* The node's name: "" for the root (cgroup paths are built from it). */
	const char *name;
};

/* include/linux/cgroup_subsys.h's order with CONFIG_CPUSETS and CONFIG_CGROUP_SCHED. */
enum cgroup_subsys_id {
	cpuset_cgrp_id,
	cpu_cgrp_id,
	cpuacct_cgrp_id,
	io_cgrp_id,
	memory_cgrp_id,
	CGROUP_SUBSYS_COUNT = 14,
};

struct cgroup_subsys_state {
	struct cgroup *cgroup;
	struct cgroup_subsys_state *parent;
};

struct cgroup {
	struct cgroup_subsys_state self;
	unsigned long flags;
	int level;
	int max_depth;
	struct kernfs_node *kn;
	/* Each controller's css; cpu_cgrp_id's is the cgroup's task_group. */
	struct cgroup_subsys_state *subsys[14];
	/* ancestors[level] is the cgroup itself; the root has level 0. */
	struct cgroup *ancestors[];
};

struct scx_rq {
	u64 extra_enq_flags;
	u32 nr_running;
	u32 flags;
	u32 cpuperf_target;
	bool cpu_released;
	u8 __schedlab_pad[3];
	u64 pnt_seq;
	/* Tasks on this CPU's local DSQ (local_dsq.nr in the kernel). */
	u32 local_dsq_nr;
	u32 __schedlab_pad1;
};

struct rq {
	u64 clock_task;
	u64 clock_pelt;
	unsigned long lost_idle_time;
	u64 prev_steal_time_rq;
	u64 clock;
	unsigned int nr_running;
	int cpu;
	int online;
	int __schedlab_pad;
	struct task_struct *curr;
	struct task_struct *idle;
	struct scx_rq scx;
};

/* Per-CPU kernel variables bpf_per_cpu_ptr() / bpf_this_cpu_ptr() know. */
extern struct rq runqueues;
extern const int __preempt_count;

struct inode;

struct bpf_dynptr {
	u64 __opaque[2];
} __attribute__((aligned(8)));

struct bpf_res_spin_lock {
	u32 val;
};

struct bpf_perf_event_value {
	u64 counter;
	u64 enabled;
	u64 running;
};

/* BPF_FUNC_ringbuf_* flags and bpf_ringbuf_query() selectors. */
enum {
	BPF_RB_NO_WAKEUP = 1ULL << 0,
	BPF_RB_FORCE_WAKEUP = 1ULL << 1,
};

enum {
	BPF_RB_AVAIL_DATA = 0,
	BPF_RB_RING_SIZE = 1,
	BPF_RB_CONS_POS = 2,
	BPF_RB_PROD_POS = 3,
};

enum {
	BPF_RINGBUF_BUSY_BIT = 1U << 31,
	BPF_RINGBUF_DISCARD_BIT = 1U << 30,
	BPF_RINGBUF_HDR_SZ = 8,
};

/* bpf_perf_event_read_value() flags. */
#define BPF_F_INDEX_MASK 0xffffffffULL
#define BPF_F_CURRENT_CPU BPF_F_INDEX_MASK

#endif /* __SCHEDLAB_KOBJ_H__ */
