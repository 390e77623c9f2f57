//! The simulated machine's shape: NUMA nodes, packages, last-level caches
//! (LLCs), cores and SMT threads (the facts `arch/x86/kernel/smpboot.c` and
//! `drivers/base/arch_topology.c` give the kernel).
//!
//! Ids of every kind are global and dense (`0..nr_llcs()` etc.), not
//! relative to the parent, so they can index the `*_span` vectors directly.
//! Machines come from [`Topology::uniform`], [`Topology::preset`]
//! (presets.rs), [`Topology::flat`], or are imported from `lscpu -p`
//! output ([`Topology::from_lscpu`], lscpu.rs) or a copy of
//! `/sys/devices/system/cpu` ([`Topology::from_sysfs`], sysfs.rs). The
//! scheduler domains the kernel builds on top of a machine are
//! [`crate::sched::topology`]'s job.

mod lscpu;
mod presets;
mod sysfs;
#[cfg(test)]
mod tests;

pub use presets::presets;

use crate::machine::cpumask::CpuMask;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Distance of a node to itself in the SLIT-style distance table.
pub const LOCAL_DISTANCE: u32 = 10;
/// Default distance between two nodes of the same package (e.g. NPS2/SNC).
pub const REMOTE_DISTANCE: u32 = 20;
/// Default distance between nodes of different packages. It is above
/// [`RECLAIM_DISTANCE`] on purpose, so that a generated multi-socket machine
/// behaves like the big AMD servers (no wake-affine across sockets).
pub const CROSS_PACKAGE_DISTANCE: u32 = 32;
/// The kernel's `RECLAIM_DISTANCE` (`node_reclaim_distance`): NUMA domains
/// farther than this lose wake-affine and fork/exec balancing.
pub const RECLAIM_DISTANCE: u32 = 30;
/// Largest distance the kernel accepts (`DISTANCE_BITS` is 8).
pub const MAX_DISTANCE: u32 = 255;
/// Largest machine schedlab models.
pub const MAX_CPUS: usize = 8192;
/// Largest NUMA node id accepted when importing (the kernel's
/// `MAX_NUMNODES` with `NODES_SHIFT = 10`).
const MAX_NODE_ID: usize = 1024;

/// Where one CPU sits in the machine. All ids are global dense indices.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CpuInfo {
    /// CPU id; equal to the index in [`Topology::cpus`].
    pub cpu: usize,
    /// NUMA node.
    pub node: usize,
    /// Physical package (socket).
    pub package: usize,
    /// Last-level cache domain.
    pub llc: usize,
    /// Physical core.
    pub core: usize,
    /// SMT index within the core: 0 for the lowest-numbered sibling.
    pub thread: usize,
}

/// A machine description. Construct it through one of the constructors,
/// which guarantee the invariants checked by [`Topology::validate`]; call
/// `validate` again after editing fields by hand (e.g. to plug in a measured
/// `node_distance` table).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Topology {
    /// Human-readable machine name (the preset name for presets).
    pub name: String,
    /// One entry per CPU, indexed by CPU id; ids are dense `0..n`.
    pub cpus: Vec<CpuInfo>,
    /// CPUs of each NUMA node.
    pub node_span: Vec<CpuMask>,
    /// CPUs of each package.
    pub package_span: Vec<CpuMask>,
    /// CPUs sharing each last-level cache.
    pub llc_span: Vec<CpuMask>,
    /// SMT siblings of each core.
    pub core_span: Vec<CpuMask>,
    /// SLIT-like node distances: [`LOCAL_DISTANCE`] on the diagonal,
    /// symmetric, other entries in `11..=255`.
    pub node_distance: Vec<Vec<u32>>,
}

/// Why a machine description could not be built or imported.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TopologyError {
    /// [`Topology::preset`] was given a name it does not know.
    #[error("unknown machine preset \"{name}\"; known presets: {known}")]
    UnknownPreset {
        /// The name asked for.
        name: String,
        /// Comma-separated list of the known preset names.
        known: String,
    },
    /// Constructor arguments that describe no valid machine.
    #[error("invalid machine shape: {0}")]
    InvalidShape(String),
    /// Malformed `lscpu -p` input.
    #[error("lscpu input, line {line}: {message}")]
    Lscpu {
        /// 1-based line number.
        line: usize,
        /// What was wrong and what was expected.
        message: String,
    },
    /// A missing or malformed file in a sysfs copy.
    #[error("{path}: {message}", path = .path.display())]
    Sysfs {
        /// The file or directory at fault.
        path: PathBuf,
        /// What was wrong and what was expected.
        message: String,
    },
    /// A `Topology` whose fields contradict each other.
    #[error("inconsistent topology: {0}")]
    Inconsistent(String),
}

