/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * The native runtime linked into every hosted scheduler.
 *
 * Each kfunc and helper a scheduler calls is defined here with the kernel's
 * name. Most forward through a table of host functions that
 * schedlab_attach() resolves by name (the Rust side, host/ffi.rs), so the
 * object needs nothing from the executable's symbol table and every loaded
 * copy is independent. What needs no simulator state stays in C: bstr
 * formatting, the numeric and bit iterators, bpf_loop, spin lock and RCU
 * nesting checks, kptr exchange and probe reads.
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "include/vmlinux.h"
#include "include/asm-generic/errno.h"
#include "schedlab_abi.h"

#define EXPORT __attribute__((visibility("default")))

/* ---- host functions ------------------------------------------------------ */

/* X(ret, name, params, args): one host function, forwarded by a kfunc of the same name. */
#define SCHEDLAB_HOST_FNS(X)                                                   \
	X(s32, scx_bpf_create_dsq, (u64 dsq_id, s32 node), (dsq_id, node))     \
	X(s32, scx_bpf_select_cpu_dfl, (struct task_struct * p, s32 prev_cpu, u64 wake_flags, bool *is_idle), \
	  (p, prev_cpu, wake_flags, is_idle))                                  \
	X(s32, __scx_bpf_select_cpu_and, (struct task_struct * p, const struct cpumask *cpus_allowed, \
					  struct scx_bpf_select_cpu_and_args *args), \
	  (p, cpus_allowed, args))                                             \
	X(bool, scx_bpf_dsq_insert, (struct task_struct * p, u64 dsq_id, u64 slice, u64 enq_flags), \
	  (p, dsq_id, slice, enq_flags))                                       \
	X(bool, scx_bpf_dsq_insert_vtime, (struct task_struct * p, u64 dsq_id, u64 slice, u64 vtime, u64 enq_flags), \
	  (p, dsq_id, slice, vtime, enq_flags))                                \
	X(u32, scx_bpf_dispatch_nr_slots, (void), ())                          \
	X(bool, scx_bpf_dsq_move_to_local___v2, (u64 dsq_id, u64 enq_flags), (dsq_id, enq_flags)) \
	X(bool, scx_bpf_dsq_move, (struct bpf_iter_scx_dsq * it, struct task_struct *p, u64 dsq_id, u64 enq_flags), \
	  (it, p, dsq_id, enq_flags))                                          \
	X(bool, scx_bpf_dsq_move_vtime, (struct bpf_iter_scx_dsq * it, struct task_struct *p, u64 dsq_id, u64 enq_flags), \
	  (it, p, dsq_id, enq_flags))                                          \
	X(u32, scx_bpf_reenqueue_local, (void), ())                            \
	X(s32, scx_bpf_dsq_nr_queued, (u64 dsq_id), (dsq_id))                  \
	X(struct task_struct *, scx_bpf_dsq_peek, (u64 dsq_id), (dsq_id))      \
	X(int, bpf_iter_scx_dsq_new, (struct bpf_iter_scx_dsq * it, u64 dsq_id, u64 flags), (it, dsq_id, flags)) \
	X(struct task_struct *, bpf_iter_scx_dsq_next, (struct bpf_iter_scx_dsq * it), (it)) \
	X(u32, scx_bpf_cpuperf_cap, (s32 cpu), (cpu))                          \
	X(u32, scx_bpf_cpuperf_cur, (s32 cpu), (cpu))                          \
	X(u32, scx_bpf_nr_node_ids, (void), ())                                \
	X(u32, scx_bpf_nr_cpu_ids, (void), ())                                 \
	X(int, scx_bpf_cpu_node, (s32 cpu), (cpu))                             \
	X(const struct cpumask *, scx_bpf_get_possible_cpumask, (void), ())    \
	X(const struct cpumask *, scx_bpf_get_online_cpumask, (void), ())      \
	X(const struct cpumask *, scx_bpf_get_idle_cpumask_node, (int node), (node)) \
	X(const struct cpumask *, scx_bpf_get_idle_cpumask, (void), ())        \
	X(const struct cpumask *, scx_bpf_get_idle_smtmask_node, (int node), (node)) \
	X(const struct cpumask *, scx_bpf_get_idle_smtmask, (void), ())        \
	X(bool, scx_bpf_test_and_clear_cpu_idle, (s32 cpu), (cpu))             \
	X(s32, scx_bpf_pick_idle_cpu_node, (const cpumask_t *cpus_allowed, int node, u64 flags), (cpus_allowed, node, flags)) \
	X(s32, scx_bpf_pick_idle_cpu, (const cpumask_t *cpus_allowed, u64 flags), (cpus_allowed, flags)) \
	X(s32, scx_bpf_pick_any_cpu_node, (const cpumask_t *cpus_allowed, int node, u64 flags), (cpus_allowed, node, flags)) \
	X(s32, scx_bpf_pick_any_cpu, (const cpumask_t *cpus_allowed, u64 flags), (cpus_allowed, flags)) \
	X(bool, scx_bpf_task_running, (const struct task_struct *p), (p))      \
	X(s32, scx_bpf_task_cpu, (const struct task_struct *p), (p))           \
	X(u64, scx_bpf_now, (void), ())                                        \
	X(u64, bpf_ktime_get_ns, (void), ())                                   \
	X(u32, bpf_get_prandom_u32, (void), ())                                \
	X(u32, bpf_get_smp_processor_id, (void), ())                           \
	X(struct task_struct *, bpf_task_from_pid, (s32 pid), (pid))           \
	X(struct task_struct *, bpf_get_current_task_btf, (void), ())          \
	X(struct task_struct *, bpf_task_acquire, (struct task_struct * p), (p)) \
	X(struct bpf_cpumask *, bpf_cpumask_create, (void), ())                \
	X(struct bpf_cpumask *, bpf_cpumask_acquire, (struct bpf_cpumask * m), (m)) \
	X(u32, bpf_cpumask_first, (const struct cpumask *m), (m))              \
	X(u32, bpf_cpumask_first_zero, (const struct cpumask *m), (m))         \
	X(u32, bpf_cpumask_first_and, (const struct cpumask *a, const struct cpumask *b), (a, b)) \
	X(bool, bpf_cpumask_test_cpu, (u32 cpu, const struct cpumask *m), (cpu, m)) \
	X(bool, bpf_cpumask_test_and_set_cpu, (u32 cpu, struct bpf_cpumask *m), (cpu, m)) \
	X(bool, bpf_cpumask_test_and_clear_cpu, (u32 cpu, struct bpf_cpumask *m), (cpu, m)) \
	X(bool, bpf_cpumask_and, (struct bpf_cpumask * d, const struct cpumask *a, const struct cpumask *b), (d, a, b)) \
	X(bool, bpf_cpumask_equal, (const struct cpumask *a, const struct cpumask *b), (a, b)) \
	X(bool, bpf_cpumask_intersects, (const struct cpumask *a, const struct cpumask *b), (a, b)) \
	X(bool, bpf_cpumask_subset, (const struct cpumask *a, const struct cpumask *b), (a, b)) \
	X(bool, bpf_cpumask_empty, (const struct cpumask *m), (m))             \
	X(bool, bpf_cpumask_full, (const struct cpumask *m), (m))              \
	X(u32, bpf_cpumask_any_distribute, (const struct cpumask *m), (m))     \
	X(u32, bpf_cpumask_any_and_distribute, (const struct cpumask *a, const struct cpumask *b), (a, b)) \
	X(u32, bpf_cpumask_weight, (const struct cpumask *m), (m))             \
	X(void *, bpf_map_lookup_elem, (void *map, const void *key), (map, key)) \
	X(long, bpf_map_update_elem, (void *map, const void *key, const void *value, u64 flags), (map, key, value, flags)) \
	X(long, bpf_map_delete_elem, (void *map, const void *key), (map, key)) \
	X(long, bpf_map_push_elem, (void *map, const void *value, u64 flags), (map, value, flags)) \
	X(long, bpf_map_pop_elem, (void *map, void *value), (map, value))      \
	X(long, bpf_map_peek_elem, (void *map, void *value), (map, value))     \
	X(void *, bpf_map_lookup_percpu_elem, (void *map, const void *key, u32 cpu), (map, key, cpu)) \
	X(long, bpf_for_each_map_elem, (void *map, void *cb, void *cb_ctx, u64 flags), (map, cb, cb_ctx, flags)) \
	X(void *, bpf_task_storage_get, (void *map, struct task_struct *task, void *value, u64 flags), (map, task, value, flags)) \
	X(long, bpf_task_storage_delete, (void *map, struct task_struct *task), (map, task)) \
	X(long, bpf_timer_init, (struct bpf_timer * timer, void *map, u64 flags), (timer, map, flags)) \
	X(long, bpf_timer_set_callback, (struct bpf_timer * timer, void *cb), (timer, cb)) \
	X(long, bpf_timer_start, (struct bpf_timer * timer, u64 nsecs, u64 flags), (timer, nsecs, flags)) \
	X(long, bpf_timer_cancel, (struct bpf_timer * timer), (timer))   \
	X(struct task_struct *, scx_bpf_cpu_curr, (s32 cpu), (cpu))            \
	X(bool, scx_bpf_task_set_slice, (struct task_struct * p, u64 slice), (p, slice)) \
	X(bool, scx_bpf_task_set_dsq_vtime, (struct task_struct * p, u64 vtime), (p, vtime)) \
	X(struct rq *, scx_bpf_cpu_rq, (s32 cpu), (cpu))                       \
	X(struct rq *, scx_bpf_locked_rq, (void), ())                          \
	X(struct rq *, schedlab_percpu_rq, (u32 cpu), (cpu))                   \
	X(void *, schedlab_preempt_count, (void), ())                          \
	X(u32, schedlab_this_cpu, (void), ())                                  \
	X(struct cgroup *, scx_bpf_task_cgroup, (struct task_struct * p), (p)) \
	X(struct cgroup *, bpf_cgroup_acquire, (struct cgroup * cgrp), (cgrp)) \
	X(struct cgroup *, bpf_cgroup_ancestor, (struct cgroup * cgrp, int level), (cgrp, level)) \
	X(struct cgroup *, bpf_cgroup_from_id, (u64 cgid), (cgid))             \
	X(void *, bpf_cgrp_storage_get, (void *map, struct cgroup *cgroup, void *value, u64 flags), \
	  (map, cgroup, value, flags))                                         \
	X(long, bpf_cgrp_storage_delete, (void *map, struct cgroup *cgroup), (map, cgroup)) \
	X(struct cgroup_subsys_state *, schedlab_css_next, (struct cgroup_subsys_state * start, \
	  struct cgroup_subsys_state *pos, u64 order), (start, pos, order))    \
	X(void *, bpf_inode_storage_get, (void *map, void *inode, void *value, u64 flags), \
	  (map, inode, value, flags))                                          \
	X(long, bpf_inode_storage_delete, (void *map, void *inode), (map, inode)) \
	X(void *, bpf_ringbuf_reserve, (void *ringbuf, u64 size, u64 flags), (ringbuf, size, flags)) \
	X(long, bpf_ringbuf_output, (void *ringbuf, void *data, u64 size, u64 flags), (ringbuf, data, size, flags)) \
	X(u64, bpf_ringbuf_query, (void *ringbuf, u64 flags), (ringbuf, flags)) \
	X(long, schedlab_user_ringbuf_peek, (void *map, void **data), (map, data)) \
	X(void *, bpf_arena_alloc_pages, (void *map, void *addr, u32 page_cnt, int node_id, u64 flags), \
	  (map, addr, page_cnt, node_id, flags))                               \
	X(int, bpf_arena_reserve_pages, (void *map, void *ptr, u32 page_cnt), (map, ptr, page_cnt)) \
	X(long, bpf_perf_event_read_value, (void *map, u64 flags, struct bpf_perf_event_value *buf, u32 buf_size), \
	  (map, flags, buf, buf_size))

