/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * schedlab's hand-written stand-in for a bpftool-generated vmlinux.h: the
 * kernel types and enums sched_ext schedulers use, for native compilation.
 *
 * The layouts of task_struct, sched_ext_entity, sched_entity, load_weight
 * and cpumask are the simulator's (crates/schedlab/src/sched/ext/abi.rs),
 * with the kernel's field names. A test compiles a probe against this file
 * and compares every offset with the Rust side.
 */
/*
 * BPF-target mode: `clang -target bpf` (which predefines __BPF__) against a
 * real kernel. The kernel's own types then come from the vmlinux.h that
 * `bpftool btf dump file vmlinux format c` made for it, installed as
 * <schedlab-bpf/vmlinux.h> in an include directory after this one
 * (scripts/scx-vm does this). Kfunc prototypes are the scx headers' own.
 */
#if defined(__BPF__) && !defined(__SCHEDLAB_NATIVE__)
#ifndef __SCHEDLAB_VMLINUX_BPF_H__
#define __SCHEDLAB_VMLINUX_BPF_H__
#ifndef BPF_NO_KFUNC_PROTOTYPES
#define BPF_NO_KFUNC_PROTOTYPES
#endif
/* Kernel enumerators whose names schedulers use for their own enums. */
#define NR_STATS __kernel_NR_STATS
#include <schedlab-bpf/vmlinux.h>
#undef NR_STATS
#define SCHEDLAB_NR_CPUS 1024
#endif /* __SCHEDLAB_VMLINUX_BPF_H__ */
#else

#ifndef __SCHEDLAB_VMLINUX_H__
#define __SCHEDLAB_VMLINUX_H__
/* bpftool's guard, which scheduler headers test (intf.h typedefs). */
#define __VMLINUX_H__

#ifndef __SCHEDLAB__
#define __SCHEDLAB__ 1
#endif
#ifndef __bpf__
#define __bpf__ 1
#endif

typedef signed char s8;
typedef unsigned char u8;
typedef short s16;
typedef unsigned short u16;
typedef int s32;
typedef unsigned int u32;
typedef long long s64;
typedef unsigned long long u64;

typedef s8 __s8;
typedef u8 __u8;
typedef s16 __s16;
typedef u16 __u16;
typedef s32 __s32;
typedef u32 __u32;
typedef s64 __s64;
typedef u64 __u64;
typedef u16 __be16;
typedef u32 __be32;
typedef u64 __be64;
typedef u16 __le16;
typedef u32 __le32;
typedef u64 __le64;
typedef u32 __wsum;

#ifndef __cplusplus
typedef _Bool bool;
enum { false = 0, true = 1 };
#endif

typedef int pid_t;
typedef unsigned int uid_t;
typedef unsigned int gid_t;
typedef unsigned long size_t;
typedef long ssize_t;
typedef long long loff_t;
typedef unsigned long uintptr_t;
typedef long intptr_t;
typedef unsigned int gfp_t;
typedef u64 sector_t;
typedef int clockid_t;

#ifndef NULL
#define NULL ((void *)0)
#endif

typedef struct {
	int counter;
} atomic_t;

typedef struct {
	s64 counter;
} atomic64_t;

typedef atomic64_t atomic_long_t;

typedef struct {
	atomic_t refs;
} refcount_t;

struct list_head {
	struct list_head *next, *prev;
};

struct rb_node {
	unsigned long __rb_parent_color;
	struct rb_node *rb_right;
	struct rb_node *rb_left;
} __attribute__((aligned(sizeof(long))));

struct rb_root {
	struct rb_node *rb_node;
};

/* CONFIG_NR_CPUS of the simulated kernel; matches abi::NR_CPUS. */
#define SCHEDLAB_NR_CPUS 4096

struct cpumask {
	unsigned long bits[SCHEDLAB_NR_CPUS / 64];
};
typedef struct cpumask cpumask_t;
typedef struct cpumask cpumask_var_t[1];

