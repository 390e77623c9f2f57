/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* See enums.bpf.h: the enum values come from the shim's vmlinux.h. */
#include "enums.bpf.h"