/* Host functions returning nothing. */
#define SCHEDLAB_HOST_VOID_FNS(X)                                              \
	X(scx_bpf_destroy_dsq, (u64 dsq_id), (dsq_id))                         \
	X(scx_bpf_dispatch_cancel, (void), ())                                 \
	X(scx_bpf_dsq_move_set_slice, (struct bpf_iter_scx_dsq * it, u64 slice), (it, slice)) \
	X(scx_bpf_dsq_move_set_vtime, (struct bpf_iter_scx_dsq * it, u64 vtime), (it, vtime)) \
	X(bpf_iter_scx_dsq_destroy, (struct bpf_iter_scx_dsq * it), (it))      \
	X(scx_bpf_kick_cpu, (s32 cpu, u64 flags), (cpu, flags))                \
	X(scx_bpf_dsq_reenq, (u64 dsq_id, u64 reenq_flags), (dsq_id, reenq_flags)) \
	X(scx_bpf_cpuperf_set, (s32 cpu, u32 perf), (cpu, perf))               \
	X(scx_bpf_put_cpumask, (const struct cpumask *m), (m))                 \
	X(scx_bpf_put_idle_cpumask, (const struct cpumask *m), (m))            \
	X(bpf_task_release, (struct task_struct * p), (p))                     \
	X(bpf_cpumask_release, (struct bpf_cpumask * m), (m))                  \
	X(bpf_cpumask_set_cpu, (u32 cpu, struct bpf_cpumask *m), (cpu, m))     \
	X(bpf_cpumask_clear_cpu, (u32 cpu, struct bpf_cpumask *m), (cpu, m))   \
	X(bpf_cpumask_setall, (struct bpf_cpumask * m), (m))                   \
	X(bpf_cpumask_clear, (struct bpf_cpumask * m), (m))                    \
	X(bpf_cpumask_or, (struct bpf_cpumask * d, const struct cpumask *a, const struct cpumask *b), (d, a, b)) \
	X(bpf_cpumask_xor, (struct bpf_cpumask * d, const struct cpumask *a, const struct cpumask *b), (d, a, b)) \
	X(bpf_cpumask_copy, (struct bpf_cpumask * d, const struct cpumask *s), (d, s)) \
	X(schedlab_exit, (s64 code, const char *msg), (code, msg))             \
	X(schedlab_error, (const char *msg), (msg))                            \
	X(schedlab_dump, (const char *msg), (msg))                             \
	X(schedlab_trace, (const char *msg), (msg))                            \
	X(bpf_cgroup_release, (struct cgroup * cgrp), (cgrp))                  \
	X(bpf_ringbuf_submit, (void *data, u64 flags), (data, flags))          \
	X(bpf_ringbuf_discard, (void *data, u64 flags), (data, flags))         \
	X(schedlab_user_ringbuf_release, (void *map), (map))                   \
	X(bpf_arena_free_pages, (void *map, void *ptr, u32 page_cnt), (map, ptr, page_cnt))