/* A BPF-allocated cpumask (kernel/bpf/cpumask.c): the mask comes first. */
struct bpf_cpumask {
	cpumask_t cpumask;
	refcount_t usage;
};

struct load_weight {
	unsigned long weight;
	u32 inv_weight;
};

struct sched_entity {
	struct load_weight load;
	u64 sum_exec_runtime;
	u64 vruntime;
	u64 prev_sum_exec_runtime;
	u64 nr_migrations;
};

struct scx_dispatch_q;

struct sched_ext_entity {
	struct scx_dispatch_q *dsq;
	u32 dsq_seq;
	u32 dsq_flags;
	u32 flags;
	u32 weight;
	s32 sticky_cpu;
	s32 holding_cpu;
	s32 selected_cpu;
	u32 kf_mask;
	atomic_long_t ops_state;
	unsigned long runnable_at;
	u64 core_sched_at;
	u64 ddsp_dsq_id;
	u64 ddsp_enq_flags;
	u64 slice;
	u64 dsq_vtime;
	bool disallow;
	u8 __schedlab_pad[7];
	/* 7.3: unique, never reused; scx_bpf_tid_to_task() looks it up. */
	u64 tid;
};

struct mm_struct;

/*
 * Fixed-width names (include/linux/types.h), spelled as glibc spells them on
 * LP64 so that a scheduler that also includes <stdint.h> or <sys/types.h>
 * sees the same typedefs.
 */
typedef unsigned char uint8_t;
typedef unsigned short uint16_t;
typedef unsigned int uint32_t;
typedef unsigned long uint64_t;
typedef signed char int8_t;
typedef short int16_t;
typedef int int32_t;
typedef long int64_t;
typedef unsigned char u_int8_t;
typedef unsigned short u_int16_t;
typedef unsigned int u_int32_t;
typedef unsigned long u_int64_t;

/* A task's cgroup memberships (include/linux/cgroup-defs.h), as read by BPF. */
struct css_set {
	struct cgroup_subsys_state *subsys[14];
	struct cgroup *dfl_cgrp;
};

/* include/linux/bpf.h: bpf_iter_css_new() orders. */
enum bpf_cgroup_iter_order {
	BPF_CGROUP_ITER_ORDER_UNSPEC = 0,
	BPF_CGROUP_ITER_SELF_ONLY = 1,
	BPF_CGROUP_ITER_DESCENDANTS_PRE = 2,
	BPF_CGROUP_ITER_DESCENDANTS_POST = 3,
	BPF_CGROUP_ITER_ANCESTORS_UP = 4,
	BPF_CGROUP_ITER_CHILDREN = 5,
};

/* include/uapi/linux/mempolicy.h */
enum {
	MPOL_DEFAULT = 0,
	MPOL_PREFERRED = 1,
	MPOL_BIND = 2,
	MPOL_INTERLEAVE = 3,
	MPOL_LOCAL = 4,
	MPOL_PREFERRED_MANY = 5,
	MPOL_WEIGHTED_INTERLEAVE = 6,
	MPOL_MAX = 7,
};

/* MAX_NUMNODES = 1 << CONFIG_NODES_SHIFT (10). */
typedef struct {
	unsigned long bits[1024 / 64];
} nodemask_t;

/* A task's NUMA memory policy; NULL in task_struct is the default policy. */
struct mempolicy {
	atomic_t refcnt;
	unsigned short mode;
	unsigned short flags;
	nodemask_t nodes;
	int home_node;
};

/* The RCU guard class (include/linux/rcupdate.h's DEFINE_LOCK_GUARD_0(rcu)). */
typedef struct {
	void *lock;
} class_rcu_t;

/* include/linux/mm_types.h: enum page_size_enum (what BTF shows for PAGE_SIZE). */
enum page_size_enum {
	__PAGE_SIZE = 4096,
};

/*
 * A CPU-id mask (7.2+ cid API): bits for cids base .. base + nr_cids - 1 in
 * alloc_words u64 words.
 */
