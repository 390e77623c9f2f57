/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * schedlab's native stand-in for libbpf's <bpf/bpf_helpers.h>.
 *
 * BPF C compiled with the host C compiler into a shared object. Section
 * annotations become `used` (the loader finds maps, rodata, ops and syscall
 * programs from a scan of the preprocessed source, see host/scan.rs), map
 * definitions keep libbpf's encoding (`int (*type)[N]` members, so the loader
 * reads type, sizes and max_entries with sizeof), and helpers are ordinary
 * functions defined by the runtime (shim/runtime.c).
 */
/*
 * BPF-target mode (clang -target bpf, which predefines __BPF__): libbpf's
 * own header, found after this directory in the include path.
 */
#if defined(__BPF__) && !defined(__SCHEDLAB_NATIVE__)
#include_next <bpf/bpf_helpers.h>
#else

#ifndef __SCHEDLAB_BPF_HELPERS_H__
#define __SCHEDLAB_BPF_HELPERS_H__

#include "../vmlinux.h"

#ifndef NULL
#define NULL ((void *)0)
#endif

/*
 * In the scan pass (host/scan.rs runs `cc -E -D__SCHEDLAB_SCAN__`) SEC() and
 * __kconfig leave markers in the text; when compiling they are plain
 * attributes.
 */
#ifdef __SCHEDLAB_SCAN__
#define SEC(name) __schedlab_sec(name)
#define __kconfig __schedlab_kconfig
#else
#define SEC(name) __attribute__((used))
#define __kconfig __attribute__((weak))
#endif

#define __uint(name, val) int (*name)[val]
#define __type(name, val) __typeof__(val) *name
#define __array(name, val) __typeof__(val) *name[]
#define __ulong(name, val) enum { ___bpf_concat(__unique_value, __COUNTER__) = val } name

#ifndef __always_inline
#define __always_inline inline __attribute__((__always_inline__))
#endif
#ifndef __noinline
#define __noinline __attribute__((noinline))
#endif
#ifndef __weak
#define __weak __attribute__((weak))
#endif
#ifndef __hidden
#define __hidden __attribute__((visibility("hidden")))
#endif
#define __ksym
#ifdef __SCHEDLAB_SCAN__
/* Marks kptr fields for the scan (host/scan.rs: special fields of map values). */
#define __kptr __schedlab_kptr
#define __kptr_untrusted __schedlab_kptr
#define __kptr_ref __schedlab_kptr
#define __percpu_kptr __schedlab_kptr
#else
#define __kptr
#define __kptr_untrusted
#define __kptr_ref
#define __percpu_kptr
#endif
#define __uptr
#define __rcu
#define __user
#define __iomem
#define __arena
#define __arg_ctx
#define __arg_nonnull
#define __arg_nullable
#define __arg_trusted
#define __arg_untrusted
#define __arg_arena
#define __bpf_fastcall
#define __builtin_preserve_access_index(x) (x)

#ifndef offsetof
#define offsetof(type, member) __builtin_offsetof(type, member)
#endif
#ifndef container_of
#define container_of(ptr, type, member)                                        \
	({                                                                     \
		void *__mptr = (void *)(ptr);                                  \
		((type *)(__mptr - offsetof(type, member)));                   \
	})
#endif

#ifndef barrier
#define barrier() __asm__ __volatile__("" : : : "memory")
#endif
#ifndef barrier_var
#define barrier_var(var) __asm__ __volatile__("" : "+r"(var))
#endif
#ifndef __bpf_unreachable
#define __bpf_unreachable() __builtin_trap()
#endif

#define KERNEL_VERSION(a, b, c) (((a) << 16) + ((b) << 8) + ((c) > 255 ? 255 : (c)))

/*
 * A weak kfunc the runtime does not define resolves to NULL. The scan pass
 * records which symbols a scheduler tests: calling a missing weak kfunc it
 * never tests is refused at load (host/compile.rs), as the verifier refuses
 * a reachable call to an unresolved kfunc.
 */
#ifdef __SCHEDLAB_SCAN__
#define bpf_ksym_exists(sym) __schedlab_ksym_exists(sym)
#else
#define bpf_ksym_exists(sym) (!!(sym))
#endif

enum libbpf_pin_type {
	LIBBPF_PIN_NONE,
	LIBBPF_PIN_BY_NAME,
};

enum libbpf_tristate {
	TRI_NO = 0,
	TRI_YES = 1,
	TRI_MODULE = 2,
};

/* Argument counting and packing, as libbpf spells it. */
#define ___bpf_concat(a, b) a##b
#define ___bpf_apply(fn, n) ___bpf_concat(fn, n)
#define ___bpf_nth(_, _1, _2, _3, _4, _5, _6, _7, _8, _9, _a, _b, _c, N, ...) N
#define ___bpf_narg(...) ___bpf_nth(_, ##__VA_ARGS__, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0)