#define DECL_HOST(ret, name, params, args) static ret(*h_##name) params;
#define DECL_HOST_VOID(name, params, args) static void(*h_##name) params;
SCHEDLAB_HOST_FNS(DECL_HOST)
SCHEDLAB_HOST_VOID_FNS(DECL_HOST_VOID)

#define FWD(ret, name, params, args)                                           \
	ret name params                                                        \
	{                                                                      \
		return h_##name args;                                          \
	}
#define FWD_VOID(name, params, args)                                           \
	void name params                                                       \
	{                                                                      \
		h_##name args;                                                 \
	}
SCHEDLAB_HOST_FNS(FWD)
SCHEDLAB_HOST_VOID_FNS(FWD_VOID)

/* ---- bstr formatting --------------------------------------------------- */

/*
 * The kernel's bstr_printf(): every conversion takes the next u64 of @data.
 * Each conversion is handed to snprintf with an argument of the C type its
 * length modifier names, so "%d" of a u64 prints the low 32 bits as BPF does.
 */
static void bstr_format(char *out, size_t size, const char *fmt, const u64 *data, u32 data_len)
{
	u32 nr = data_len / sizeof(u64), next = 0;
	size_t pos = 0;

	if (!size)
		return;
	out[0] = '\0';
	while (*fmt && pos + 1 < size) {
		char spec[32];
		size_t sl = 0;
		int longs = 0, shorts = 0, n;
		char conv;
		u64 arg;

		if (*fmt != '%') {
			out[pos++] = *fmt++;
			out[pos] = '\0';
			continue;
		}
		if (fmt[1] == '%') {
			out[pos++] = '%';
			out[pos] = '\0';
			fmt += 2;
			continue;
		}
		spec[sl++] = *fmt++;
		while (*fmt && strchr("-+ #0", *fmt) && sl < 8)
			spec[sl++] = *fmt++;
		while (*fmt >= '0' && *fmt <= '9' && sl < 16)
			spec[sl++] = *fmt++;
		if (*fmt == '.') {
			spec[sl++] = *fmt++;
			while (*fmt >= '0' && *fmt <= '9' && sl < 24)
				spec[sl++] = *fmt++;
		}
		for (;; fmt++) {
			if (*fmt == 'l' || *fmt == 'z' || *fmt == 'j' || *fmt == 't')
				longs++;
			else if (*fmt == 'h')
				shorts++;
			else
				break;
		}
		conv = *fmt;
		if (!conv)
			break;
		fmt++;
		arg = next < nr ? data[next] : 0;
		next++;
		switch (conv) {
		case 'd':
		case 'i':
			spec[sl++] = 'l';
			spec[sl++] = 'l';
			spec[sl++] = conv;
			spec[sl] = '\0';
			n = snprintf(out + pos, size - pos, spec,
				     longs ? (long long)arg
					   : shorts == 1 ? (long long)(short)arg
					   : shorts >= 2 ? (long long)(signed char)arg
							 : (long long)(int)arg);
			break;
		case 'u':
		case 'x':
		case 'X':
		case 'o':
			spec[sl++] = 'l';
			spec[sl++] = 'l';
			spec[sl++] = conv;
			spec[sl] = '\0';
			n = snprintf(out + pos, size - pos, spec,
				     longs ? (unsigned long long)arg
					   : shorts == 1 ? (unsigned long long)(unsigned short)arg
					   : shorts >= 2 ? (unsigned long long)(unsigned char)arg
							 : (unsigned long long)(unsigned int)arg);
			break;
		case 'c':
			spec[sl++] = 'c';
			spec[sl] = '\0';
			n = snprintf(out + pos, size - pos, spec, (int)(char)arg);
			break;
		case 's': {
			const char *s = (const char *)(uintptr_t)arg;

			spec[sl++] = 's';
			spec[sl] = '\0';
			n = snprintf(out + pos, size - pos, spec, s ? s : "(null)");
			break;
		}
		case 'p':
			/* %pS, %pK, %px, %pI4 ...: the pointer's value. */
			if (*fmt == 'k' || *fmt == 'u') {
				const char *s = (const char *)(uintptr_t)arg;

				fmt += fmt[1] == 's' ? 2 : 1;
				n = snprintf(out + pos, size - pos, "%s", s ? s : "(null)");
				break;
			}
			if (*fmt && strchr("xKBSsiI", *fmt)) {
				fmt++;
				if (*fmt == '4' || *fmt == '6')
					fmt++;
			}
			n = snprintf(out + pos, size - pos, "0x%llx", (unsigned long long)arg);
			break;
		default:
			n = snprintf(out + pos, size - pos, "%%%c", conv);
			next--;
			break;
		}
		if (n < 0)
			break;
		pos += (size_t)n;
		if (pos >= size)
			pos = size - 1;
	}
	out[pos] = '\0';
}

