/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* errno values (include/uapi/asm-generic/errno.h), the ones BPF code uses. */
#ifndef _ASM_GENERIC_ERRNO_H
#define _ASM_GENERIC_ERRNO_H

#include "errno-base.h"

#define EDEADLK 35
#define ENAMETOOLONG 36
#define ENOSYS 38
#define ENOTEMPTY 39
#define ELOOP 40
#define ENODATA 61
#define ETIME 62
#define EOVERFLOW 75
#define EOPNOTSUPP 95
#define EADDRINUSE 98
#define ETIMEDOUT 110
#define EALREADY 114
#define EINPROGRESS 115
#define ECANCELED 125
/* Kernel-internal (include/linux/errno.h). */
#define ENOTSUPP 524

#endif