/// Dense per-CPU placement, before spans and SMT indices are derived.
#[derive(Clone, Copy, Debug)]
struct Placement {
    node: usize,
    package: usize,
    llc: usize,
    core: usize,
}

impl Topology {
    /// Builds a symmetric machine: `packages` sockets, each split into
    /// `nodes_per_package` NUMA nodes, each with `llcs_per_node` LLCs of
    /// `cores_per_llc` cores with `threads_per_core` SMT threads.
    ///
    /// CPUs are numbered the way x86 Linux enumerates them: first thread 0
    /// of every core (so CPU `c` is core `c`), then thread 1 of every core
    /// (CPU `nr_cores + c`), and so on; CPUs `i` and `i + nr_cores` are SMT
    /// siblings. Node distances are [`REMOTE_DISTANCE`] within a package and
    /// [`CROSS_PACKAGE_DISTANCE`] across packages.
    pub fn uniform(
        name: &str,
        packages: usize,
        nodes_per_package: usize,
        llcs_per_node: usize,
        cores_per_llc: usize,
        threads_per_core: usize,
    ) -> Result<Topology, TopologyError> {
        let dims = [
            ("packages", packages),
            ("nodes per package", nodes_per_package),
            ("LLCs per node", llcs_per_node),
            ("cores per LLC", cores_per_llc),
            ("threads per core", threads_per_core),
        ];
        if let Some((what, _)) = dims.iter().find(|(_, n)| *n == 0) {
            return Err(TopologyError::InvalidShape(format!(
                "{what} must be at least 1"
            )));
        }
        let nr_cpus = dims
            .iter()
            .try_fold(1usize, |acc, (_, n)| acc.checked_mul(*n))
            .filter(|&n| n <= MAX_CPUS)
            .ok_or_else(|| too_many_cpus("the requested shape"))?;
        let nr_cores = nr_cpus / threads_per_core;
        let placements: Vec<Placement> = (0..nr_cpus)
            .map(|cpu| {
                let core = cpu % nr_cores;
                let llc = core / cores_per_llc;
                let node = llc / llcs_per_node;
                Placement {
                    node,
                    package: node / nodes_per_package,
                    llc,
                    core,
                }
            })
            .collect();
        build(name, &placements)
    }

    /// A machine of `nr_cpus` CPUs in one node and one LLC, without SMT,
    /// named `flat-N` (what `--machine N` gives). `nr_cpus` must be in
    /// `1..=MAX_CPUS`.
    pub fn flat(nr_cpus: usize) -> Result<Topology, TopologyError> {
        if nr_cpus == 0 || nr_cpus > MAX_CPUS {
            return Err(TopologyError::InvalidShape(format!(
                "a flat machine needs 1 to {MAX_CPUS} CPUs, not {nr_cpus}"
            )));
        }
        Topology::uniform(&format!("flat-{nr_cpus}"), 1, 1, 1, nr_cpus, 1)
    }

    /// Imports the output of `lscpu -p`.
    ///
    /// The header comment (`# CPU,Core,Socket,Node,,L1d,L1i,L2,L3`) names
    /// the columns; CPU, Core and Socket are required, Node defaults to 0.
    /// The LLC is the highest-level cache column with a value on every line
    /// (L3, else L2, ...); without any, each socket is taken as one LLC. Raw
    /// ids are renumbered densely, keeping their order. CPU ids must run
    /// densely from 0 (lines may come in any order). `lscpu` has no node
    /// distances, so the defaults of [`Topology::uniform`] apply. The
    /// topology is named `lscpu`. Errors carry the 1-based line number.
    pub fn from_lscpu(text: &str) -> Result<Topology, TopologyError> {
        lscpu::parse(text)
    }

