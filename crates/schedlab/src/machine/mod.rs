//! The machine layer: the hardware the simulated kernel runs on.
//!
//! - [`cpumask`]: fixed-size CPU bitmaps and the cpulist text format
//!   (`include/linux/cpumask.h`);
//! - [`topology`]: the machine model (NUMA nodes, packages, LLCs, cores,
//!   SMT threads and node distances), its presets and the `lscpu -p` and
//!   sysfs importers;
//! - [`irqoff`]: interrupt-disabled windows (irqsave sections, softirq
//!   storms) that delay timer interrupts and IPIs;
//! - [`cost`]: what scheduling work costs in time on that machine
//!   (context switch, IPI, idle exit, cache refill...).
//!
//! The scheduler-domain hierarchy the kernel derives from a machine is not
//! here but in [`crate::sched::topology`], as in kernel/sched/topology.c.
//!
//! May import: [`crate::engine`] (time, RNG). Nothing here knows about
//! tasks or scheduling.

pub mod cost;
pub mod cpumask;
pub mod irqoff;
pub mod topology;
