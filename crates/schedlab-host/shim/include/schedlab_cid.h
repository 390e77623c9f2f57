/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * The 7.3 cid form of sched_ext (kernel/sched/ext/{cid,sub,types,internal}.h):
 * topological CPU ids, the sub-scheduler capabilities, and
 * `struct sched_ext_ops_cid`. Included by vmlinux.h.
 *
 * `struct sched_ext_ops_cid` keeps schedlab's slot order: each callback sits
 * in the slot of its cpu-form counterpart in `struct sched_ext_ops` (so the
 * host reads both through one table, host/loader.rs), the cpu-form-only
 * cpu_acquire / cpu_release slots stay NULL, and the callbacks sched_ext_ops
 * lacks (the sub-scheduler ops, init_cids) and the new data fields follow
 * `priv`. Schedulers use designated initializers, so the order is ours.
 */
#ifndef __SCHEDLAB_CID_H__
#define __SCHEDLAB_CID_H__

/* types.h: a cid's place in the topology (-1 for cids without topology). */
struct scx_cid_topo {
	s32 core_cid;
	s32 core_idx;
	s32 llc_cid;
	s32 llc_idx;
	s32 node_cid;
	s32 node_idx;
	s32 shard_cid;
	s32 shard_idx;
};

enum scx_cid_consts {
	SCX_CID_SHARD_SIZE_DFL = 24,
	SCX_CID_SHARD_MAX_CPUS = 512,
};

/* The capabilities a scheduler holds on a cid (sub-scheduling). */
enum scx_cap_flags {
	__SCX_CAP_ENQ_IMMED = 0,
	__SCX_CAP_ENQ = 1,
	__SCX_CAP_PREEMPT = 2,
	__SCX_CAP_PERF = 3,
	__SCX_NR_CAPS = 4,
	__SCX_CAP_ALL = (1 << __SCX_NR_CAPS) - 1,
	SCX_CAP_ENQ_IMMED = 1 << __SCX_CAP_ENQ_IMMED,
	SCX_CAP_ENQ = 1 << __SCX_CAP_ENQ,
	SCX_CAP_PREEMPT = 1 << __SCX_CAP_PREEMPT,
	SCX_CAP_PERF = 1 << __SCX_CAP_PERF,
	SCX_CAP_BASE = SCX_CAP_ENQ_IMMED,
	SCX_CAPS_REENQ_ON_LOSS = SCX_CAP_ENQ_IMMED | SCX_CAP_ENQ,
};

/* 7.3 additions to the enums vmlinux.h declares. */
enum scx_enq_flags_cid {
	SCX_ENQ_RESCUE = 1ULL << 34,
};

enum scx_ent_flags_reenq {
	SCX_TASK_REENQ_REASON_SHIFT = 12,
	SCX_TASK_REENQ_REASON_BITS = 3,
	SCX_TASK_REENQ_REASON_MASK = ((1 << SCX_TASK_REENQ_REASON_BITS) - 1) << SCX_TASK_REENQ_REASON_SHIFT,
	SCX_TASK_REENQ_NONE = 0 << SCX_TASK_REENQ_REASON_SHIFT,
	SCX_TASK_REENQ_KFUNC = 1 << SCX_TASK_REENQ_REASON_SHIFT,
	SCX_TASK_REENQ_IMMED = 2 << SCX_TASK_REENQ_REASON_SHIFT,
	SCX_TASK_REENQ_PREEMPTED = 3 << SCX_TASK_REENQ_REASON_SHIFT,
	SCX_TASK_REENQ_CAP = 4 << SCX_TASK_REENQ_REASON_SHIFT,
};

enum scx_ops_flags_cid {
	SCX_OPS_TID_TO_TASK = 1LLU << 8,
};

/* internal.h: the cid form's ops.enable() argument. */
struct scx_enable_args {
	u64 cmask_arena_addr;
};

struct scx_sub_attach_args {
	struct sched_ext_ops *ops;
	char *cgroup_path;
};

struct scx_sub_detach_args {
	struct sched_ext_ops *ops;
	char *cgroup_path;
};

struct sched_ext_ops_cid {
	s32 (*select_cid)(struct task_struct *p, s32 prev_cid, u64 wake_flags);
	void (*enqueue)(struct task_struct *p, u64 enq_flags);
	void (*dequeue)(struct task_struct *p, u64 deq_flags);
	void (*dispatch)(s32 cid, struct task_struct *prev);
	void (*tick)(struct task_struct *p);
	void (*runnable)(struct task_struct *p, u64 enq_flags);
	void (*running)(struct task_struct *p);
	void (*stopping)(struct task_struct *p, bool runnable);
	void (*quiescent)(struct task_struct *p, u64 deq_flags);
	bool (*yield)(struct task_struct *from, struct task_struct *to);
	bool (*core_sched_before)(struct task_struct *a, struct task_struct *b);
	void (*set_weight)(struct task_struct *p, u32 weight);
	void (*set_cmask)(struct task_struct *p, const struct scx_cmask *cmask);
	void (*update_idle)(s32 cid, bool idle);
	void *__schedlab_no_cpu_acquire;
	void *__schedlab_no_cpu_release;
	s32 (*init_task)(struct task_struct *p, struct scx_init_task_args *args);
	void (*exit_task)(struct task_struct *p, struct scx_exit_task_args *args);
	void (*enable)(struct task_struct *p, struct scx_enable_args *args);
	void (*disable)(struct task_struct *p);
	void (*dump)(struct scx_dump_ctx *ctx);
	void (*dump_cid)(struct scx_dump_ctx *ctx, s32 cid, bool idle);
	void (*dump_task)(struct scx_dump_ctx *ctx, struct task_struct *p);
	s32 (*cpuctl_init)(struct cgroup *cgrp, struct scx_cgroup_init_args *args);
	void (*cpuctl_exit)(struct cgroup *cgrp);
	s32 (*cpuctl_prep_move)(struct task_struct *p, struct cgroup *from, struct cgroup *to);
	void (*cpuctl_move)(struct task_struct *p, struct cgroup *from, struct cgroup *to);
	void (*cpuctl_cancel_move)(struct task_struct *p, struct cgroup *from, struct cgroup *to);
	void (*cpuctl_set_weight)(struct cgroup *cgrp, u32 weight);
	void (*cpuctl_set_bandwidth)(struct cgroup *cgrp, u64 period_us, u64 quota_us, u64 burst_us);
	void (*cpuctl_set_idle)(struct cgroup *cgrp, bool idle);
	void (*cid_online)(s32 cid);
	void (*cid_offline)(s32 cid);
	s32 (*init)(void);
	void (*exit)(struct scx_exit_info *info);
	/* The data fields of struct sched_ext_ops, in its order. */
	u32 dispatch_max_batch;
	u64 flags;
	u32 timeout_ms;
	u32 exit_dump_len;
	u64 hotplug_seq;
	u64 sub_cgroup_id;
	char name[SCX_OPS_NAME_LEN];
	void *priv;
	/* The cid form's own (host/cid.rs, CidOpsTailC). */
	s32 (*sub_attach)(struct scx_sub_attach_args *args);
	void (*sub_detach)(struct scx_sub_detach_args *args);
	void (*sub_caps_updated)(const struct scx_cmask *cmask, u64 caps);
	void (*sub_ecaps_updated)(s32 cid, u64 before, u64 after);
	s32 (*init_cids)(void);
	u32 cid_shard_size;
	u32 rescue_bandwidth_ppt;
	u32 rescue_quantum_us;
};

#endif /* __SCHEDLAB_CID_H__ */