    /// Imports a copy of `/sys/devices/system/cpu`.
    ///
    /// Files read, for `root` = the copied `cpu` directory:
    /// - `root/online`: the online CPUs, which must be exactly `0..n`;
    /// - `root/cpuN/topology/physical_package_id`;
    /// - `root/cpuN/topology/core_cpus_list`, or the older
    ///   `thread_siblings_list`: the SMT siblings, which define the cores;
    /// - `root/cpuN/cache/indexK/{level,type,shared_cpu_list}`: the LLC is
    ///   the highest-level `Data` or `Unified` cache (without a `cache`
    ///   directory on any CPU, each package is taken as one LLC);
    /// - an entry `root/cpuN/nodeM` gives the NUMA node (node 0 if absent);
    /// - optionally, next to `root` as on a real system, `../node/online`
    ///   and `../node/nodeM/distance` give the node distances; without
    ///   `../node/online` the defaults of [`Topology::uniform`] apply.
    ///
    /// `core_id` is not needed: the sibling lists identify cores
    /// unambiguously, whereas `core_id` is only unique within a package and
    /// may be sparse. Packages and nodes keep the order of their raw ids;
    /// cores and LLCs are numbered in the order of their lowest CPU. The
    /// topology is named `sysfs`. Errors name the file at fault.
    pub fn from_sysfs(root: &Path) -> Result<Topology, TopologyError> {
        sysfs::parse(root)
    }

    /// Number of CPUs.
    pub fn nr_cpus(&self) -> usize {
        self.cpus.len()
    }

    /// Number of NUMA nodes.
    pub fn nr_nodes(&self) -> usize {
        self.node_span.len()
    }

    /// Number of packages (sockets).
    pub fn nr_packages(&self) -> usize {
        self.package_span.len()
    }

    /// Number of last-level caches.
    pub fn nr_llcs(&self) -> usize {
        self.llc_span.len()
    }

    /// Number of physical cores.
    pub fn nr_cores(&self) -> usize {
        self.core_span.len()
    }

    /// Placement of `cpu`, or `None` if the machine has no such CPU.
    pub fn cpu_info(&self, cpu: usize) -> Option<&CpuInfo> {
        self.cpus.get(cpu)
    }

    /// The SMT siblings of `cpu`, including `cpu` itself.
    ///
    /// # Panics
    /// If `cpu >= nr_cpus()`, like slice indexing.
    pub fn smt_siblings(&self, cpu: usize) -> &CpuMask {
        &self.core_span[self.cpus[cpu].core]
    }

    /// The LLC id of `cpu`.
    ///
    /// # Panics
    /// If `cpu >= nr_cpus()`, like slice indexing.
    pub fn llc_of(&self, cpu: usize) -> usize {
        self.cpus[cpu].llc
    }

    /// The NUMA node of `cpu`.
    ///
    /// # Panics
    /// If `cpu >= nr_cpus()`, like slice indexing.
    pub fn node_of(&self, cpu: usize) -> usize {
        self.cpus[cpu].node
    }

    /// Whether two CPUs share the last-level cache (the kernel's
    /// `cpus_share_cache()`); `false` if either CPU does not exist.
    pub fn cpus_share_cache(&self, a: usize, b: usize) -> bool {
        match (self.cpus.get(a), self.cpus.get(b)) {
            (Some(a), Some(b)) => a.llc == b.llc,
            _ => false,
        }
    }

    /// Number of CPUs sharing `cpu`'s LLC (the kernel's `sd_llc_size`);
    /// 0 if the CPU does not exist.
    pub fn llc_size(&self, cpu: usize) -> usize {
        self.cpus
            .get(cpu)
            .and_then(|info| self.llc_span.get(info.llc))
            .map_or(0, CpuMask::weight)
    }

    /// All CPUs of the machine.
    pub fn all_cpus(&self) -> CpuMask {
        CpuMask::full(self.nr_cpus())
    }

    /// The largest number of SMT threads of any core.
    pub fn max_smt(&self) -> usize {
        self.core_span
            .iter()
            .map(CpuMask::weight)
            .max()
            .unwrap_or(0)
    }

    /// One-line summary, e.g.
    /// `epyc-2s-192: 192 CPUs, 2 nodes, 2 packages, 12 LLCs, 96 cores, SMT2`.
    pub fn describe(&self) -> String {
        let smt = match self.max_smt() {
            0 | 1 => "no SMT".to_string(),
            n => format!("SMT{n}"),
        };
        format!(
            "{}: {}, {}, {}, {}, {}, {smt}",
            self.name,
            count(self.nr_cpus(), "CPU"),
            count(self.nr_nodes(), "node"),
            count(self.nr_packages(), "package"),
            count(self.nr_llcs(), "LLC"),
            count(self.nr_cores(), "core"),
        )
    }