#define BSTR_BUF 4096

void scx_bpf_error_bstr(char *fmt, unsigned long long *data, u32 data_len)
{
	char buf[BSTR_BUF];

	bstr_format(buf, sizeof(buf), fmt ? fmt : "", data, data_len);
	h_schedlab_error(buf);
}

void scx_bpf_exit_bstr(s64 exit_code, char *fmt, unsigned long long *data, u32 data_len)
{
	char buf[BSTR_BUF];

	bstr_format(buf, sizeof(buf), fmt ? fmt : "", data, data_len);
	h_schedlab_exit(exit_code, buf);
}

void scx_bpf_dump_bstr(char *fmt, unsigned long long *data, u32 data_len)
{
	char buf[BSTR_BUF];

	bstr_format(buf, sizeof(buf), fmt ? fmt : "", data, data_len);
	h_schedlab_dump(buf);
}

long bpf_trace_vprintk(const char *fmt, u32 fmt_size, const void *data, u32 data_len)
{
	char buf[BSTR_BUF];

	(void)fmt_size;
	bstr_format(buf, sizeof(buf), fmt ? fmt : "", data, data_len);
	h_schedlab_trace(buf);
	return (long)strlen(buf);
}

/* Variadic arguments are read as up to three u64s, as the helper takes them. */
long bpf_trace_printk(const char *fmt, u32 fmt_size, ...)
{
	u64 data[3];
	va_list ap;

	va_start(ap, fmt_size);
	for (int i = 0; i < 3; i++)
		data[i] = va_arg(ap, u64);
	va_end(ap);
	return bpf_trace_vprintk(fmt, fmt_size, data, sizeof(data));
}

