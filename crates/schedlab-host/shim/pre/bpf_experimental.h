/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * schedlab: native build of scx's <bpf_experimental.h>.
 *
 * This directory is searched before the scheduler's own headers (scx_cargo's
 * bpf_h, an scx checkout's scheds/include). The header itself comes from
 * there unchanged (#include_next); what follows replaces only the macros
 * that emit BPF instructions as inline assembly, which have no meaning in a
 * native object, with what those instructions do:
 * - can_loop / cond_break: `may_goto` lets a loop go on until the
 *   verifier's iteration budget is spent; natively every loop may go on
 *   (BPF_MAX_LOOPS bounds the open-coded iterators, as before).
 * - bpf_cmp_likely / bpf_cmp_unlikely: a plain comparison.
 * - bpf_addr_space_cast: arena and kernel addresses are the same natively.
 */
#include <schedlab_native.h>
#include_next <bpf_experimental.h>
#include <schedlab_native_post.h>