#define ___bpf_fill0(arr, p, x) do {} while (0)
#define ___bpf_fill1(arr, p, x) arr[p] = x
#define ___bpf_fill2(arr, p, x, args...) arr[p] = x; ___bpf_fill1(arr, p + 1, args)
#define ___bpf_fill3(arr, p, x, args...) arr[p] = x; ___bpf_fill2(arr, p + 1, args)
#define ___bpf_fill4(arr, p, x, args...) arr[p] = x; ___bpf_fill3(arr, p + 1, args)
#define ___bpf_fill5(arr, p, x, args...) arr[p] = x; ___bpf_fill4(arr, p + 1, args)
#define ___bpf_fill6(arr, p, x, args...) arr[p] = x; ___bpf_fill5(arr, p + 1, args)
#define ___bpf_fill7(arr, p, x, args...) arr[p] = x; ___bpf_fill6(arr, p + 1, args)
#define ___bpf_fill8(arr, p, x, args...) arr[p] = x; ___bpf_fill7(arr, p + 1, args)
#define ___bpf_fill9(arr, p, x, args...) arr[p] = x; ___bpf_fill8(arr, p + 1, args)
#define ___bpf_fill10(arr, p, x, args...) arr[p] = x; ___bpf_fill9(arr, p + 1, args)
#define ___bpf_fill11(arr, p, x, args...) arr[p] = x; ___bpf_fill10(arr, p + 1, args)
#define ___bpf_fill12(arr, p, x, args...) arr[p] = x; ___bpf_fill11(arr, p + 1, args)
#define ___bpf_fill(arr, args...) ___bpf_apply(___bpf_fill, ___bpf_narg(args))(arr, 0, args)

/*
 * Helpers (include/uapi/linux/bpf.h). Natively they are functions of the
 * runtime; the kernel's error codes are negative errno values.
 */
void *bpf_map_lookup_elem(void *map, const void *key);
long bpf_map_update_elem(void *map, const void *key, const void *value, u64 flags);
long bpf_map_delete_elem(void *map, const void *key);
long bpf_map_push_elem(void *map, const void *value, u64 flags);
long bpf_map_pop_elem(void *map, void *value);
long bpf_map_peek_elem(void *map, void *value);
void *bpf_map_lookup_percpu_elem(void *map, const void *key, u32 cpu);
long bpf_for_each_map_elem(void *map, void *callback_fn, void *callback_ctx, u64 flags);
void *bpf_task_storage_get(void *map, struct task_struct *task, void *value, u64 flags);
long bpf_task_storage_delete(void *map, struct task_struct *task);
u64 bpf_ktime_get_ns(void);
u64 bpf_ktime_get_boot_ns(void);
u64 bpf_ktime_get_coarse_ns(void);
u64 bpf_jiffies64(void);
u32 bpf_get_prandom_u32(void);
u32 bpf_get_smp_processor_id(void);
long bpf_get_numa_node_id(void);
long bpf_timer_init(struct bpf_timer *timer, void *map, u64 flags);
long bpf_timer_set_callback(struct bpf_timer *timer, void *callback_fn);
long bpf_timer_start(struct bpf_timer *timer, u64 nsecs, u64 flags);
long bpf_timer_cancel(struct bpf_timer *timer);
long bpf_spin_lock(struct bpf_spin_lock *lock);
long bpf_spin_unlock(struct bpf_spin_lock *lock);
void *bpf_kptr_xchg(void *dst, void *ptr);
long bpf_loop(u32 nr_loops, void *callback_fn, void *callback_ctx, u64 flags);
long bpf_probe_read_kernel(void *dst, u32 size, const void *unsafe_ptr);
long bpf_probe_read_kernel_str(void *dst, u32 size, const void *unsafe_ptr);
long bpf_probe_read(void *dst, u32 size, const void *unsafe_ptr);
long bpf_probe_read_str(void *dst, u32 size, const void *unsafe_ptr);
long bpf_probe_read_user(void *dst, u32 size, const void *unsafe_ptr);
long bpf_probe_read_user_str(void *dst, u32 size, const void *unsafe_ptr);
long bpf_trace_printk(const char *fmt, u32 fmt_size, ...);
long bpf_trace_vprintk(const char *fmt, u32 fmt_size, const void *data, u32 data_len);
long bpf_snprintf(char *str, u32 str_size, const char *fmt, u64 *data, u32 data_len);
u64 bpf_get_current_pid_tgid(void);
struct task_struct *bpf_get_current_task_btf(void);
u64 bpf_get_current_task(void);
long bpf_get_current_comm(void *buf, u32 size_of_buf);
/* Per-CPU kernel variables (__ksym) are not modelled: always NULL. */
void *bpf_per_cpu_ptr(const void *percpu_ptr, u32 cpu);
void *bpf_this_cpu_ptr(const void *percpu_ptr);
/* Ring buffers and dynptrs (kernel/bpf/ringbuf.c, helpers.c). */
void *bpf_ringbuf_reserve(void *ringbuf, u64 size, u64 flags);
void bpf_ringbuf_submit(void *data, u64 flags);
void bpf_ringbuf_discard(void *data, u64 flags);
long bpf_ringbuf_output(void *ringbuf, void *data, u64 size, u64 flags);
u64 bpf_ringbuf_query(void *ringbuf, u64 flags);
long bpf_ringbuf_reserve_dynptr(void *ringbuf, u32 size, u64 flags, struct bpf_dynptr *ptr);
void bpf_ringbuf_submit_dynptr(struct bpf_dynptr *ptr, u64 flags);
void bpf_ringbuf_discard_dynptr(struct bpf_dynptr *ptr, u64 flags);
long bpf_user_ringbuf_drain(void *map, void *callback_fn, void *ctx, u64 flags);
long bpf_dynptr_from_mem(void *data, u32 size, u64 flags, struct bpf_dynptr *ptr);
long bpf_dynptr_read(void *dst, u32 len, const struct bpf_dynptr *src, u32 offset, u64 flags);
long bpf_dynptr_write(const struct bpf_dynptr *dst, u32 offset, void *src, u32 len, u64 flags);
void *bpf_dynptr_data(const struct bpf_dynptr *ptr, u32 offset, u32 len);
/* Local storage of cgroups and inodes (tasks: above). */
void *bpf_cgrp_storage_get(void *map, struct cgroup *cgroup, void *value, u64 flags);
long bpf_cgrp_storage_delete(void *map, struct cgroup *cgroup);
void *bpf_inode_storage_get(void *map, void *inode, void *value, u64 flags);
long bpf_inode_storage_delete(void *map, void *inode);
long bpf_strncmp(const char *s1, u32 s1_sz, const char *s2);
long bpf_perf_event_read_value(void *map, u64 flags, struct bpf_perf_event_value *buf, u32 buf_size);
/* fentry/fexit context: the traced function's arguments and return value. */
long bpf_get_func_arg(void *ctx, u32 n, u64 *value);
long bpf_get_func_ret(void *ctx, u64 *value);
long bpf_get_func_arg_cnt(void *ctx);

