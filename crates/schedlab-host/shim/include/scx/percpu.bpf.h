/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * sched-ext/scx's <scx/percpu.bpf.h>: accessors for per-CPU kernel data
 * (LLC size and id, cpufreq, cpustat, PSI ...). The simulated kernel
 * exports none of it, so each accessor reports "not available" (NULL or
 * -ENOENT), the answer the real header gives on a kernel without the
 * symbol. Schedulers are written to cope with that.
 */
#ifndef BPF_PERCPU_H
#define BPF_PERCPU_H

#include "../vmlinux.h"
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <asm-generic/errno.h>

struct sugov_cpu;
struct psi_group_cpu;
struct kernel_stat;
struct kernel_cpustat;
struct cpufreq_policy;
struct sched_domain;
struct vm_event_state;

#define DEFINE_PER_CPU_PTR_FUNC(func_name, type, var_name)                     \
	static inline type *func_name(s32 cpu)                                 \
	{                                                                      \
		return NULL;                                                   \
	}
#define DEFINE_PER_CPU_PTR_PTR_FUNC(func_name, type, per_cpu_var_name)         \
	static inline type func_name(s32 cpu)                                  \
	{                                                                      \
		return NULL;                                                   \
	}
#define DEFINE_PER_CPU_VAL_FUNC(func_name, type, var_name)                     \
	static inline type func_name(s32 cpu)                                  \
	{                                                                      \
		return -ENOENT;                                                \
	}
#define DEFINE_THIS_CPU_VAL_FUNC(orig_func_name)                               \
	static inline __typeof__(orig_func_name(0)) this_##orig_func_name(void) \
	{                                                                      \
		return orig_func_name(bpf_get_smp_processor_id());             \
	}
#define DEFINE_THIS_CPU_PTR_FUNC(orig_func_name) DEFINE_THIS_CPU_VAL_FUNC(orig_func_name)

DEFINE_PER_CPU_VAL_FUNC(cpu_llc_size, int, sd_llc_size)
DEFINE_PER_CPU_VAL_FUNC(cpu_llc_id, int, sd_llc_id)
DEFINE_PER_CPU_VAL_FUNC(cpu_priority, int, sched_core_priority)
DEFINE_PER_CPU_PTR_PTR_FUNC(cpu_cpufreq_policy, struct cpufreq_policy *, cpufreq_cpu_data)
DEFINE_PER_CPU_PTR_PTR_FUNC(cpu_llc_dom, struct sched_domain *, sd_llc)
DEFINE_PER_CPU_PTR_FUNC(cpu_kernel_cpustat, struct kernel_cpustat, kernel_cpustat)
DEFINE_PER_CPU_PTR_FUNC(cpu_kernel_stat, struct kernel_stat, kernel_stat)
DEFINE_PER_CPU_PTR_FUNC(cpu_psi_group, struct psi_group_cpu, psi_group_cpu)
DEFINE_PER_CPU_PTR_FUNC(cpu_sugov, struct sugov_cpu, sugov_cpu)
DEFINE_PER_CPU_PTR_FUNC(cpu_vm_event_state, struct vm_event_state, vm_event_states)
DEFINE_THIS_CPU_VAL_FUNC(cpu_llc_id)
DEFINE_THIS_CPU_VAL_FUNC(cpu_llc_size)
DEFINE_THIS_CPU_VAL_FUNC(cpu_priority)
DEFINE_THIS_CPU_PTR_FUNC(cpu_cpufreq_policy)
DEFINE_THIS_CPU_PTR_FUNC(cpu_kernel_cpustat)
DEFINE_THIS_CPU_PTR_FUNC(cpu_kernel_stat)
DEFINE_THIS_CPU_PTR_FUNC(cpu_psi_group)
DEFINE_THIS_CPU_PTR_FUNC(cpu_llc_dom)
DEFINE_THIS_CPU_PTR_FUNC(cpu_sugov)
DEFINE_THIS_CPU_PTR_FUNC(cpu_vm_event_state)

#endif /* BPF_PERCPU_H */