struct scx_cmask {
	u32 base;
	u32 nr_cids;
	u32 alloc_words;
	u64 bits[];
};

/*
 * Processes, pids and credentials (include/linux/pid.h, pid_namespace.h,
 * sched/signal.h, cred.h), the members schedulers read. Every simulated
 * task is in the root pid namespace (level 0, its pid is its only number);
 * a thread group is the workload's process (`threads = true`), else the
 * task alone; credentials are root's (uid and gid 0). host/kobj.rs and
 * sched/ext/procs.rs fill them.
 */
enum pid_type {
	PIDTYPE_PID,
	PIDTYPE_TGID,
	PIDTYPE_PGID,
	PIDTYPE_SID,
	PIDTYPE_MAX,
};

struct ns_common {
	unsigned int inum;
};

struct pid_namespace {
	unsigned int level;
	struct ns_common ns;
};

struct upid {
	int nr;
	struct pid_namespace *ns;
};

struct pid {
	unsigned int level;
	struct upid numbers[1];
};

typedef struct {
	u32 val;
} kuid_t;

typedef struct {
	u32 val;
} kgid_t;

struct cred {
	kuid_t uid;
	kgid_t gid;
	kuid_t suid;
	kgid_t sgid;
	kuid_t euid;
	kgid_t egid;
	kuid_t fsuid;
	kgid_t fsgid;
};

struct signal_struct {
	int nr_threads;
	/* The thread group's tasks, linked through task_struct.thread_node. */
	struct list_head thread_head;
	struct pid *pids[PIDTYPE_MAX];
};

/* Opaque: a scheduling class is compared by address only. */
struct sched_class;

struct task_struct {
	u32 schedlab_id;
	unsigned int __state;
	unsigned int flags;
	int on_cpu;
	unsigned int cpu;
	int recent_used_cpu;
	int wake_cpu;
	int on_rq;
	int prio;
	int static_prio;
	int normal_prio;
	unsigned int rt_priority;
	unsigned int policy;
	int nr_cpus_allowed;
	unsigned short migration_disabled;
	u16 __schedlab_pad0;
	pid_t pid;
	pid_t tgid;
	int __schedlab_pad1;
	const cpumask_t *cpus_ptr;
	/*
	 * Through scx, what the host and the kfuncs touch on every call fills
	 * the first four cache lines; with tens of thousands of tasks each
	 * further line is a miss per call.
	 */
	/* The task's css_set: its cgroup (dfl_cgrp) and the css of each controller. */
	struct css_set *cgroups;
	u64 utime;
	u64 stime;
	struct sched_entity se;
	struct sched_ext_entity scx;
	struct task_struct *real_parent;
	struct task_struct *group_leader;
	struct mm_struct *mm;
	char comm[16];
	int numa_preferred_nid;
	int __schedlab_pad2;
	/* NULL: the default policy (the simulator models none other). */
	struct mempolicy *mempolicy;
	/* The task's CPU-controller group; NULL (the root) in the simulator. */
	struct task_group *sched_task_group;
	/* The class the task is in; one object per class (host/kobj.rs). */
	const struct sched_class *sched_class;
	struct signal_struct *signal;
	/* Entry in signal->thread_head. */
	struct list_head thread_node;
	struct pid *thread_pid;
	const struct cred *real_cred;
	const struct cred *cred;
	/*
	 * Last but for the simulator's own objects: 512 bytes that the event
	 * path seldom reads, kept off the cache lines it does (a layout of our
	 * own; schedulers reach fields by name).
	 */
	cpumask_t cpus_mask;
	/* The task's own struct pid, where thread_pid points. */
	struct pid __schedlab_pid;
	/* The process's signal_struct when this task leads its thread group. */
	struct signal_struct __schedlab_signal;
};

#define TASK_COMM_LEN 16

/* Opaque BPF objects. Sizes follow include/uapi/linux/bpf.h. */
struct bpf_spin_lock {
	u32 val;
};

struct bpf_timer {
	u64 __opaque[2];
} __attribute__((aligned(8)));