    /// Checks the invariants the constructors guarantee: dense CPU ids in
    /// `1..=MAX_CPUS`, every id of every kind in range, spans that partition
    /// the machine and agree with `cpus`, SMT indices that rank siblings by
    /// CPU id, and a valid distance table.
    pub fn validate(&self) -> Result<(), TopologyError> {
        let n = self.nr_cpus();
        if n == 0 || n > MAX_CPUS {
            return Err(inconsistent(format!(
                "{n} CPUs; schedlab supports 1 to {MAX_CPUS}"
            )));
        }
        if let Some((i, info)) = self.cpus.iter().enumerate().find(|(i, c)| c.cpu != *i) {
            return Err(inconsistent(format!(
                "cpus[{i}] describes CPU {}; CPU ids must equal their index",
                info.cpu
            )));
        }
        check_spans(self, "node", &self.node_span, |c| c.node)?;
        check_spans(self, "package", &self.package_span, |c| c.package)?;
        check_spans(self, "LLC", &self.llc_span, |c| c.llc)?;
        check_spans(self, "core", &self.core_span, |c| c.core)?;
        check_threads(self)?;
        check_distances(&self.node_distance, self.nr_nodes()).map_err(|e| inconsistent(e.to_string()))
    }

}

/// Builds a topology from dense placements: spans, SMT indices and default
/// distances are derived, then everything is validated.
fn build(name: &str, placements: &[Placement]) -> Result<Topology, TopologyError> {
    let n = placements.len();
    if n == 0 {
        return Err(TopologyError::InvalidShape(
            "a machine needs at least one CPU".into(),
        ));
    }
    if n > MAX_CPUS {
        return Err(too_many_cpus(&format!("{n} CPUs")));
    }
    let node_span = spans(n, placements.iter().map(|p| p.node));
    let package_span = spans(n, placements.iter().map(|p| p.package));
    let llc_span = spans(n, placements.iter().map(|p| p.llc));
    let core_span = spans(n, placements.iter().map(|p| p.core));
    let mut next_thread = vec![0; core_span.len()];
    let cpus = placements
        .iter()
        .enumerate()
        .map(|(cpu, p)| {
            let thread = next_thread[p.core];
            next_thread[p.core] += 1;
            CpuInfo {
                cpu,
                node: p.node,
                package: p.package,
                llc: p.llc,
                core: p.core,
                thread,
            }
        })
        .collect();
    let node_distance = default_distances(&node_span, &package_span);
    let topology = Topology {
        name: name.to_string(),
        cpus,
        node_span,
        package_span,
        llc_span,
        core_span,
        node_distance,
    };
    topology.validate()?;
    Ok(topology)
}

/// One mask per id, `ids` giving the id of each CPU in order.
fn spans(nr_cpus: usize, ids: impl Iterator<Item = usize> + Clone) -> Vec<CpuMask> {
    let count = ids.clone().max().map_or(0, |m| m + 1);
    let mut spans = vec![CpuMask::new(nr_cpus); count];
    for (cpu, id) in ids.enumerate() {
        spans[id].set(cpu);
    }
    spans
}

/// [`LOCAL_DISTANCE`] on the diagonal, [`REMOTE_DISTANCE`] for nodes sharing
/// a package, [`CROSS_PACKAGE_DISTANCE`] otherwise.
fn default_distances(node_span: &[CpuMask], package_span: &[CpuMask]) -> Vec<Vec<u32>> {
    let packages_of: Vec<BTreeSet<usize>> = node_span
        .iter()
        .map(|node| {
            (0..package_span.len())
                .filter(|&p| package_span[p].intersects(node))
                .collect()
        })
        .collect();
    (0..node_span.len())
        .map(|a| {
            (0..node_span.len())
                .map(|b| {
                    if a == b {
                        LOCAL_DISTANCE
                    } else if packages_of[a]
                        .intersection(&packages_of[b])
                        .next()
                        .is_some()
                    {
                        REMOTE_DISTANCE
                    } else {
                        CROSS_PACKAGE_DISTANCE
                    }
                })
                .collect()
        })
        .collect()
}

