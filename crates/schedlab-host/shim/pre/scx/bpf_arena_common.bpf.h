/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * schedlab: the same wrapper as ../bpf_arena_common.bpf.h for sources that
 * include the header as <scx/bpf_arena_common.bpf.h> (the kernel's
 * tools/sched_ext, e.g. scx_sdt). Without it, its can_loop emits BPF's
 * may_goto instruction as raw bytes (.byte 0xe5 ...) into native code,
 * which the CPU executes as garbage.
 */
#include <schedlab_native.h>
#include_next <scx/bpf_arena_common.bpf.h>
#include <schedlab_native_post.h>