struct bpf_list_head {
	u64 __opaque[2];
} __attribute__((aligned(8)));

struct bpf_list_node {
	u64 __opaque[3];
} __attribute__((aligned(8)));

struct bpf_rb_root {
	u64 __opaque[2];
} __attribute__((aligned(8)));

struct bpf_rb_node {
	u64 __opaque[4];
} __attribute__((aligned(8)));

struct bpf_refcount {
	u32 __opaque[1];
} __attribute__((aligned(4)));

/* The DSQ iterator; the simulator's cursor (abi::DsqIterC) lives inside. */
struct bpf_iter_scx_dsq {
	u64 __opaque[12];
} __attribute__((aligned(8)));

struct bpf_iter_num {
	u64 __opaque[1];
} __attribute__((aligned(8)));

struct bpf_iter_bits {
	u64 __opaque[2];
} __attribute__((aligned(8)));

/* Sizes follow the kernel's (kernel/bpf/task_iter.c, cgroup_iter.c). */
struct bpf_iter_task {
	u64 __opaque[3];
} __attribute__((aligned(8)));

struct bpf_iter_css {
	u64 __opaque[3];
} __attribute__((aligned(8)));

struct bpf_iter_css_task {
	u64 __opaque[1];
} __attribute__((aligned(8)));

/* A tracepoint record's common header (include/linux/trace_events.h). */
struct trace_entry {
	unsigned short type;
	unsigned char flags;
	unsigned char preempt_count;
	int pid;
};

/* include/linux/cpufreq.h, the members schedulers read. */
struct cpufreq_cpuinfo {
	unsigned int max_freq;
	unsigned int min_freq;
	unsigned int transition_latency;
};

struct cpufreq_policy {
	cpumask_var_t cpus;
	cpumask_var_t related_cpus;
	unsigned int cpu;
	struct cpufreq_cpuinfo cpuinfo;
	unsigned int min;
	unsigned int max;
	unsigned int cur;
};

struct bpf_prog_aux;

/* include/uapi/linux/bpf.h */
enum bpf_map_type {
	BPF_MAP_TYPE_UNSPEC = 0,
	BPF_MAP_TYPE_HASH = 1,
	BPF_MAP_TYPE_ARRAY = 2,
	BPF_MAP_TYPE_PROG_ARRAY = 3,
	BPF_MAP_TYPE_PERF_EVENT_ARRAY = 4,
	BPF_MAP_TYPE_PERCPU_HASH = 5,
	BPF_MAP_TYPE_PERCPU_ARRAY = 6,
	BPF_MAP_TYPE_STACK_TRACE = 7,
	BPF_MAP_TYPE_CGROUP_ARRAY = 8,
	BPF_MAP_TYPE_LRU_HASH = 9,
	BPF_MAP_TYPE_LRU_PERCPU_HASH = 10,
	BPF_MAP_TYPE_LPM_TRIE = 11,
	BPF_MAP_TYPE_ARRAY_OF_MAPS = 12,
	BPF_MAP_TYPE_HASH_OF_MAPS = 13,
	BPF_MAP_TYPE_DEVMAP = 14,
	BPF_MAP_TYPE_SOCKMAP = 15,
	BPF_MAP_TYPE_CPUMAP = 16,
	BPF_MAP_TYPE_XSKMAP = 17,
	BPF_MAP_TYPE_SOCKHASH = 18,
	BPF_MAP_TYPE_CGROUP_STORAGE = 19,
	BPF_MAP_TYPE_REUSEPORT_SOCKARRAY = 20,
	BPF_MAP_TYPE_PERCPU_CGROUP_STORAGE = 21,
	BPF_MAP_TYPE_QUEUE = 22,
	BPF_MAP_TYPE_STACK = 23,
	BPF_MAP_TYPE_SK_STORAGE = 24,
	BPF_MAP_TYPE_DEVMAP_HASH = 25,
	BPF_MAP_TYPE_STRUCT_OPS = 26,
	BPF_MAP_TYPE_RINGBUF = 27,
	BPF_MAP_TYPE_INODE_STORAGE = 28,
	BPF_MAP_TYPE_TASK_STORAGE = 29,
	BPF_MAP_TYPE_BLOOM_FILTER = 30,
	BPF_MAP_TYPE_USER_RINGBUF = 31,
	BPF_MAP_TYPE_CGRP_STORAGE = 32,
	BPF_MAP_TYPE_ARENA = 33,
};

