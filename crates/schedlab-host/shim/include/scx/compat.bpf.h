/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * schedlab's native <scx/compat.bpf.h>. The simulated kernel is 7.1 and
 * also provides every older kfunc name, so each compat wrapper resolves to
 * the current kfunc; the __COMPAT_* spellings of 6.12 .. 7.1 all work.
 */
#ifndef __SCX_COMPAT_BPF_H
#define __SCX_COMPAT_BPF_H

#define __COMPAT_ENUM_OR_ZERO(__type, __ent) ((__type)(__ent))

#define __COMPAT_scx_bpf_task_cgroup(p) scx_bpf_task_cgroup(p)

#if defined(__BPF__) && !defined(__SCHEDLAB_NATIVE__)
/*
 * BPF-target mode: the running kernel decides which kfuncs exist and with
 * which signature. Each call goes to the newest flavour the kernel has:
 * libbpf resolves `name___flavour` to the kernel's `name` when the
 * prototypes are compatible, and bpf_ksym_exists() is false for a weak
 * kfunc it could not resolve, so the verifier drops the dead branches.
 *   6.12: scx_bpf_dispatch / dispatch_vtime / consume
 *   6.13 .. 7.3: scx_bpf_dsq_insert / insert_vtime (void), move_to_local(dsq_id)
 *   later: insert returning bool, move_to_local(dsq_id, enq_flags),
 *          __scx_bpf_dsq_insert_vtime(p, args)
 */
bool scx_bpf_dsq_insert___v2(struct task_struct *p, u64 dsq_id, u64 slice, u64 enq_flags) __ksym __weak;
void scx_bpf_dsq_insert___v1(struct task_struct *p, u64 dsq_id, u64 slice, u64 enq_flags) __ksym __weak;
void scx_bpf_dispatch___compat(struct task_struct *p, u64 dsq_id, u64 slice, u64 enq_flags) __ksym __weak;
void scx_bpf_dsq_insert_vtime___v1(struct task_struct *p, u64 dsq_id, u64 slice, u64 vtime, u64 enq_flags) __ksym __weak;
void scx_bpf_dispatch_vtime___compat(struct task_struct *p, u64 dsq_id, u64 slice, u64 vtime, u64 enq_flags) __ksym __weak;
bool scx_bpf_dsq_move_to_local___v2(u64 dsq_id, u64 enq_flags) __ksym __weak;
bool scx_bpf_dsq_move_to_local___v1(u64 dsq_id) __ksym __weak;
bool scx_bpf_consume___compat(u64 dsq_id) __ksym __weak;

static inline bool ___scx_insert(struct task_struct *p, u64 dsq_id, u64 slice, u64 enq_flags)
{
	if (bpf_ksym_exists(scx_bpf_dsq_insert___v2))
		return scx_bpf_dsq_insert___v2(p, dsq_id, slice, enq_flags);
	if (bpf_ksym_exists(scx_bpf_dsq_insert___v1))
		scx_bpf_dsq_insert___v1(p, dsq_id, slice, enq_flags);
	else
		scx_bpf_dispatch___compat(p, dsq_id, slice, enq_flags);
	return true;
}
#define scx_bpf_dsq_insert(p, dsq_id, slice, enq_flags) ___scx_insert((p), (dsq_id), (slice), (enq_flags))

static inline bool ___scx_insert_vtime(struct task_struct *p, u64 dsq_id, u64 slice, u64 vtime, u64 enq_flags)
{
	if (bpf_ksym_exists(__scx_bpf_dsq_insert_vtime)) {
		struct scx_bpf_dsq_insert_vtime_args args = {
			.dsq_id = dsq_id, .slice = slice, .vtime = vtime, .enq_flags = enq_flags,
		};
		return __scx_bpf_dsq_insert_vtime(p, &args);
	}
	if (bpf_ksym_exists(scx_bpf_dsq_insert_vtime___v1))
		scx_bpf_dsq_insert_vtime___v1(p, dsq_id, slice, vtime, enq_flags);
	else
		scx_bpf_dispatch_vtime___compat(p, dsq_id, slice, vtime, enq_flags);
	return true;
}
#define scx_bpf_dsq_insert_vtime(p, dsq_id, slice, vtime, enq_flags)          \
	___scx_insert_vtime((p), (dsq_id), (slice), (vtime), (enq_flags))

