/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * schedlab's native stand-in for libbpf's <bpf/bpf_tracing.h>: BPF_PROG.
 *
 * As in BPF, a BPF_PROG function takes one argument, an array of u64 (the
 * context), and unpacks it into the typed parameters. The host calls every
 * struct_ops callback that way (host/ffi.rs), so each callback has the
 * C type `RET name(unsigned long long *ctx)` whatever its parameters.
 */
/*
 * BPF-target mode (clang -target bpf, which predefines __BPF__): libbpf's
 * own header, found after this directory in the include path.
 */
#if defined(__BPF__) && !defined(__SCHEDLAB_NATIVE__)
#include_next <bpf/bpf_tracing.h>
#else

#ifndef __SCHEDLAB_BPF_TRACING_H__
#define __SCHEDLAB_BPF_TRACING_H__

#include "bpf_helpers.h"

#define ___bpf_ctx_cast0() ctx
#define ___bpf_ctx_cast1(x) ___bpf_ctx_cast0(), (void *)ctx[0]
#define ___bpf_ctx_cast2(x, args...) ___bpf_ctx_cast1(args), (void *)ctx[1]
#define ___bpf_ctx_cast3(x, args...) ___bpf_ctx_cast2(args), (void *)ctx[2]
#define ___bpf_ctx_cast4(x, args...) ___bpf_ctx_cast3(args), (void *)ctx[3]
#define ___bpf_ctx_cast5(x, args...) ___bpf_ctx_cast4(args), (void *)ctx[4]
#define ___bpf_ctx_cast6(x, args...) ___bpf_ctx_cast5(args), (void *)ctx[5]
#define ___bpf_ctx_cast7(x, args...) ___bpf_ctx_cast6(args), (void *)ctx[6]
#define ___bpf_ctx_cast8(x, args...) ___bpf_ctx_cast7(args), (void *)ctx[7]
#define ___bpf_ctx_cast9(x, args...) ___bpf_ctx_cast8(args), (void *)ctx[8]
#define ___bpf_ctx_cast10(x, args...) ___bpf_ctx_cast9(args), (void *)ctx[9]
#define ___bpf_ctx_cast11(x, args...) ___bpf_ctx_cast10(args), (void *)ctx[10]
#define ___bpf_ctx_cast12(x, args...) ___bpf_ctx_cast11(args), (void *)ctx[11]
#define ___bpf_ctx_cast(args...) ___bpf_apply(___bpf_ctx_cast, ___bpf_narg(args))(args)

/*
 * The body that follows the macro becomes ____name(ctx, args...); name(ctx)
 * unpacks the context and calls it. Integer parameters receive the low bits
 * of their u64 slot, as the BPF calling convention gives them.
 */
#define BPF_PROG(name, args...)                                                \
	name(unsigned long long *ctx);                                         \
	static __always_inline __typeof__(name(0)) ____##name(                 \
		unsigned long long *ctx, ##args);                              \
	__typeof__(name(0)) name(unsigned long long *ctx)                      \
	{                                                                      \
		_Pragma("GCC diagnostic push")                                 \
		_Pragma("GCC diagnostic ignored \"-Wint-conversion\"")         \
		_Pragma("GCC diagnostic ignored \"-Wpointer-to-int-cast\"")    \
		return ____##name(___bpf_ctx_cast(args));                      \
		_Pragma("GCC diagnostic pop")                                  \
	}                                                                      \
	static __always_inline __typeof__(name(0)) ____##name(                 \
		unsigned long long *ctx, ##args)

/* BPF_PROG2 passes each argument by value the same way here. */
#define BPF_PROG2 BPF_PROG

#endif /* __SCHEDLAB_BPF_TRACING_H__ */

#endif /* __BPF__ */
