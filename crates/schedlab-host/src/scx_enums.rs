//! The loader's enum fill-in for schedulers built with scx's own headers.
//!
//! scx's `enums.autogen.bpf.h` (and the kernel's `tools/sched_ext` copy)
//! declares every `SCX_*` constant a scheduler may use as a load-time
//! variable, `const volatile u64 __SCX_NAME`, with `#define SCX_NAME
//! __SCX_NAME`: the values are not compiled in. User space fills them in
//! before load from the running kernel's BTF (scx_utils' enum init,
//! `SCX_ENUM_INIT()` in the kernel's examples); a name the kernel does not
//! have stays 0, as `__COMPAT_ENUM_OR_ZERO` gives. Natively there is no BTF,
//! so the host writes the values of the kernel it models (7.1, as the shim's
//! `vmlinux.h` spells them). Left at 0, `SCX_DSQ_LOCAL` would name user DSQ 0.

/// `SCX_*` enumerators and their values in the modelled kernel (7.1
/// `include/linux/sched/ext.h`, `kernel/sched/ext_internal.h`). Names a
/// scheduler declares that are not here stay 0, as on a kernel without them.
const VALUES: &[(&str, u64)] = &[
    ("SCX_OPS_NAME_LEN", 128),
    ("SCX_SLICE_DFL", 20_000_000),
    ("SCX_SLICE_INF", u64::MAX),
    ("SCX_DSQ_FLAG_BUILTIN", 1 << 63),
    ("SCX_DSQ_FLAG_LOCAL_ON", 1 << 62),
    ("SCX_DSQ_INVALID", 1 << 63),
    ("SCX_DSQ_GLOBAL", (1 << 63) | 1),
    ("SCX_DSQ_LOCAL", (1 << 63) | 2),
    ("SCX_DSQ_LOCAL_ON", (1 << 63) | (1 << 62)),
    ("SCX_DSQ_LOCAL_CPU_MASK", 0xffff_ffff),
    ("SCX_ENQ_WAKEUP", 1),
    ("SCX_ENQ_HEAD", 1 << 16),
    ("SCX_ENQ_PREEMPT", 1 << 32),
    ("SCX_ENQ_IMMED", 1 << 33),
    ("SCX_ENQ_REENQ", 1 << 40),
    ("SCX_ENQ_LAST", 1 << 41),
    ("SCX_ENQ_CLEAR_OPSS", 1 << 56),
    ("SCX_ENQ_DSQ_PRIQ", 1 << 57),
    ("SCX_DEQ_SCHED_CHANGE", 1 << 33),
    ("SCX_KICK_IDLE", 1),
    ("SCX_KICK_PREEMPT", 1 << 1),
    ("SCX_KICK_WAIT", 1 << 2),
    ("SCX_TASK_QUEUED", 1),
    ("SCX_TASK_RESET_RUNNABLE_AT", 1 << 2),
    ("SCX_TASK_DEQD_FOR_SLEEP", 1 << 3),
    ("SCX_TASK_IMMED", 1 << 5),
    ("SCX_TASK_STATE_SHIFT", 8),
    ("SCX_TASK_STATE_BITS", 2),
    ("SCX_TASK_STATE_MASK", 3 << 8),
    ("SCX_TASK_CURSOR", 1 << 31),
];

/// The value the loader writes into rodata `name`, if it is one of scx's
/// enum variables (`__SCX_NAME`) naming an enumerator the kernel has.
pub(super) fn value_of(rodata: &str) -> Option<u64> {
    let name = rodata.strip_prefix("__")?;
    VALUES.iter().find(|(n, _)| *n == name).map(|(_, v)| *v)
}

#[cfg(test)]
mod tests {
    use super::value_of;

    #[test]
    fn enum_variables_get_the_kernels_values() {
        assert_eq!(value_of("__SCX_DSQ_LOCAL"), Some(0x8000_0000_0000_0002));
        assert_eq!(value_of("__SCX_DSQ_LOCAL_ON"), Some(0xc000_0000_0000_0000));
        assert_eq!(value_of("__SCX_SLICE_DFL"), Some(20_000_000));
        // Not an enum variable, or a name the modelled kernel lacks.
        assert_eq!(value_of("SCX_DSQ_LOCAL"), None);
        assert_eq!(value_of("__SCX_ENQ_PREEMPT_LAZY"), None);
        assert_eq!(value_of("slice_ns"), None);
    }
}
