/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * schedlab: native meanings of BPF-assembly macros that scx's headers define
 * only when not already defined (#ifndef). vmlinux.h includes it, so it
 * comes before any of them.
 */
#ifndef __SCHEDLAB_NATIVE_H__
#define __SCHEDLAB_NATIVE_H__

/* Arena pointers are ordinary pointers natively: LLVM's address-space
 * casts are no-ops, as with __BPF_FEATURE_ADDR_SPACE_CAST. */
#ifndef __BPF_FEATURE_ADDR_SPACE_CAST
#define __BPF_FEATURE_ADDR_SPACE_CAST 1
#endif
#ifndef __arena
#define __arena
#endif
#ifndef bpf_addr_space_cast
#define bpf_addr_space_cast(var, dst_as, src_as) ((void)(var))
#endif
#ifndef bpf_nop_mov
#define bpf_nop_mov(var) ((void)(var))
#endif
#ifndef bpf_cmp_unlikely
#define bpf_cmp_unlikely(LHS, OP, RHS) ((LHS) OP (RHS))
#endif
#ifndef bpf_cmp_likely
#define bpf_cmp_likely(LHS, OP, RHS) ((LHS) OP (RHS))
#endif

/*
 * MEMBER_VPTR(base, member): a pointer to (base)member, or NULL when the
 * offset falls outside @base. In BPF an asm sequence keeps the verifier's
 * bounds; natively a comparison does the same.
 */
#ifndef MEMBER_VPTR
#define MEMBER_VPTR(base, member)                                              \
	(__typeof__((base) member) *)({                                        \
		u64 __base = (u64) & (base);                                   \
		u64 __addr = (u64) & ((base) member) - __base;                 \
		_Static_assert(sizeof(base) >= sizeof((base) member),          \
			       "@base is smaller than @member, is @base a pointer?"); \
		__addr <= sizeof(base) - sizeof((base) member) ? __addr + __base : 0; \
	})
#endif

/* ARRAY_ELEM_PTR(arr, i, n): &arr[i], or NULL unless i < n. */
#ifndef ARRAY_ELEM_PTR
#define ARRAY_ELEM_PTR(arr, i, n)                                              \
	(__typeof__(arr[i]) *)({                                               \
		u64 __base = (u64)arr;                                         \
		u64 __addr = (u64) & (arr[i]) - __base;                        \
		__addr <= sizeof(arr[0]) * ((n) - 1) ? __addr + __base : 0;    \
	})
#endif

/*
 * `__weak __attribute__((always_inline))` global functions (scx's lib/*.bpf.c)
 * are fine for clang's BPF target, but GCC refuses to inline a function the
 * linker may replace. Natively inlining is only an optimisation, so the bare
 * spelling becomes a harmless attribute; the shim's own __always_inline is
 * spelled __always_inline__ and keeps forcing it.
 */
#ifndef always_inline
#define always_inline __unused__
#endif

/*
 * clang's __builtin_memcpy_inline(dst, src, n) (n a constant: a copy that
 * never becomes a call) has no GCC counterpart; natively the plain
 * __builtin_memcpy does the same copy.
 */
#if !defined(__clang__) && !defined(__builtin_memcpy_inline)
#define __builtin_memcpy_inline(dst, src, n) __builtin_memcpy((dst), (src), (n))
#endif

#endif /* __SCHEDLAB_NATIVE_H__ */