enum {
	BPF_ANY = 0,
	BPF_NOEXIST = 1,
	BPF_EXIST = 2,
	BPF_F_LOCK = 4,
};

enum {
	BPF_F_NO_PREALLOC = 1U << 0,
	BPF_F_NO_COMMON_LRU = 1U << 1,
	BPF_F_NUMA_NODE = 1U << 2,
	BPF_F_RDONLY = 1U << 3,
	BPF_F_WRONLY = 1U << 4,
	BPF_F_STACK_BUILD_ID = 1U << 5,
	BPF_F_ZERO_SEED = 1U << 6,
	BPF_F_RDONLY_PROG = 1U << 7,
	BPF_F_WRONLY_PROG = 1U << 8,
	BPF_F_CLONE = 1U << 9,
	BPF_F_MMAPABLE = 1U << 10,
	BPF_F_PRESERVE_ELEMS = 1U << 11,
	BPF_F_INNER_MAP = 1U << 12,
};

enum {
	BPF_LOCAL_STORAGE_GET_F_CREATE = 1ULL << 0,
	BPF_SK_STORAGE_GET_F_CREATE = 1ULL << 0,
};

enum {
	BPF_F_TIMER_ABS = 1ULL << 0,
	BPF_F_TIMER_CPU_PIN = 1ULL << 1,
};

/* include/uapi/linux/sched.h */
#define SCHED_NORMAL 0
#define SCHED_FIFO 1
#define SCHED_RR 2
#define SCHED_BATCH 3
#define SCHED_IDLE 5
#define SCHED_DEADLINE 6
#define SCHED_EXT 7

/* kernel/sched/sched.h */
#define WF_EXEC 0x02
#define WF_FORK 0x04
#define WF_TTWU 0x08
#define WF_SYNC 0x10
#define WF_MIGRATED 0x20

#define SCHED_CAPACITY_SHIFT 10
#define SCHED_CAPACITY_SCALE (1L << SCHED_CAPACITY_SHIFT)
#define MAX_NICE 19
#define MIN_NICE (-20)
#define NICE_WIDTH (MAX_NICE - MIN_NICE + 1)
#define MAX_RT_PRIO 100
#define MAX_PRIO (MAX_RT_PRIO + NICE_WIDTH)
#define DEFAULT_PRIO (MAX_RT_PRIO + NICE_WIDTH / 2)

/*
 * sched_ext (include/linux/sched/ext.h, kernel/sched/ext_internal.h), with
 * the values the simulator implements (sched/ext/ops.rs).
 */
enum scx_public_consts {
	SCX_OPS_NAME_LEN = 128,
	SCX_SLICE_DFL = 20ULL * 1000000,
	SCX_SLICE_BYPASS = 5ULL * 1000000,
	SCX_SLICE_INF = 0xffffffffffffffffULL,
};

enum scx_consts {
	SCX_DSP_DFL_MAX_BATCH = 32,
	SCX_DSP_MAX_LOOPS = 32,
	SCX_WATCHDOG_MAX_TIMEOUT = 30 * 1000,
	SCX_EXIT_BT_LEN = 64,
	SCX_EXIT_MSG_LEN = 1024,
	SCX_EXIT_DUMP_DFL_LEN = 32768,
	SCX_CPUPERF_ONE = 1024,
	SCX_TASK_ITER_BATCH = 32,
};