long bpf_snprintf(char *str, u32 str_size, const char *fmt, u64 *data, u32 data_len)
{
	if (!str || !str_size)
		return -EINVAL;
	bstr_format(str, str_size, fmt ? fmt : "", data, data_len);
	return (long)strlen(str) + 1;
}

/* ---- the older and flavoured kfunc names -------------------------------- */

/*
 * libbpf ignores a ___suffix when it resolves a kfunc, so the compat headers
 * of 6.12 .. 7.1 declare names like scx_bpf_dsq_insert___v2___compat. Natively
 * each spelling is its own symbol.
 */
void scx_bpf_dispatch(struct task_struct *p, u64 dsq_id, u64 slice, u64 enq_flags)
{
	h_scx_bpf_dsq_insert(p, dsq_id, slice, enq_flags);
}

void scx_bpf_dispatch_vtime(struct task_struct *p, u64 dsq_id, u64 slice, u64 vtime, u64 enq_flags)
{
	h_scx_bpf_dsq_insert_vtime(p, dsq_id, slice, vtime, enq_flags);
}

#define ALIAS(ret, alias, target, params, args)                                \
	ret alias params                                                       \
	{                                                                      \
		return target args;                                            \
	}
#define ALIAS_VOID(alias, target, params, args)                                \
	void alias params                                                      \
	{                                                                      \
		target args;                                                   \
	}

#define INSERT_PARAMS (struct task_struct * p, u64 dsq_id, u64 slice, u64 enq_flags)
#define INSERT_ARGS (p, dsq_id, slice, enq_flags)
#define VTIME_PARAMS (struct task_struct * p, u64 dsq_id, u64 slice, u64 vtime, u64 enq_flags)
#define VTIME_ARGS (p, dsq_id, slice, vtime, enq_flags)
#define MOVE_PARAMS (struct bpf_iter_scx_dsq * it, struct task_struct * p, u64 dsq_id, u64 enq_flags)
#define MOVE_ARGS (it, p, dsq_id, enq_flags)

ALIAS_VOID(scx_bpf_dispatch___compat, scx_bpf_dispatch, INSERT_PARAMS, INSERT_ARGS)
ALIAS_VOID(scx_bpf_dsq_insert___v1, scx_bpf_dispatch, INSERT_PARAMS, INSERT_ARGS)
ALIAS_VOID(scx_bpf_dsq_insert___compat, scx_bpf_dispatch, INSERT_PARAMS, INSERT_ARGS)
ALIAS(bool, scx_bpf_dsq_insert___v2, scx_bpf_dsq_insert, INSERT_PARAMS, INSERT_ARGS)
ALIAS(bool, scx_bpf_dsq_insert___v2___compat, scx_bpf_dsq_insert, INSERT_PARAMS, INSERT_ARGS)
ALIAS_VOID(scx_bpf_dispatch_vtime___compat, scx_bpf_dispatch_vtime, VTIME_PARAMS, VTIME_ARGS)
ALIAS_VOID(scx_bpf_dsq_insert_vtime___compat, scx_bpf_dispatch_vtime, VTIME_PARAMS, VTIME_ARGS)
ALIAS(bool, scx_bpf_dsq_insert_vtime___v2, scx_bpf_dsq_insert_vtime, VTIME_PARAMS, VTIME_ARGS)

bool __scx_bpf_dsq_insert_vtime(struct task_struct *p, struct scx_bpf_dsq_insert_vtime_args *args)
{
	if (!args) {
		h_schedlab_error("__scx_bpf_dsq_insert_vtime: NULL args");
		return false;
	}
	return h_scx_bpf_dsq_insert_vtime(p, args->dsq_id, args->slice, args->vtime, args->enq_flags);
}

s32 scx_bpf_select_cpu_and___compat(struct task_struct *p, s32 prev_cpu, u64 wake_flags,
				    const struct cpumask *cpus_allowed, u64 flags)
{
	struct scx_bpf_select_cpu_and_args args = {
		.prev_cpu = prev_cpu,
		.wake_flags = wake_flags,
		.flags = flags,
	};

	return h___scx_bpf_select_cpu_and(p, cpus_allowed, &args);
}

/* 6.16's form, still in 7.1's unlocked set. */
s32 scx_bpf_select_cpu_and(struct task_struct *p, s32 prev_cpu, u64 wake_flags,
			   const struct cpumask *cpus_allowed, u64 flags)
{
	return scx_bpf_select_cpu_and___compat(p, prev_cpu, wake_flags, cpus_allowed, flags);
}

ALIAS(s32, scx_bpf_select_cpu_and___v2, __scx_bpf_select_cpu_and,
      (struct task_struct * p, const struct cpumask *cpus_allowed, struct scx_bpf_select_cpu_and_args *args),
      (p, cpus_allowed, args))

bool scx_bpf_dsq_move_to_local(u64 dsq_id)
{
	return h_scx_bpf_dsq_move_to_local___v2(dsq_id, 0);
}

