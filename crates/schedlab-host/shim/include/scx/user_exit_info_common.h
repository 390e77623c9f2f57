/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * struct user_exit_info: how a scheduler records why it exited, shared
 * with its user space (sched-ext/scx scheds/include/scx/user_exit_info_common.h).
 */
#ifndef __USER_EXIT_INFO_COMMON_H
#define __USER_EXIT_INFO_COMMON_H

enum uei_sizes {
	UEI_REASON_LEN = 128,
	UEI_MSG_LEN = 1024,
	UEI_DUMP_DFL_LEN = 32768,
};

struct user_exit_info {
	int kind;
	s64 exit_code;
	char reason[UEI_REASON_LEN];
	char msg[UEI_MSG_LEN];
};

#endif /* __USER_EXIT_INFO_COMMON_H */
