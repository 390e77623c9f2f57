/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * The kernel tree's spelling: <scx/user_exit_info.h> serves both the BPF
 * side (__bpf__, always defined by the shim's vmlinux.h) and user space.
 */
#ifndef __USER_EXIT_INFO_H
#define __USER_EXIT_INFO_H

#ifdef __bpf__
#include "user_exit_info.bpf.h"
#else
#include "user_exit_info_common.h"
#endif

#endif /* __USER_EXIT_INFO_H */