ALIAS(bool, scx_bpf_consume, scx_bpf_dsq_move_to_local, (u64 dsq_id), (dsq_id))
ALIAS(bool, scx_bpf_consume___old, scx_bpf_dsq_move_to_local, (u64 dsq_id), (dsq_id))
ALIAS(bool, scx_bpf_consume___compat, scx_bpf_dsq_move_to_local, (u64 dsq_id), (dsq_id))
ALIAS(bool, scx_bpf_dsq_move_to_local___new, scx_bpf_dsq_move_to_local, (u64 dsq_id), (dsq_id))
ALIAS(bool, scx_bpf_dsq_move_to_local___v1, scx_bpf_dsq_move_to_local, (u64 dsq_id), (dsq_id))
/* The kernel's compat.bpf.h probes for scx_bpf_task_cgroup (6.12+) under this name. */
ALIAS(struct cgroup *, scx_bpf_task_cgroup___new, scx_bpf_task_cgroup, (struct task_struct * p), (p))

#define SET_PARAMS(v) (struct bpf_iter_scx_dsq * it, u64 v)
ALIAS_VOID(scx_bpf_dsq_move_set_slice___new, scx_bpf_dsq_move_set_slice, SET_PARAMS(slice), (it, slice))
ALIAS_VOID(scx_bpf_dispatch_from_dsq_set_slice, scx_bpf_dsq_move_set_slice, SET_PARAMS(slice), (it, slice))
ALIAS_VOID(scx_bpf_dispatch_from_dsq_set_slice___old, scx_bpf_dsq_move_set_slice, SET_PARAMS(slice), (it, slice))
ALIAS_VOID(scx_bpf_dispatch_from_dsq_set_slice___compat, scx_bpf_dsq_move_set_slice, SET_PARAMS(slice), (it, slice))
ALIAS_VOID(scx_bpf_dsq_move_set_vtime___new, scx_bpf_dsq_move_set_vtime, SET_PARAMS(vtime), (it, vtime))
ALIAS_VOID(scx_bpf_dispatch_from_dsq_set_vtime, scx_bpf_dsq_move_set_vtime, SET_PARAMS(vtime), (it, vtime))
ALIAS_VOID(scx_bpf_dispatch_from_dsq_set_vtime___old, scx_bpf_dsq_move_set_vtime, SET_PARAMS(vtime), (it, vtime))
ALIAS_VOID(scx_bpf_dispatch_from_dsq_set_vtime___compat, scx_bpf_dsq_move_set_vtime, SET_PARAMS(vtime), (it, vtime))
ALIAS(bool, scx_bpf_dsq_move___new, scx_bpf_dsq_move, MOVE_PARAMS, MOVE_ARGS)
ALIAS(bool, scx_bpf_dispatch_from_dsq, scx_bpf_dsq_move, MOVE_PARAMS, MOVE_ARGS)
ALIAS(bool, scx_bpf_dispatch_from_dsq___old, scx_bpf_dsq_move, MOVE_PARAMS, MOVE_ARGS)
ALIAS(bool, scx_bpf_dispatch_from_dsq___compat, scx_bpf_dsq_move, MOVE_PARAMS, MOVE_ARGS)
ALIAS(bool, scx_bpf_dsq_move_vtime___new, scx_bpf_dsq_move_vtime, MOVE_PARAMS, MOVE_ARGS)
ALIAS(bool, scx_bpf_dispatch_vtime_from_dsq, scx_bpf_dsq_move_vtime, MOVE_PARAMS, MOVE_ARGS)
ALIAS(bool, scx_bpf_dispatch_vtime_from_dsq___old, scx_bpf_dsq_move_vtime, MOVE_PARAMS, MOVE_ARGS)
ALIAS(bool, scx_bpf_dispatch_vtime_from_dsq___compat, scx_bpf_dsq_move_vtime, MOVE_PARAMS, MOVE_ARGS)
ALIAS(u32, scx_bpf_reenqueue_local___v1, scx_bpf_reenqueue_local, (void), ())

/* v6.19: reenqueue from anywhere, deferred; 7.1: any local DSQ. */
void scx_bpf_reenqueue_local___v2___compat(void)
{
	h_scx_bpf_dsq_reenq(SCX_DSQ_LOCAL, SCX_REENQ_ANY);
}

void scx_bpf_dsq_reenq___compat(u64 dsq_id, u64 reenq_flags, const struct bpf_prog_aux *aux)
{
	(void)aux;
	h_scx_bpf_dsq_reenq(dsq_id, reenq_flags);
}

void scx_bpf_events(struct scx_event_stats *events, size_t events__sz)
{
	if (events)
		memset(events, 0, events__sz < sizeof(*events) ? events__sz : sizeof(*events));
}

/* ---- kconfig -------------------------------------------------------------- */

int LINUX_KERNEL_VERSION = (7 << 16) + (1 << 8);
const char CONFIG_CC_VERSION_TEXT[64] = "schedlab native";
const char CONFIG_LOCALVERSION[64] = "-schedlab";
bool CONFIG_BPF_EVENTS = true;
bool CONFIG_PREEMPT_RCU = false;
bool CONFIG_SCHED_CORE = false;
bool CONFIG_SMP = true;
int CONFIG_HZ = 1000;

/* ---- time and CPU helpers that derive from the host's ---------------------- */

u64 bpf_ktime_get_boot_ns(void)
{
	return h_bpf_ktime_get_ns();
}

