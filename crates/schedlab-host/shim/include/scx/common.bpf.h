/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * schedlab's native <scx/common.bpf.h>: the sched_ext kfuncs and helpers a
 * scheduler's .bpf.c uses, API-compatible with the kernel's
 * tools/sched_ext/include/scx/common.bpf.h and sched-ext/scx's
 * scheds/include/scx/common.bpf.h. Kfuncs are functions of the runtime
 * (shim/runtime.c) which forwards them to the simulator.
 */
#ifndef __SCX_COMMON_BPF_H
#define __SCX_COMMON_BPF_H

#define BPF_NO_KFUNC_PROTOTYPES

#include "../vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include <asm-generic/errno.h>
#include "user_exit_info.bpf.h"
#include "enum_defs.autogen.h"

#define PF_IDLE 0x00000002
#define PF_EXITING 0x00000004
#define PF_IO_WORKER 0x00000010
#define PF_WQ_WORKER 0x00000020
#define PF_KCOMPACTD 0x00010000
#define PF_KSWAPD 0x00020000
#define PF_KTHREAD 0x00200000
#define CLOCK_MONOTONIC 1

#ifndef NR_CPUS
#define NR_CPUS SCHEDLAB_NR_CPUS
#endif

extern int LINUX_KERNEL_VERSION __kconfig;
extern const char CONFIG_CC_VERSION_TEXT[64] __kconfig __weak;
extern const char CONFIG_LOCALVERSION[64] __kconfig __weak;
extern bool CONFIG_PREEMPT_RCU __kconfig __weak;

/* DSQs, insertion and dispatch. */
s32 scx_bpf_create_dsq(u64 dsq_id, s32 node) __ksym;
void scx_bpf_destroy_dsq(u64 dsq_id) __ksym;
s32 scx_bpf_select_cpu_dfl(struct task_struct *p, s32 prev_cpu, u64 wake_flags, bool *is_idle) __ksym;
s32 __scx_bpf_select_cpu_and(struct task_struct *p, const struct cpumask *cpus_allowed,
			     struct scx_bpf_select_cpu_and_args *args) __ksym __weak;
bool __scx_bpf_dsq_insert_vtime(struct task_struct *p, struct scx_bpf_dsq_insert_vtime_args *args) __ksym __weak;
bool scx_bpf_dsq_insert(struct task_struct *p, u64 dsq_id, u64 slice, u64 enq_flags) __ksym;
bool scx_bpf_dsq_insert_vtime(struct task_struct *p, u64 dsq_id, u64 slice, u64 vtime, u64 enq_flags) __ksym;
u32 scx_bpf_dispatch_nr_slots(void) __ksym;
void scx_bpf_dispatch_cancel(void) __ksym;
void scx_bpf_kick_cpu(s32 cpu, u64 flags) __ksym;
s32 scx_bpf_dsq_nr_queued(u64 dsq_id) __ksym;
struct task_struct *scx_bpf_dsq_peek(u64 dsq_id) __ksym __weak;
int bpf_iter_scx_dsq_new(struct bpf_iter_scx_dsq *it, u64 dsq_id, u64 flags) __ksym __weak;
struct task_struct *bpf_iter_scx_dsq_next(struct bpf_iter_scx_dsq *it) __ksym __weak;
void bpf_iter_scx_dsq_destroy(struct bpf_iter_scx_dsq *it) __ksym __weak;

/* The pre-6.13 names, still accepted (see compat.bpf.h for the new ones). */
void scx_bpf_dispatch(struct task_struct *p, u64 dsq_id, u64 slice, u64 enq_flags) __ksym __weak;
void scx_bpf_dispatch_vtime(struct task_struct *p, u64 dsq_id, u64 slice, u64 vtime, u64 enq_flags) __ksym __weak;
bool scx_bpf_consume(u64 dsq_id) __ksym __weak;
void scx_bpf_dispatch_from_dsq_set_slice(struct bpf_iter_scx_dsq *it__iter, u64 slice) __ksym __weak;
void scx_bpf_dispatch_from_dsq_set_vtime(struct bpf_iter_scx_dsq *it__iter, u64 vtime) __ksym __weak;
bool scx_bpf_dispatch_from_dsq(struct bpf_iter_scx_dsq *it__iter, struct task_struct *p, u64 dsq_id, u64 enq_flags) __ksym __weak;
bool scx_bpf_dispatch_vtime_from_dsq(struct bpf_iter_scx_dsq *it__iter, struct task_struct *p, u64 dsq_id, u64 enq_flags) __ksym __weak;