static inline bool ___scx_move_to_local(u64 dsq_id, u64 enq_flags)
{
	if (bpf_ksym_exists(scx_bpf_dsq_move_to_local___v2))
		return scx_bpf_dsq_move_to_local___v2(dsq_id, enq_flags);
	if (bpf_ksym_exists(scx_bpf_dsq_move_to_local___v1))
		return scx_bpf_dsq_move_to_local___v1(dsq_id);
	return scx_bpf_consume___compat(dsq_id);
}
#define ___scx_mtl_pick(_1, _2, N, ...) N
#define ___scx_mtl1(dsq_id) ___scx_move_to_local((dsq_id), 0)
#define ___scx_mtl2(dsq_id, enq_flags) ___scx_move_to_local((dsq_id), (enq_flags))
#define scx_bpf_dsq_move_to_local(args...) ___scx_mtl_pick(args, ___scx_mtl2, ___scx_mtl1)(args)
#define scx_bpf_dispatch(p, dsq_id, slice, enq_flags) ___scx_insert((p), (dsq_id), (slice), (enq_flags))
#define scx_bpf_dispatch_vtime(p, dsq_id, slice, vtime, enq_flags)            \
	___scx_insert_vtime((p), (dsq_id), (slice), (vtime), (enq_flags))
#define scx_bpf_consume(dsq_id) ___scx_move_to_local((dsq_id), 0)
#else
/* v6.13 names of the move kfuncs (the runtime also has the v6.12 ones). */
bool scx_bpf_dsq_move_to_local___v2(u64 dsq_id, u64 enq_flags) __ksym;
#endif
void scx_bpf_dsq_move_set_slice(struct bpf_iter_scx_dsq *it__iter, u64 slice) __ksym;
void scx_bpf_dsq_move_set_vtime(struct bpf_iter_scx_dsq *it__iter, u64 vtime) __ksym;
bool scx_bpf_dsq_move(struct bpf_iter_scx_dsq *it__iter, struct task_struct *p, u64 dsq_id, u64 enq_flags) __ksym;
bool scx_bpf_dsq_move_vtime(struct bpf_iter_scx_dsq *it__iter, struct task_struct *p, u64 dsq_id, u64 enq_flags) __ksym;

#if !defined(__BPF__) || defined(__SCHEDLAB_NATIVE__)
/* scx_bpf_dsq_move_to_local(dsq_id) (6.13) or (dsq_id, enq_flags) (7.1). */
#define ___scx_mtl_pick(_1, _2, N, ...) N
#define ___scx_mtl1(dsq_id) scx_bpf_dsq_move_to_local___v2((dsq_id), 0)
#define ___scx_mtl2(dsq_id, enq_flags) scx_bpf_dsq_move_to_local___v2((dsq_id), (enq_flags))
#define scx_bpf_dsq_move_to_local(args...) ___scx_mtl_pick(args, ___scx_mtl2, ___scx_mtl1)(args)
#endif

#define __COMPAT_scx_bpf_dsq_move_set_slice(it__iter, slice) scx_bpf_dsq_move_set_slice((it__iter), (slice))
#define __COMPAT_scx_bpf_dsq_move_set_vtime(it__iter, vtime) scx_bpf_dsq_move_set_vtime((it__iter), (vtime))
#define __COMPAT_scx_bpf_dsq_move(it__iter, p, dsq_id, enq_flags)              \
	scx_bpf_dsq_move((it__iter), (p), (dsq_id), (enq_flags))
#define __COMPAT_scx_bpf_dsq_move_vtime(it__iter, p, dsq_id, enq_flags)        \
	scx_bpf_dsq_move_vtime((it__iter), (p), (dsq_id), (enq_flags))
#define __COMPAT_scx_bpf_dispatch_from_dsq_set_slice(it__iter, slice) scx_bpf_dsq_move_set_slice((it__iter), (slice))
#define __COMPAT_scx_bpf_dispatch_from_dsq_set_vtime(it__iter, vtime) scx_bpf_dsq_move_set_vtime((it__iter), (vtime))
#define __COMPAT_scx_bpf_dispatch_from_dsq(it__iter, p, dsq_id, enq_flags)     \
	scx_bpf_dsq_move((it__iter), (p), (dsq_id), (enq_flags))
#define __COMPAT_scx_bpf_dispatch_vtime_from_dsq(it__iter, p, dsq_id, enq_flags) \
	scx_bpf_dsq_move_vtime((it__iter), (p), (dsq_id), (enq_flags))