u64 bpf_ktime_get_coarse_ns(void)
{
	return h_bpf_ktime_get_ns();
}

u64 bpf_jiffies64(void)
{
	return h_bpf_ktime_get_ns() / (1000000000ULL / 1000);
}

long bpf_get_numa_node_id(void)
{
	return h_scx_bpf_cpu_node((s32)h_bpf_get_smp_processor_id());
}

u64 bpf_get_current_task(void)
{
	return (u64)(uintptr_t)h_bpf_get_current_task_btf();
}

/* One process per task in the simulator; pid == tgid. */
u64 bpf_get_current_pid_tgid(void)
{
	return 0;
}

long bpf_get_current_comm(void *buf, u32 size)
{
	if (buf && size)
		strncpy(buf, "schedlab", size)[size - 1] = '\0';
	return 0;
}

/*
 * The per-CPU kernel variables the runtime knows: `runqueues` (each CPU's
 * struct rq view) and `__preempt_count` (the interrupt context of the
 * current op, which bpf_experimental.h's bpf_in_hardirq() and friends
 * read). Any other per-CPU symbol is not modelled: NULL.
 */
struct rq runqueues;
const int __preempt_count;
static const int other_cpu_preempt_count;

void *bpf_per_cpu_ptr(const void *percpu_ptr, u32 cpu)
{
	if (percpu_ptr == &runqueues)
		return h_schedlab_percpu_rq(cpu);
	if (percpu_ptr == &__preempt_count)
		return cpu == h_schedlab_this_cpu() ? h_schedlab_preempt_count() : (void *)&other_cpu_preempt_count;
	return NULL;
}

void *bpf_this_cpu_ptr(const void *percpu_ptr)
{
	if (percpu_ptr == &__preempt_count)
		return h_schedlab_preempt_count();
	return bpf_per_cpu_ptr(percpu_ptr, h_schedlab_this_cpu());
}

/* preempt_count() bits (include/linux/preempt.h). */
#define SOFTIRQ_MASK_ 0x0000ff00
#define HARDIRQ_MASK_ 0x000f0000
#define NMI_MASK_ 0x00f00000

static int preempt_count_now(void)
{
	return *(const int *)h_schedlab_preempt_count();
}

int bpf_in_hardirq(void)
{
	return preempt_count_now() & HARDIRQ_MASK_;
}

int bpf_in_nmi(void)
{
	return preempt_count_now() & NMI_MASK_;
}

int bpf_in_serving_softirq(void)
{
	/* SOFTIRQ_OFFSET: serving a softirq, not just softirqs disabled. */
	return preempt_count_now() & SOFTIRQ_MASK_ & 0x100;
}

int bpf_in_interrupt(void)
{
	return preempt_count_now() & (NMI_MASK_ | HARDIRQ_MASK_ | SOFTIRQ_MASK_);
}

/* ---- iterators and loops -------------------------------------------------- */

struct iter_num {
	s32 cur;
	s32 end;
};
_Static_assert(sizeof(struct iter_num) <= sizeof(struct bpf_iter_num), "bpf_iter_num");

/* [start, end): the kernel refuses start > end and ranges over 2^23. */
int bpf_iter_num_new(struct bpf_iter_num *it, int start, int end)
{
	struct iter_num *s = (struct iter_num *)it;

	if (start > end || (s64)end - start > (1 << 23)) {
		s->cur = s->end = 0;
		return -EINVAL;
	}
	s->cur = start - 1;
	s->end = end;
	return 0;
}

int *bpf_iter_num_next(struct bpf_iter_num *it)
{
	struct iter_num *s = (struct iter_num *)it;

	if (s->cur + 1 >= s->end)
		return NULL;
	s->cur++;
	return &s->cur;
}

void bpf_iter_num_destroy(struct bpf_iter_num *it)
{
	(void)it;
}

struct iter_bits {
	const u64 *bits;
	s32 nr_bits;
	s32 cur;
};
_Static_assert(sizeof(struct iter_bits) <= sizeof(struct bpf_iter_bits), "bpf_iter_bits");

int bpf_iter_bits_new(struct bpf_iter_bits *it, const u64 *unsafe_ptr__ign, u32 nr_words)
{
	struct iter_bits *s = (struct iter_bits *)it;

	s->bits = unsafe_ptr__ign;
	s->nr_bits = unsafe_ptr__ign ? (s32)(nr_words * 64) : 0;
	s->cur = -1;
	return unsafe_ptr__ign ? 0 : -EINVAL;
}

int *bpf_iter_bits_next(struct bpf_iter_bits *it)
{
	struct iter_bits *s = (struct iter_bits *)it;

	for (s32 b = s->cur + 1; b < s->nr_bits; b++) {
		if (s->bits[b / 64] & (1ULL << (b % 64))) {
			s->cur = b;
			return &s->cur;
		}
	}
	s->cur = s->nr_bits;
	return NULL;
}

void bpf_iter_bits_destroy(struct bpf_iter_bits *it)
{
	(void)it;
}

/* bpf_loop(): call @cb(i, ctx) until it returns nonzero; at most 2^23 times. */
long bpf_loop(u32 nr_loops, void *callback_fn, void *callback_ctx, u64 flags)
{
	long (*cb)(u64, void *) = (long (*)(u64, void *))callback_fn;
	u32 i;

	if (flags || !cb || nr_loops > (1U << 23))
		return -EINVAL;
	for (i = 0; i < nr_loops; i++)
		if (cb(i, callback_ctx))
			return i + 1;
	return i;
}

