//! Interrupt-disabled windows: long irqsave sections and softirq storms
//! that hold off timer interrupts and IPIs on some CPUs
//! (`[machine.irqoff]` in a scenario).

use crate::engine::rng::{Dist, Rng, Stream};
use crate::engine::time::Ns;
use crate::engine::Cpu;
use crate::machine::cpumask::CpuMask;

/// Per-CPU interrupt-disabled windows (long irqsave sections, softirq
/// storms): interrupts that arrive inside one are delivered at its end.
#[derive(Clone, Debug)]
pub struct IrqOffModel {
    /// Gap between the end of one window and the start of the next, per CPU.
    pub every: Dist,
    /// Length of each window.
    pub length: Dist,
    /// The CPUs that have windows.
    pub cpus: CpuMask,
    /// Current or next window per CPU, as [start, end).
    windows: Vec<(Ns, Ns)>,
    rngs: Vec<Rng>,
    /// Interrupts deferred, per CPU.
    pub deferred: Vec<u64>,
}

impl IrqOffModel {
    /// Windows on `cpus`, drawn from one RNG stream per CPU derived from `seed`.
    pub fn new(every: Dist, length: Dist, cpus: CpuMask, seed: u64) -> Self {
        let n = cpus.nr_bits();
        IrqOffModel {
            every,
            length,
            cpus,
            windows: vec![(0, 0); n],
            rngs: (0..n).map(|c| Rng::new(seed, Stream::Machine(c as u32))).collect(),
            deferred: vec![0; n],
        }
    }

    /// If `cpu` has interrupts disabled at `t`, when they are enabled again.
    /// Calls must come in non-decreasing `t` per CPU (the event order).
    pub fn disabled_until(&mut self, cpu: Cpu, t: Ns) -> Option<Ns> {
        let c = cpu as usize;
        if !self.cpus.test(c) {
            return None;
        }
        while self.windows[c].1 <= t {
            let end = self.windows[c].1;
            let gap = self.every.draw(&mut self.rngs[c]).max(1);
            let len = self.length.draw(&mut self.rngs[c]);
            self.windows[c] = (end + gap, end + gap + len);
        }
        let (start, end) = self.windows[c];
        (start <= t).then(|| {
            self.deferred[c] += 1;
            end
        })
    }
}
