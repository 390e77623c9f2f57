//! The built-in machines: `--machine NAME` and `machine.preset` in a scenario.

use super::{Topology, TopologyError};

static PRESETS: &[(&str, &str)] = &[
    ("1cpu", "1 CPU, no SMT"),
    ("2cpu", "2 CPUs in one LLC, no SMT"),
    ("4cpu", "4 CPUs in one LLC, no SMT"),
    ("guest-16", "16-vCPU KVM guest: one node, one LLC, no SMT"),
    (
        "amd-16c",
        "Ryzen 9 7950X-like desktop: 16 cores / 32 threads, 2 CCDs with one L3 each",
    ),
    (
        "ryzen-3900x",
        "Ryzen 9 3900X: 12 cores / 24 threads, 4 CCXs of 3 cores with 16MB L3 each",
    ),
    (
        "epyc-2s-192",
        "dual-socket EPYC, NPS1: 2 x 48 cores x SMT2 = 192 CPUs, 6 CCXs of 8 cores per socket",
    ),
    (
        "epyc-2s-384",
        "dual-socket EPYC 9654 (Genoa), NPS1: 2 x 96 cores x SMT2 = 384 CPUs, 12 CCXs of 8 cores (32MB L3) per socket",
    ),
];

/// Shape of a preset as the `uniform` arguments (packages, nodes per
/// package, LLCs per node, cores per LLC, threads per core).
fn preset_shape(name: &str) -> Option<[usize; 5]> {
    Some(match name {
        "1cpu" => [1, 1, 1, 1, 1],
        "2cpu" => [1, 1, 1, 2, 1],
        "4cpu" => [1, 1, 1, 4, 1],
        "guest-16" => [1, 1, 1, 16, 1],
        "amd-16c" => [1, 1, 2, 8, 2],
        "ryzen-3900x" => [1, 1, 4, 3, 2],
        "epyc-2s-192" => [2, 1, 6, 8, 2],
        "epyc-2s-384" => [2, 1, 12, 8, 2],
        _ => return None,
    })
}

/// The built-in machine presets as (name, one-line description).
pub fn presets() -> &'static [(&'static str, &'static str)] {
    PRESETS
}

impl Topology {
    /// One of the built-in machines listed by [`presets`].
    pub fn preset(name: &str) -> Result<Topology, TopologyError> {
        let Some([p, n, l, c, t]) = preset_shape(name) else {
            let known: Vec<&str> = PRESETS.iter().map(|(n, _)| *n).collect();
            return Err(TopologyError::UnknownPreset {
                name: name.to_string(),
                known: known.join(", "),
            });
        };
        Topology::uniform(name, p, n, l, c, t)
    }
}
