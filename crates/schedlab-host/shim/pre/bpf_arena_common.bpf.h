/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * schedlab: native build of scx's <bpf_arena_common.bpf.h>: the header
 * unchanged (#include_next), then native meanings for its BPF-assembly
 * macros (see bpf_experimental.h in this directory).
 */
#include <schedlab_native.h>
#include_next <bpf_arena_common.bpf.h>
#include <schedlab_native_post.h>