/*
 * bpf_printk(): formatted like the kernel's bstr printf (every argument
 * widened to u64), recorded in the host's trace log.
 */
#define bpf_printk(fmt, args...)                                               \
	({                                                                     \
		static const char ___fmt[] = fmt;                              \
		unsigned long long ___param[___bpf_narg(args) ?: 1] = {};      \
		_Pragma("GCC diagnostic push")                                 \
		_Pragma("GCC diagnostic ignored \"-Wint-conversion\"")         \
		___bpf_fill(___param, args);                                   \
		_Pragma("GCC diagnostic pop")                                  \
		bpf_trace_vprintk(___fmt, sizeof(___fmt), ___param,            \
				  sizeof(___param));                           \
	})

/* The most iterations a BPF loop may make (include/linux/bpf.h). */
#ifndef BPF_MAX_LOOPS
#define BPF_MAX_LOOPS (8 * 1024 * 1024)
#endif

/* Open-coded iterators (kfuncs) and the loops built on them. */
int bpf_iter_num_new(struct bpf_iter_num *it, int start, int end);
int *bpf_iter_num_next(struct bpf_iter_num *it);
void bpf_iter_num_destroy(struct bpf_iter_num *it);

#ifndef bpf_for_each
/* for (cur in iterator type(args)), destroying the iterator on any exit. */
#define bpf_for_each(type, cur, args...)                                       \
	for (struct bpf_iter_##type ___it                                      \
		     __attribute__((aligned(8), cleanup(bpf_iter_##type##_destroy))), \
	     *___p __attribute__((unused)) =                                   \
		     (bpf_iter_##type##_new(&___it, ##args), (void *)0);       \
	     ((cur) = bpf_iter_##type##_next(&___it));)
#endif

#ifndef bpf_for
/* for (i = start; i < end; i++), as an iterator loop. */
#define bpf_for(i, start, end)                                                 \
	for (struct bpf_iter_num ___it                                         \
		     __attribute__((aligned(8), cleanup(bpf_iter_num_destroy))), \
	     *___p __attribute__((unused)) =                                   \
		     (bpf_iter_num_new(&___it, (start), (end)), (void *)0);    \
	     ({                                                                \
		     int *___t = bpf_iter_num_next(&___it);                    \
		     (___t && ((i) = *___t, 1));                               \
	     });)
#endif

#ifndef bpf_repeat
/* Loop `n` times. */
#define bpf_repeat(n)                                                          \
	for (struct bpf_iter_num ___it                                         \
		     __attribute__((aligned(8), cleanup(bpf_iter_num_destroy))), \
	     *___p __attribute__((unused)) =                                   \
		     (bpf_iter_num_new(&___it, 0, (n)), (void *)0);            \
	     bpf_iter_num_next(&___it);)
#endif

#endif /* __SCHEDLAB_BPF_HELPERS_H__ */

#endif /* __BPF__ */
