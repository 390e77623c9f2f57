/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * UEI_DEFINE / UEI_RECORD: record the scx_exit_info ops.exit() receives.
 */
#ifndef __USER_EXIT_INFO_BPF_H
#define __USER_EXIT_INFO_BPF_H

#include "../vmlinux.h"
#include <bpf/bpf_core_read.h>
#include "user_exit_info_common.h"

extern bool CONFIG_BPF_EVENTS __kconfig __weak;

/*
 * The dump buffer has its default size natively (no BTF resizing); the
 * length is rodata a loader may lower.
 */
#define UEI_DEFINE(__name)                                                     \
	char __name##_dump[UEI_DUMP_DFL_LEN] SEC(".data." #__name "_dump");    \
	const volatile u32 __name##_dump_len = UEI_DUMP_DFL_LEN;               \
	struct user_exit_info __name SEC(".data")

#define UEI_RECORD(__uei_name, __ei)                                           \
	({                                                                     \
		u32 ___len = __uei_name##_dump_len;                            \
		if (___len > sizeof(__uei_name##_dump))                        \
			___len = sizeof(__uei_name##_dump);                    \
		bpf_probe_read_kernel_str(__uei_name.reason,                   \
					  sizeof(__uei_name.reason), (__ei)->reason); \
		bpf_probe_read_kernel_str(__uei_name.msg,                      \
					  sizeof(__uei_name.msg), (__ei)->msg); \
		bpf_probe_read_kernel_str(__uei_name##_dump, ___len,           \
					  (__ei)->dump);                       \
		__uei_name.exit_code = (__ei)->exit_code;                      \
		/* __sync for the memory barrier, as the original */           \
		__sync_val_compare_and_swap(&__uei_name.kind, __uei_name.kind, \
					    (__ei)->kind);                     \
	})

#endif /* __USER_EXIT_INFO_BPF_H */
