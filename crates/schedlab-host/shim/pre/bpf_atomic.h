/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * schedlab: native build of scx's <bpf_atomic.h>: the header unchanged
 * (#include_next), then native meanings for the BPF-assembly loop macros.
 * It includes "bpf_experimental.h" / "bpf_arena_common.bpf.h" by quotes,
 * which finds them beside it and so past this directory's wrappers of
 * those headers (see bpf_experimental.h here).
 */
#include <schedlab_native.h>
#include_next <bpf_atomic.h>
#include <schedlab_native_post.h>