fn check_spans(
    topo: &Topology,
    what: &str,
    spans: &[CpuMask],
    id_of: impl Fn(&CpuInfo) -> usize,
) -> Result<(), TopologyError> {
    let n = topo.nr_cpus();
    if let Some(k) = spans.iter().position(|s| s.nr_bits() != n || s.is_empty()) {
        return Err(inconsistent(format!(
            "{what} {k} has an empty span or one not sized for {n} CPUs"
        )));
    }
    for info in &topo.cpus {
        let id = id_of(info);
        if !spans.get(id).is_some_and(|s| s.test(info.cpu)) {
            return Err(inconsistent(format!(
                "CPU {} belongs to {what} {id}, whose span does not contain it",
                info.cpu
            )));
        }
    }
    // Each CPU is in its own span, so equal totals mean no span holds extras.
    let total: usize = spans.iter().map(CpuMask::weight).sum();
    if total != n {
        return Err(inconsistent(format!(
            "{what} spans hold {total} CPUs in total instead of {n}; they must partition the machine"
        )));
    }
    Ok(())
}

fn check_threads(topo: &Topology) -> Result<(), TopologyError> {
    for info in &topo.cpus {
        let rank = topo.core_span[info.core]
            .iter()
            .take_while(|&c| c < info.cpu)
            .count();
        if info.thread != rank {
            return Err(inconsistent(format!(
                "CPU {} has SMT index {} but is sibling number {rank} of core {}",
                info.cpu, info.thread, info.core
            )));
        }
    }
    Ok(())
}

/// A node distance table that ACPI SLIT validation would reject.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DistanceError {
    /// Not one row and one column per node.
    #[error("node_distance must be a {nodes}x{nodes} table")]
    NotSquare {
        /// The number of nodes.
        nodes: usize,
    },
    /// A node's distance to itself is not LOCAL_DISTANCE.
    #[error("distance from node {node} to itself is {distance}, expected {local}", local = LOCAL_DISTANCE)]
    SelfDistance {
        /// The node.
        node: usize,
        /// Its distance to itself.
        distance: u32,
    },
    /// A distance between two nodes outside LOCAL_DISTANCE+1 ..= MAX_DISTANCE.
    #[error("distance from node {from} to node {to} is {distance}, expected {min} to {max}", min = LOCAL_DISTANCE + 1, max = MAX_DISTANCE)]
    OutOfRange {
        /// The first node.
        from: usize,
        /// The second node.
        to: usize,
        /// The distance given.
        distance: u32,
    },
    /// A table that is not symmetric.
    #[error("distance from node {from} to node {to} is {distance} but the reverse is {reverse}; the table must be symmetric")]
    Asymmetric {
        /// The first node.
        from: usize,
        /// The second node.
        to: usize,
        /// The distance from `from` to `to`.
        distance: u32,
        /// The distance from `to` to `from`.
        reverse: u32,
    },
}

/// Checks a distance table the way ACPI SLIT validation does, plus the
/// symmetry the domain builder relies on.
fn check_distances(table: &[Vec<u32>], nr_nodes: usize) -> Result<(), DistanceError> {
    if table.len() != nr_nodes || table.iter().any(|row| row.len() != nr_nodes) {
        return Err(DistanceError::NotSquare { nodes: nr_nodes });
    }
    for (a, row) in table.iter().enumerate() {
        for (b, &d) in row.iter().enumerate() {
            if a == b && d != LOCAL_DISTANCE {
                return Err(DistanceError::SelfDistance { node: a, distance: d });
            }
            if a != b && !(LOCAL_DISTANCE + 1..=MAX_DISTANCE).contains(&d) {
                return Err(DistanceError::OutOfRange { from: a, to: b, distance: d });
            }
            if table[b][a] != d {
                return Err(DistanceError::Asymmetric { from: a, to: b, distance: d, reverse: table[b][a] });
            }
        }
    }
    Ok(())
}

fn inconsistent(message: String) -> TopologyError {
    TopologyError::Inconsistent(message)
}

fn too_many_cpus(what: &str) -> TopologyError {
    TopologyError::InvalidShape(format!("{what} exceeds the maximum of {MAX_CPUS} CPUs"))
}

fn count(n: usize, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

/// Maps each key to its rank among the distinct keys, so that raw ids from
/// the host (sparse, per-package, or arbitrary) become dense global ids
/// while keeping their relative order.
fn dense_ids<K: Ord + Clone>(keys: &[K]) -> Vec<usize> {
    let ranks: BTreeMap<K, usize> = keys
        .iter()
        .cloned()
        .collect::<BTreeSet<K>>()
        .into_iter()
        .enumerate()
        .map(|(rank, key)| (key, rank))
        .collect();
    keys.iter().map(|k| ranks[k]).collect()
}