enum scx_dsq_id_flags {
	SCX_DSQ_FLAG_BUILTIN = 1ULL << 63,
	SCX_DSQ_FLAG_LOCAL_ON = 1ULL << 62,
	SCX_DSQ_INVALID = SCX_DSQ_FLAG_BUILTIN | 0,
	SCX_DSQ_GLOBAL = SCX_DSQ_FLAG_BUILTIN | 1,
	SCX_DSQ_LOCAL = SCX_DSQ_FLAG_BUILTIN | 2,
	SCX_DSQ_BYPASS = SCX_DSQ_FLAG_BUILTIN | 3,
	SCX_DSQ_LOCAL_ON = SCX_DSQ_FLAG_BUILTIN | SCX_DSQ_FLAG_LOCAL_ON,
	SCX_DSQ_LOCAL_CPU_MASK = 0xffffffffULL,
};

enum scx_dsq_iter_flags {
	SCX_DSQ_ITER_REV = 1U << 16,
	__SCX_DSQ_ITER_HAS_SLICE = 1U << 30,
	__SCX_DSQ_ITER_HAS_VTIME = 1U << 31,
	__SCX_DSQ_ITER_USER_FLAGS = SCX_DSQ_ITER_REV,
	__SCX_DSQ_ITER_ALL_FLAGS = __SCX_DSQ_ITER_USER_FLAGS | __SCX_DSQ_ITER_HAS_SLICE | __SCX_DSQ_ITER_HAS_VTIME,
};

enum scx_enq_flags {
	SCX_ENQ_WAKEUP = 0x01,
	SCX_ENQ_HEAD = 1LLU << 16,
	SCX_ENQ_CPU_SELECTED = 1LLU << 20,
	SCX_ENQ_PREEMPT = 1ULL << 32,
	SCX_ENQ_IMMED = 1ULL << 33,
	SCX_ENQ_REENQ = 1ULL << 40,
	SCX_ENQ_LAST = 1ULL << 41,
	__SCX_ENQ_INTERNAL_MASK = 0xffULL << 56,
	SCX_ENQ_CLEAR_OPSS = 1ULL << 56,
	SCX_ENQ_DSQ_PRIQ = 1ULL << 57,
	SCX_ENQ_NESTED = 1ULL << 58,
	SCX_ENQ_GDSQ_FALLBACK = 1ULL << 59,
};

enum scx_reenq_flags {
	SCX_REENQ_ANY = 1LLU << 0,
};

enum scx_deq_flags {
	SCX_DEQ_SLEEP = 0x01,
	SCX_DEQ_CORE_SCHED_EXEC = 1ULL << 32,
	SCX_DEQ_SCHED_CHANGE = 1ULL << 33,
};

enum scx_wake_flags {
	SCX_WAKE_FORK = WF_FORK,
	SCX_WAKE_TTWU = WF_TTWU,
	SCX_WAKE_SYNC = WF_SYNC,
};

enum scx_kick_flags {
	SCX_KICK_IDLE = 1LLU << 0,
	SCX_KICK_PREEMPT = 1LLU << 1,
	SCX_KICK_WAIT = 1LLU << 2,
};

enum scx_pick_idle_cpu_flags {
	SCX_PICK_IDLE_CORE = 1LLU << 0,
	SCX_PICK_IDLE_IN_NODE = 1LLU << 1,
};

enum scx_ops_flags {
	SCX_OPS_KEEP_BUILTIN_IDLE = 1LLU << 0,
	SCX_OPS_ENQ_LAST = 1LLU << 1,
	SCX_OPS_ENQ_EXITING = 1LLU << 2,
	SCX_OPS_SWITCH_PARTIAL = 1LLU << 3,
	SCX_OPS_ENQ_MIGRATION_DISABLED = 1LLU << 4,
	SCX_OPS_ALLOW_QUEUED_WAKEUP = 1LLU << 5,
	SCX_OPS_BUILTIN_IDLE_PER_NODE = 1LLU << 6,
	SCX_OPS_ALWAYS_ENQ_IMMED = 1LLU << 7,
	SCX_OPS_ALL_FLAGS = (1LLU << 8) - 1,
	SCX_OPS_HAS_CGROUP_WEIGHT = 1LLU << 16,
};