/* Exit, errors and dumps (bstr: every argument widened to u64). */
void scx_bpf_exit_bstr(s64 exit_code, char *fmt, unsigned long long *data, u32 data__sz) __ksym __weak;
void scx_bpf_error_bstr(char *fmt, unsigned long long *data, u32 data_len) __ksym;
void scx_bpf_dump_bstr(char *fmt, unsigned long long *data, u32 data_len) __ksym __weak;

/* CPUs, nodes, performance and idle state. */
u32 scx_bpf_cpuperf_cap(s32 cpu) __ksym __weak;
u32 scx_bpf_cpuperf_cur(s32 cpu) __ksym __weak;
void scx_bpf_cpuperf_set(s32 cpu, u32 perf) __ksym __weak;
u32 scx_bpf_nr_node_ids(void) __ksym __weak;
u32 scx_bpf_nr_cpu_ids(void) __ksym __weak;
int scx_bpf_cpu_node(s32 cpu) __ksym __weak;
const struct cpumask *scx_bpf_get_possible_cpumask(void) __ksym __weak;
const struct cpumask *scx_bpf_get_online_cpumask(void) __ksym __weak;
void scx_bpf_put_cpumask(const struct cpumask *cpumask) __ksym __weak;
const struct cpumask *scx_bpf_get_idle_cpumask_node(int node) __ksym __weak;
const struct cpumask *scx_bpf_get_idle_cpumask(void) __ksym;
const struct cpumask *scx_bpf_get_idle_smtmask_node(int node) __ksym __weak;
const struct cpumask *scx_bpf_get_idle_smtmask(void) __ksym;
void scx_bpf_put_idle_cpumask(const struct cpumask *cpumask) __ksym;
bool scx_bpf_test_and_clear_cpu_idle(s32 cpu) __ksym;
s32 scx_bpf_pick_idle_cpu_node(const cpumask_t *cpus_allowed, int node, u64 flags) __ksym __weak;
s32 scx_bpf_pick_idle_cpu(const cpumask_t *cpus_allowed, u64 flags) __ksym;
s32 scx_bpf_pick_any_cpu_node(const cpumask_t *cpus_allowed, int node, u64 flags) __ksym __weak;
s32 scx_bpf_pick_any_cpu(const cpumask_t *cpus_allowed, u64 flags) __ksym;
bool scx_bpf_task_running(const struct task_struct *p) __ksym;
s32 scx_bpf_task_cpu(const struct task_struct *p) __ksym;
/* Not modelled: weak and undefined, so bpf_ksym_exists() is false. */
struct rq *scx_bpf_cpu_rq(s32 cpu) __ksym __weak;
struct task_struct *scx_bpf_cpu_curr(s32 cpu) __ksym __weak;
struct cgroup *scx_bpf_task_cgroup(struct task_struct *p) __ksym __weak;
bool scx_bpf_sub_dispatch(u64 cgroup_id) __ksym __weak;
u64 scx_bpf_now(void) __ksym __weak;
void scx_bpf_events(struct scx_event_stats *events, size_t events__sz) __ksym __weak;

/* Use as @it__iter of scx_bpf_dsq_move[_vtime]() inside bpf_for_each(). */
#define BPF_FOR_EACH_ITER (&___it)

#define scx_read_event(e, name) ((e)->name)

#define SCX_STRINGIFY(x) #x
#define SCX_TOSTRING(x) SCX_STRINGIFY(x)

static inline __attribute__((format(printf, 1, 2)))
void ___scx_bpf_bstr_format_checker(const char *fmt, ...) {}

