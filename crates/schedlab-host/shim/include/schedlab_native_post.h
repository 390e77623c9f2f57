/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * schedlab: native meanings of the BPF-assembly loop macros, which scx's
 * headers define unconditionally. Included after them (no include guard:
 * each such header is followed by it).
 */
#undef can_loop
#define can_loop 1
#undef __cond_break
#define __cond_break(expr) ((void)0)
#undef cond_break
#define cond_break __cond_break(break)
#undef cond_break_label
#define cond_break_label(label) __cond_break(goto label)