enum scx_ent_flags {
	SCX_TASK_QUEUED = 1 << 0,
	SCX_TASK_IN_CUSTODY = 1 << 1,
	SCX_TASK_RESET_RUNNABLE_AT = 1 << 2,
	SCX_TASK_DEQD_FOR_SLEEP = 1 << 3,
	SCX_TASK_IMMED = 1 << 5,
	SCX_TASK_STATE_SHIFT = 8,
	SCX_TASK_STATE_BITS = 2,
	SCX_TASK_STATE_MASK = ((1 << SCX_TASK_STATE_BITS) - 1) << SCX_TASK_STATE_SHIFT,
	SCX_TASK_CURSOR = 1 << 31,
};

enum scx_task_state {
	SCX_TASK_NONE,
	SCX_TASK_INIT,
	SCX_TASK_READY,
	SCX_TASK_ENABLED,
	SCX_TASK_NR_STATES,
};

enum scx_exit_kind {
	SCX_EXIT_NONE,
	SCX_EXIT_DONE,
	SCX_EXIT_UNREG = 64,
	SCX_EXIT_UNREG_BPF,
	SCX_EXIT_UNREG_KERN,
	SCX_EXIT_SYSRQ,
	SCX_EXIT_ERROR = 1024,
	SCX_EXIT_ERROR_BPF,
	SCX_EXIT_ERROR_STALL,
};

enum scx_exit_code {
	SCX_ECODE_RSN_HOTPLUG = 1LLU << 32,
	SCX_ECODE_ACT_RESTART = 1LLU << 48,
};

enum scx_exit_flags {
	SCX_EFLAG_INITIALIZED = 1LLU << 0,
};

enum scx_cpu_preempt_reason {
	SCX_CPU_PREEMPT_RT,
	SCX_CPU_PREEMPT_DL,
	SCX_CPU_PREEMPT_STOP,
	SCX_CPU_PREEMPT_UNKNOWN,
};

struct scx_exit_info {
	enum scx_exit_kind kind;
	s64 exit_code;
	u64 flags;
	const char *reason;
	unsigned long *bt;
	u32 bt_len;
	char *msg;
	char *dump;
	s32 exit_cpu;
};

struct scx_init_task_args {
	bool fork;
	struct cgroup *cgroup;
};

struct scx_exit_task_args {
	bool cancelled;
};

struct scx_cgroup_init_args {
	u32 weight;
	u64 bw_period_us;
	u64 bw_quota_us;
	u64 bw_burst_us;
	bool sched_idle;
};

struct scx_cpu_acquire_args {
	u8 __schedlab_unused;
};

struct scx_cpu_release_args {
	enum scx_cpu_preempt_reason reason;
	struct task_struct *task;
};

struct scx_dump_ctx {
	enum scx_exit_kind kind;
	s64 exit_code;
	const char *reason;
	u64 at_ns;
	u64 at_jiffies;
};

/* v6.19+: arguments packed in structs to stay under the BPF argument limit. */
struct scx_bpf_select_cpu_and_args {
	s32 prev_cpu;
	u64 wake_flags;
	u64 flags;
};

struct scx_bpf_dsq_insert_vtime_args {
	u64 dsq_id;
	u64 slice;
	u64 vtime;
	u64 enq_flags;
};

struct scx_event_stats {
	s64 SCX_EV_SELECT_CPU_FALLBACK;
	s64 SCX_EV_DISPATCH_LOCAL_DSQ_OFFLINE;
	s64 SCX_EV_DISPATCH_KEEP_LAST;
	s64 SCX_EV_ENQ_SKIP_EXITING;
	s64 SCX_EV_ENQ_SKIP_MIGRATION_DISABLED;
	s64 SCX_EV_REFILL_SLICE_DFL;
	s64 SCX_EV_BYPASS_DURATION;
	s64 SCX_EV_BYPASS_DISPATCH;
	s64 SCX_EV_BYPASS_ACTIVATE;
};