/* The format and the arguments, each widened to u64, as the bstr kfuncs take them. */
#define scx_bpf_bstr_preamble(fmt, args...)                                    \
	static char ___fmt[] = fmt;                                            \
	unsigned long long ___param[___bpf_narg(args) ?: 1] = {};              \
	_Pragma("GCC diagnostic push")                                         \
	_Pragma("GCC diagnostic ignored \"-Wint-conversion\"")                 \
	_Pragma("GCC diagnostic ignored \"-Wpointer-to-int-cast\"")            \
	___bpf_fill(___param, args);                                           \
	_Pragma("GCC diagnostic pop")

/* Exit cleanly (SCX_EXIT_UNREG_BPF) with @code and a formatted message. */
#define scx_bpf_exit(code, fmt, args...)                                       \
	({                                                                     \
		scx_bpf_bstr_preamble(fmt, args)                               \
		scx_bpf_exit_bstr(code, ___fmt, ___param, sizeof(___param));   \
		___scx_bpf_bstr_format_checker(fmt, ##args);                   \
	})

/* Eject the scheduler (SCX_EXIT_ERROR_BPF) with a formatted message. */
#define scx_bpf_error(fmt, args...)                                            \
	({                                                                     \
		scx_bpf_bstr_preamble(fmt, args)                               \
		scx_bpf_error_bstr(___fmt, ___param, sizeof(___param));        \
		___scx_bpf_bstr_format_checker(fmt, ##args);                   \
	})

/* Append to the debug dump, from ops.dump*(). */
#define scx_bpf_dump(fmt, args...)                                             \
	({                                                                     \
		scx_bpf_bstr_preamble(fmt, args)                               \
		scx_bpf_dump_bstr(___fmt, ___param, sizeof(___param));         \
		___scx_bpf_bstr_format_checker(fmt, ##args);                   \
	})

#define scx_bpf_dump_header()                                                  \
	({                                                                     \
		scx_bpf_dump("kernel: %d.%d.%d %s\ncc: %s\n",                  \
			     LINUX_KERNEL_VERSION >> 16,                       \
			     LINUX_KERNEL_VERSION >> 8 & 0xFF,                 \
			     LINUX_KERNEL_VERSION & 0xFF, CONFIG_LOCALVERSION, \
			     CONFIG_CC_VERSION_TEXT);                          \
	})

#define BPF_STRUCT_OPS(name, args...) SEC("struct_ops/" #name) BPF_PROG(name, ##args)
#define BPF_STRUCT_OPS_SLEEPABLE(name, args...) SEC("struct_ops.s/" #name) BPF_PROG(name, ##args)

/* One element; user space may not resize it here (no BTF), so it stays 1. */
#define RESIZABLE_ARRAY(elfsec, arr) arr[1] SEC("." #elfsec "." #arr)

/* MEMBER_VPTR() and ARRAY_ELEM_PTR(): see schedlab_native.h. */

#define __sink(expr) __asm__ __volatile__("" : "+g"(expr))

/* BPF data structures: declared for source compatibility, not provided. */
#define __contains(name, node)
#define private(name) SEC(".data." #name) __hidden __attribute__((aligned(8)))

void *bpf_obj_new_impl(__u64 local_type_id, void *meta) __ksym;
void bpf_obj_drop_impl(void *kptr, void *meta) __ksym;
#define bpf_obj_new(type) ((type *)bpf_obj_new_impl(bpf_core_type_id_local(type), NULL))
#define bpf_obj_drop(kptr) bpf_obj_drop_impl(kptr, NULL)

/* task */
struct task_struct *bpf_task_from_pid(s32 pid) __ksym;
struct task_struct *bpf_task_acquire(struct task_struct *p) __ksym;
void bpf_task_release(struct task_struct *p) __ksym;

/* cgroup: not modelled; weak, so schedulers that probe them see NULL. */
struct cgroup *bpf_cgroup_ancestor(struct cgroup *cgrp, int level) __ksym __weak;
struct cgroup *bpf_cgroup_acquire(struct cgroup *cgrp) __ksym __weak;
void bpf_cgroup_release(struct cgroup *cgrp) __ksym __weak;
struct cgroup *bpf_cgroup_from_id(u64 cgid) __ksym __weak;

/* cpumask */
struct bpf_cpumask *bpf_cpumask_create(void) __ksym;
struct bpf_cpumask *bpf_cpumask_acquire(struct bpf_cpumask *cpumask) __ksym;
void bpf_cpumask_release(struct bpf_cpumask *cpumask) __ksym;
u32 bpf_cpumask_first(const struct cpumask *cpumask) __ksym;
u32 bpf_cpumask_first_zero(const struct cpumask *cpumask) __ksym;
u32 bpf_cpumask_first_and(const struct cpumask *src1, const struct cpumask *src2) __ksym;
void bpf_cpumask_set_cpu(u32 cpu, struct bpf_cpumask *cpumask) __ksym;
void bpf_cpumask_clear_cpu(u32 cpu, struct bpf_cpumask *cpumask) __ksym;
bool bpf_cpumask_test_cpu(u32 cpu, const struct cpumask *cpumask) __ksym;
bool bpf_cpumask_test_and_set_cpu(u32 cpu, struct bpf_cpumask *cpumask) __ksym;
bool bpf_cpumask_test_and_clear_cpu(u32 cpu, struct bpf_cpumask *cpumask) __ksym;
void bpf_cpumask_setall(struct bpf_cpumask *cpumask) __ksym;
void bpf_cpumask_clear(struct bpf_cpumask *cpumask) __ksym;
bool bpf_cpumask_and(struct bpf_cpumask *dst, const struct cpumask *src1, const struct cpumask *src2) __ksym;
void bpf_cpumask_or(struct bpf_cpumask *dst, const struct cpumask *src1, const struct cpumask *src2) __ksym;
void bpf_cpumask_xor(struct bpf_cpumask *dst, const struct cpumask *src1, const struct cpumask *src2) __ksym;
bool bpf_cpumask_equal(const struct cpumask *src1, const struct cpumask *src2) __ksym;
bool bpf_cpumask_intersects(const struct cpumask *src1, const struct cpumask *src2) __ksym;
bool bpf_cpumask_subset(const struct cpumask *src1, const struct cpumask *src2) __ksym;
bool bpf_cpumask_empty(const struct cpumask *cpumask) __ksym;
bool bpf_cpumask_full(const struct cpumask *cpumask) __ksym;
void bpf_cpumask_copy(struct bpf_cpumask *dst, const struct cpumask *src) __ksym;
u32 bpf_cpumask_any_distribute(const struct cpumask *cpumask) __ksym;
u32 bpf_cpumask_any_and_distribute(const struct cpumask *src1, const struct cpumask *src2) __ksym;
u32 bpf_cpumask_weight(const struct cpumask *cpumask) __ksym;

int bpf_iter_bits_new(struct bpf_iter_bits *it, const u64 *unsafe_ptr__ign, u32 nr_words) __ksym;
int *bpf_iter_bits_next(struct bpf_iter_bits *it) __ksym;
void bpf_iter_bits_destroy(struct bpf_iter_bits *it) __ksym;

/* for_each_possible_cpu(cpu) / for_each_online_cpu(cpu), cpu an int *. */
#define ___scx_def_cpu_iter(name)                                              \
	struct bpf_iter_##name {                                               \
		struct bpf_iter_bits it;                                       \
		const struct cpumask *bitmap;                                  \
	};                                                                     \
	static inline int bpf_iter_##name##_new(struct bpf_iter_##name *it,    \
						const u64 *unsafe_ptr__ign,    \
						u32 nr_words)                  \
	{                                                                      \
		it->bitmap = scx_bpf_get_##name##_cpumask();                   \
		return bpf_iter_bits_new(&it->it, (const u64 *)it->bitmap,     \
					 sizeof(struct cpumask) / 8);          \
	}                                                                      \
	static inline int *bpf_iter_##name##_next(struct bpf_iter_##name *it)  \
	{                                                                      \
		return bpf_iter_bits_next(&it->it);                            \
	}                                                                      \
	static inline void bpf_iter_##name##_destroy(struct bpf_iter_##name *it) \
	{                                                                      \
		scx_bpf_put_cpumask(it->bitmap);                               \
		bpf_iter_bits_destroy(&it->it);                                \
	}
___scx_def_cpu_iter(possible)
___scx_def_cpu_iter(online)
#define for_each_possible_cpu(cpu) bpf_for_each(possible, cpu, NULL, 0)
#define for_each_online_cpu(cpu) bpf_for_each(online, cpu, NULL, 0)

/* Read-only view of a BPF cpumask. */
static __always_inline const struct cpumask *cast_mask(struct bpf_cpumask *mask)
{
	return (const struct cpumask *)mask;
}

static inline bool is_migration_disabled(const struct task_struct *p)
{
	return p->migration_disabled;
}

/* rcu: the simulator is single-threaded; the runtime checks the nesting. */
void bpf_rcu_read_lock(void) __ksym;
void bpf_rcu_read_unlock(void) __ksym;

/* Time helpers (include/linux/jiffies.h), on u64 nanoseconds. */
static inline s64 time_delta(u64 after, u64 before)
{
	return (s64)(after - before) > 0 ? (s64)(after - before) : 0;
}

static inline bool time_after(u64 a, u64 b)
{
	return (s64)(b - a) < 0;
}

static inline bool time_before(u64 a, u64 b)
{
	return time_after(b, a);
}

static inline bool time_after_eq(u64 a, u64 b)
{
	return (s64)(a - b) >= 0;
}

static inline bool time_before_eq(u64 a, u64 b)
{
	return time_after_eq(b, a);
}

static inline bool time_in_range(u64 a, u64 b, u64 c)
{
	return time_after_eq(a, b) && time_before_eq(a, c);
}

static inline bool time_in_range_open(u64 a, u64 b, u64 c)
{
	return time_after_eq(a, b) && time_before(a, c);
}

#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)
#define __maybe_unused __attribute__((__unused__))

/* READ_ONCE/WRITE_ONCE: volatile accesses of the object's own size. */
#define READ_ONCE(x) (*(const volatile __typeof__(x) *)&(x))
#define WRITE_ONCE(x, val)                                                     \
	({                                                                     \
		__typeof__(x) __v = (val);                                     \
		*(volatile __typeof__(x) *)&(x) = __v;                         \
		__v;                                                           \
	})
#define READ_ONCE_ARENA(type, x) (*(const volatile type *)&(x))
#define WRITE_ONCE_ARENA(type, x, val) (*(volatile type *)&(x) = (val))

/* Exponentially weighted average: decay of 1/(2^decay) per update. */
#define __calc_avg(old, new, decay)                                            \
	({                                                                     \
		__typeof__(old) __o = (old);                                   \
		(__o - (__o >> (decay))) + ((new) >> (decay));                 \
	})

/* floor(log2(v)) for v > 0. */
static inline u32 log2_u32(u32 v)
{
	return v ? 31 - __builtin_clz(v) : 0;
}

/* As in scx: floor(log2(v)) + 1 (0 for v == 0 too). */
static inline u32 log2_u64(u64 v)
{
	u32 hi = v >> 32;

	if (hi)
		return log2_u32(hi) + 32 + 1;
	return log2_u32(v) + 1;
}

static inline u64 __sqrt_u64(u64 x)
{
	u64 r = 0, b = 1ULL << 62;

	while (b > x)
		b >>= 2;
	while (b) {
		if (x >= r + b) {
			x -= r + b;
			r = (r >> 1) + b;
		} else {
			r >>= 1;
		}
		b >>= 2;
	}
	return r;
}

static inline int ctzll(u64 v)
{
	return v ? __builtin_ctzll(v) : 64;
}

/* value * weight / 100 and its inverse, with the task's sched_ext weight. */
static inline u64 scale_by_task_weight(const struct task_struct *p, u64 value)
{
	return (value * p->scx.weight) / 100;
}

static inline u64 scale_by_task_weight_inverse(const struct task_struct *p, u64 value)
{
	return value * 100 / (p->scx.weight ?: 1);
}

static inline u64 get_prandom_u64(void)
{
	return ((u64)bpf_get_prandom_u32() << 32) | bpf_get_prandom_u32();
}

#include "compat.bpf.h"
#include "enums.bpf.h"

#endif /* __SCX_COMMON_BPF_H */
