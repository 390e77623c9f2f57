/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * In sched-ext/scx the SCX_* enum values are read from the running kernel's
 * BTF at load time. The shim's vmlinux.h already has the simulated kernel's
 * values, so there is nothing to fill in.
 */
#ifndef __SCX_ENUMS_BPF_H
#define __SCX_ENUMS_BPF_H

#define SCX_ENUM_INIT(skel) do {} while (0)

#endif /* __SCX_ENUMS_BPF_H */