/*
 * The member order is schedlab's (schedulers use designated initializers);
 * host/ffi.rs mirrors it as SchedExtOpsC.
 */
struct sched_ext_ops {
	s32 (*select_cpu)(struct task_struct *p, s32 prev_cpu, u64 wake_flags);
	void (*enqueue)(struct task_struct *p, u64 enq_flags);
	void (*dequeue)(struct task_struct *p, u64 deq_flags);
	void (*dispatch)(s32 cpu, struct task_struct *prev);
	void (*tick)(struct task_struct *p);
	void (*runnable)(struct task_struct *p, u64 enq_flags);
	void (*running)(struct task_struct *p);
	void (*stopping)(struct task_struct *p, bool runnable);
	void (*quiescent)(struct task_struct *p, u64 deq_flags);
	bool (*yield)(struct task_struct *from, struct task_struct *to);
	bool (*core_sched_before)(struct task_struct *a, struct task_struct *b);
	void (*set_weight)(struct task_struct *p, u32 weight);
	void (*set_cpumask)(struct task_struct *p, const struct cpumask *cpumask);
	void (*update_idle)(s32 cpu, bool idle);
	void (*cpu_acquire)(s32 cpu, struct scx_cpu_acquire_args *args);
	void (*cpu_release)(s32 cpu, struct scx_cpu_release_args *args);
	s32 (*init_task)(struct task_struct *p, struct scx_init_task_args *args);
	void (*exit_task)(struct task_struct *p, struct scx_exit_task_args *args);
	void (*enable)(struct task_struct *p);
	void (*disable)(struct task_struct *p);
	void (*dump)(struct scx_dump_ctx *ctx);
	void (*dump_cpu)(struct scx_dump_ctx *ctx, s32 cpu, bool idle);
	void (*dump_task)(struct scx_dump_ctx *ctx, struct task_struct *p);
	s32 (*cgroup_init)(struct cgroup *cgrp, struct scx_cgroup_init_args *args);
	void (*cgroup_exit)(struct cgroup *cgrp);
	s32 (*cgroup_prep_move)(struct task_struct *p, struct cgroup *from, struct cgroup *to);
	void (*cgroup_move)(struct task_struct *p, struct cgroup *from, struct cgroup *to);
	void (*cgroup_cancel_move)(struct task_struct *p, struct cgroup *from, struct cgroup *to);
	void (*cgroup_set_weight)(struct cgroup *cgrp, u32 weight);
	void (*cgroup_set_bandwidth)(struct cgroup *cgrp, u64 period_us, u64 quota_us, u64 burst_us);
	void (*cgroup_set_idle)(struct cgroup *cgrp, bool idle);
	void (*cpu_online)(s32 cpu);
	void (*cpu_offline)(s32 cpu);
	s32 (*init)(void);
	void (*exit)(struct scx_exit_info *info);
	u32 dispatch_max_batch;
	u64 flags;
	u32 timeout_ms;
	u32 exit_dump_len;
	u64 hotplug_seq;
	u64 sub_cgroup_id;
	char name[SCX_OPS_NAME_LEN];
	void *priv;
};

#include "schedlab_kobj.h"

/* include/linux/sched/ext.h: a task group's sched_ext state. */
struct scx_task_group {
	u32 flags;
	u32 weight;
	u64 bw_period_us;
	u64 bw_quota_us;
	u64 bw_burst_us;
	bool idle;
};

/*
 * The CPU controller's group (kernel/sched/sched.h), as far as BPF reads it:
 * `cgrp->subsys[cpu_cgrp_id]` is its css (host/cgroup.rs).
 */
struct task_group {
	struct cgroup_subsys_state css;
	struct scx_task_group scx;
};

#include "schedlab_cid.h"

#include "schedlab_native.h"

#endif /* __SCHEDLAB_VMLINUX_H__ */

#endif /* __BPF__ */