/* ---- memory --------------------------------------------------------------- */

long bpf_probe_read_kernel(void *dst, u32 size, const void *src)
{
	if (!src) {
		memset(dst, 0, size);
		return -EFAULT;
	}
	memcpy(dst, src, size);
	return 0;
}

long bpf_probe_read_kernel_str(void *dst, u32 size, const void *src)
{
	size_t n;

	if (!size)
		return 0;
	if (!src) {
		((char *)dst)[0] = '\0';
		return -EFAULT;
	}
	n = strnlen(src, size - 1);
	memcpy(dst, src, n);
	((char *)dst)[n] = '\0';
	return (long)n + 1;
}

ALIAS(long, bpf_probe_read, bpf_probe_read_kernel, (void *dst, u32 size, const void *src), (dst, size, src))
ALIAS(long, bpf_probe_read_user, bpf_probe_read_kernel, (void *dst, u32 size, const void *src), (dst, size, src))
ALIAS(long, bpf_probe_read_str, bpf_probe_read_kernel_str, (void *dst, u32 size, const void *src), (dst, size, src))
ALIAS(long, bpf_probe_read_user_str, bpf_probe_read_kernel_str, (void *dst, u32 size, const void *src), (dst, size, src))

/* Store @ptr in the kptr field @dst and return what was there. */
void *bpf_kptr_xchg(void *dst, void *ptr)
{
	void *old;

	if (!dst) {
		h_schedlab_error("bpf_kptr_xchg: NULL map value");
		return NULL;
	}
	old = *(void **)dst;
	*(void **)dst = ptr;
	return old;
}

/* ---- locks: single-threaded, so only the nesting is checked ---------------- */

static u32 locks_held;
static u32 rcu_depth;
/*
 * schedlab_module.end_call_pending: byte 0 says there is something for
 * end_call to check or free; byte 1 is the host's, for what it releases
 * itself. The host tests the four bytes as one word.
 */
static union {
	u32 word;
	u8 bytes[4];
} end_call_pending;

/*
 * Raised before the state it announces changes: a call abandoned in between
 * (a timeout lands anywhere in the object's text) still gets its end_call.
 * The fence keeps the compiler from sinking the store past that change.
 */
static void end_call_needed(void)
{
	end_call_pending.bytes[0] = 1;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
}

/* Objects, lists, rbtrees, dynptrs, resilient locks, strings. */
#include "runtime_ds.c"

/* The 7.3 cid form: cids, cmasks, sub-scheduler caps. */
#include "runtime_cid.c"

long bpf_spin_lock(struct bpf_spin_lock *lock)
{
	if (!lock) {
		h_schedlab_error("bpf_spin_lock: NULL lock");
		return 0;
	}
	if (lock->val) {
		h_schedlab_error("bpf_spin_lock: lock already held (AA deadlock)");
		return 0;
	}
	if (locks_held) {
		h_schedlab_error("bpf_spin_lock: only one lock may be held at a time");
		return 0;
	}
	end_call_needed();
	lock->val = 1;
	locks_held++;
	return 0;
}

long bpf_spin_unlock(struct bpf_spin_lock *lock)
{
	if (!lock || !lock->val) {
		h_schedlab_error("bpf_spin_unlock: lock not held");
		return 0;
	}
	lock->val = 0;
	locks_held--;
	return 0;
}

void bpf_rcu_read_lock(void)
{
	end_call_needed();
	rcu_depth++;
}

void bpf_rcu_read_unlock(void)
{
	if (!rcu_depth) {
		h_schedlab_error("bpf_rcu_read_unlock: not in an RCU read section");
		return;
	}
	rcu_depth--;
}

/* Bit 0: a spin lock is still held; bit 1: an RCU section is still open. */
static u32 end_call(void)
{
	u32 bad = (locks_held ? 1 : 0) | (rcu_depth ? 2 : 0);

	bad |= res_locks_reset() ? 1 : 0;
	locks_held = 0;
	rcu_depth = 0;
	free_dead_objs();
	end_call_pending.word = 0;
	return bad;
}

/* ---- attach --------------------------------------------------------------- */

/*
 * Resolve every host function by name. Returns NULL if the host lacks one
 * (the resolver records which), else the module description.
 */
EXPORT struct schedlab_module *schedlab_attach(void *(*resolve)(const char *name))
{
	int missing = 0;

#define RESOLVE(ret, name, params, args)                                       \
	h_##name = (ret(*) params)resolve(#name);                              \
	missing |= !h_##name;
#define RESOLVE_VOID(name, params, args)                                       \
	h_##name = (void(*) params)resolve(#name);                             \
	missing |= !h_##name;
	SCHEDLAB_HOST_FNS(RESOLVE)
	SCHEDLAB_HOST_VOID_FNS(RESOLVE_VOID)
	SCHEDLAB_CID_HOST_FNS(RESOLVE)
	SCHEDLAB_CID_HOST_VOID_FNS(RESOLVE_VOID)
	if (missing)
		return NULL;
	__schedlab_module.end_call = end_call;
	__schedlab_module.end_call_pending = &end_call_pending.word;
	return &__schedlab_module;
}
