/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * schedlab's native stand-in for libbpf's <bpf/bpf_core_read.h>.
 *
 * Natively there is one kernel: the shim's vmlinux.h. CO-RE relocations
 * become plain member accesses, and the existence checks are true for
 * anything that compiles (a field or type the shim lacks is a compile error,
 * which names it).
 */
/*
 * BPF-target mode (clang -target bpf, which predefines __BPF__): libbpf's
 * own header, found after this directory in the include path.
 */
#if defined(__BPF__) && !defined(__SCHEDLAB_NATIVE__)
#include_next <bpf/bpf_core_read.h>
#else

#ifndef __SCHEDLAB_BPF_CORE_READ_H__
#define __SCHEDLAB_BPF_CORE_READ_H__

#include "bpf_helpers.h"

enum bpf_field_info_kind {
	BPF_FIELD_BYTE_OFFSET = 0,
	BPF_FIELD_BYTE_SIZE = 1,
	BPF_FIELD_EXISTS = 2,
	BPF_FIELD_SIGNED = 3,
	BPF_FIELD_LSHIFT_U64 = 4,
	BPF_FIELD_RSHIFT_U64 = 5,
};

enum bpf_type_id_kind {
	BPF_TYPE_ID_LOCAL = 0,
	BPF_TYPE_ID_TARGET = 1,
};

enum bpf_type_info_kind {
	BPF_TYPE_EXISTS = 0,
	BPF_TYPE_SIZE = 1,
	BPF_TYPE_MATCHES = 2,
};

enum bpf_enum_value_kind {
	BPF_ENUMVAL_EXISTS = 0,
	BPF_ENUMVAL_VALUE = 1,
};

/* One argument (an access expression) or two (a type and a member). */
#define ___core_field1(field) field
#define ___core_field2(type, field) (((type *)0)->field)
#define ___core_field(args...) ___bpf_apply(___core_field, ___bpf_narg(args))(args)
#define bpf_core_field_exists(field...) ((void)sizeof(___core_field(field)), 1)
#define bpf_core_field_size(field...) sizeof(___core_field(field))
#define bpf_core_field_offset(type, field) __builtin_offsetof(type, field)
#define bpf_core_type_exists(type) ((void)sizeof(type), 1)
#define bpf_core_type_matches(type) ((void)sizeof(type), 1)
#define bpf_core_type_size(type) sizeof(type)
/*
 * Natively there is no BTF: a type's "id" is its size, which is all
 * bpf_obj_new_impl() needs from it (shim/runtime_ds.c).
 */
#define bpf_core_type_id_local(type) ((__u64)sizeof(type))
#define bpf_core_type_id_kernel(type) ((__u64)sizeof(type))
#define bpf_core_enum_value_exists(enum_type, enum_value) ((void)(enum_value), 1)
#define bpf_core_enum_value(enum_type, enum_value) ((u64)(enum_value))
#define bpf_core_cast(ptr, type) ((type *)(ptr))

#define bpf_core_read(dst, sz, src)                                            \
	bpf_probe_read_kernel(dst, sz, (const void *)(src))
#define bpf_core_read_str(dst, sz, src)                                        \
	bpf_probe_read_kernel_str(dst, sz, (const void *)(src))
#define bpf_core_read_user(dst, sz, src) bpf_core_read(dst, sz, src)
#define bpf_core_read_user_str(dst, sz, src) bpf_core_read_str(dst, sz, src)

/* a->b->c... for BPF_CORE_READ(a, b, c, ...). */
#define ___core_arrow1(a) a
#define ___core_arrow2(a, b) a->b
#define ___core_arrow3(a, b, c) a->b->c
#define ___core_arrow4(a, b, c, d) a->b->c->d
#define ___core_arrow5(a, b, c, d, e) a->b->c->d->e
#define ___core_arrow6(a, b, c, d, e, f) a->b->c->d->e->f
#define ___core_arrow7(a, b, c, d, e, f, g) a->b->c->d->e->f->g
#define ___core_arrow8(a, b, c, d, e, f, g, h) a->b->c->d->e->f->g->h
#define ___core_arrow9(a, b, c, d, e, f, g, h, i) a->b->c->d->e->f->g->h->i
#define ___core_arrow10(a, b, c, d, e, f, g, h, i, j) a->b->c->d->e->f->g->h->i->j
#define ___core_arrow(...) ___bpf_apply(___core_arrow, ___bpf_narg(__VA_ARGS__))(__VA_ARGS__)

#define BPF_CORE_READ(src, a, ...) (___core_arrow((src), a, ##__VA_ARGS__))
#define BPF_CORE_READ_USER(src, a, ...) BPF_CORE_READ(src, a, ##__VA_ARGS__)
#define BPF_CORE_READ_BITFIELD(s, field) ((s)->field)
#define BPF_CORE_READ_BITFIELD_PROBED(s, field) ((s)->field)
#define BPF_CORE_WRITE_BITFIELD(s, field, new_val) ((s)->field = (new_val))
#define BPF_CORE_READ_INTO(dst, src, a, ...)                                   \
	({                                                                     \
		*(dst) = BPF_CORE_READ(src, a, ##__VA_ARGS__);                 \
		0;                                                             \
	})
#define BPF_CORE_READ_STR_INTO(dst, src, a, ...)                               \
	bpf_probe_read_kernel_str(dst, sizeof(*(dst)),                         \
				  BPF_CORE_READ(src, a, ##__VA_ARGS__))
#define BPF_PROBE_READ(src, a, ...) BPF_CORE_READ(src, a, ##__VA_ARGS__)
#define BPF_PROBE_READ_INTO(dst, src, a, ...) BPF_CORE_READ_INTO(dst, src, a, ##__VA_ARGS__)

#endif /* __SCHEDLAB_BPF_CORE_READ_H__ */

#endif /* __BPF__ */