#define __COMPAT_DSQ_FOR_EACH(p, dsq_id, flags) bpf_for_each(scx_dsq, (p), (dsq_id), (flags))

static inline bool __COMPAT_scx_bpf_consume_task(struct bpf_iter_scx_dsq *it, struct task_struct *p)
{
	return false;
}

int bpf_cpumask_populate(struct cpumask *dst, void *src, size_t src__sz) __ksym __weak;
#define __COMPAT_bpf_cpumask_populate(cpumask, src, size__sz)                  \
	(bpf_ksym_exists(bpf_cpumask_populate) ?                               \
		 bpf_cpumask_populate(cpumask, src, size__sz) : -EOPNOTSUPP)

static inline struct task_struct *__COMPAT_scx_bpf_dsq_peek(u64 dsq_id)
{
	return scx_bpf_dsq_peek(dsq_id);
}

static inline bool __COMPAT_is_enq_cpu_selected(u64 enq_flags)
{
	return enq_flags & SCX_ENQ_CPU_SELECTED;
}

#define __COMPAT_scx_bpf_events(events, size) scx_bpf_events(events, size)
#define __COMPAT_scx_bpf_nr_node_ids() scx_bpf_nr_node_ids()
#define __COMPAT_scx_bpf_cpu_node(cpu) scx_bpf_cpu_node(cpu)
#define __COMPAT_scx_bpf_get_idle_cpumask_node(node) scx_bpf_get_idle_cpumask_node(node)
#define __COMPAT_scx_bpf_get_idle_smtmask_node(node) scx_bpf_get_idle_smtmask_node(node)
#define __COMPAT_scx_bpf_pick_idle_cpu_node(cpus_allowed, node, flags)          \
	scx_bpf_pick_idle_cpu_node(cpus_allowed, node, flags)
#define __COMPAT_scx_bpf_pick_any_cpu_node(cpus_allowed, node, flags)           \
	scx_bpf_pick_any_cpu_node(cpus_allowed, node, flags)

static inline struct task_struct *__COMPAT_scx_bpf_cpu_curr(int cpu)
{
	return bpf_ksym_exists(scx_bpf_cpu_curr) ? scx_bpf_cpu_curr(cpu) : NULL;
}

/* v6.19: scalar arguments packed in a struct; the wrappers keep the old call. */
#define __COMPAT_HAS_scx_bpf_select_cpu_and 1

static inline s32 scx_bpf_select_cpu_and(struct task_struct *p, s32 prev_cpu, u64 wake_flags,
					 const struct cpumask *cpus_allowed, u64 flags)
{
	struct scx_bpf_select_cpu_and_args args = {
		.prev_cpu = prev_cpu,
		.wake_flags = wake_flags,
		.flags = flags,
	};

	return __scx_bpf_select_cpu_and(p, cpus_allowed, &args);
}

/* v6.19: the kernel checks the caller's authority; one scheduler here, so a write. */
static inline void scx_bpf_task_set_slice(struct task_struct *p, u64 slice)
{
	p->scx.slice = slice;
}

static inline void scx_bpf_task_set_dsq_vtime(struct task_struct *p, u64 vtime)
{
	p->scx.dsq_vtime = vtime;
}

u32 scx_bpf_reenqueue_local(void) __ksym;

/* v6.19: reenqueue the local DSQ from any op (deferred); 7.1: any DSQ. */
void scx_bpf_reenqueue_local___v2___compat(void) __ksym;
void scx_bpf_dsq_reenq(u64 dsq_id, u64 reenq_flags) __ksym;

static inline bool __COMPAT_scx_bpf_reenqueue_local_from_anywhere(void)
{
	return true;
}

static inline int scx_bpf_reenqueue_local_from_anywhere(void)
{
	scx_bpf_reenqueue_local___v2___compat();
	return 0;
}

static inline bool __COMPAT_has_generic_reenq(void)
{
	return true;
}

/* The ops table; the loader finds every `struct sched_ext_ops` definition. */
#define SCX_OPS_DEFINE(__name, ...)                                            \
	SEC(".struct_ops.link")                                                \
	struct sched_ext_ops __name = {                                        \
		__VA_ARGS__,                                                   \
	};

#endif /* __SCX_COMPAT_BPF_H */
