//! The simulated machine: NUMA nodes, packages, last-level caches (LLCs),
//! cores and SMT threads, and the scheduler-domain hierarchy the kernel
//! would build on top of them.
//!
//! Ids of every kind are global and dense (`0..nr_llcs()` etc.), not
//! relative to the parent, so they can index the `*_span` vectors directly.
//! Machines come from [`Topology::uniform`], [`Topology::preset`],
//! [`Topology::flat`], or are imported from `lscpu -p` output
//! ([`Topology::from_lscpu`]) or a copy of `/sys/devices/system/cpu`
//! ([`Topology::from_sysfs`]).

use crate::cpumask::CpuMask;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
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

/// The scheduler-domain levels of the kernel's default topology, lowest
/// first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum DomainLevel {
    /// SMT siblings of one core.
    Smt,
    /// CPUs sharing the last-level cache.
    Mc,
    /// The kernel's PKG level, whose span is `cpu_cpu_mask()`: the CPUs of
    /// the NUMA node (equal to the package unless a package holds several
    /// nodes).
    Pkg,
    /// Nodes within one distance step; there can be several NUMA levels.
    Numa,
}

impl DomainLevel {
    /// The name the kernel prints for this level (`SMT`, `MC`, `PKG`, `NUMA`).
    pub fn name(self) -> &'static str {
        match self {
            DomainLevel::Smt => "SMT",
            DomainLevel::Mc => "MC",
            DomainLevel::Pkg => "PKG",
            DomainLevel::Numa => "NUMA",
        }
    }
}

impl fmt::Display for DomainLevel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The `SD_*` flags the simulator cares about.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct DomainFlags {
    /// `SD_SHARE_CPUCAPACITY`: members share one core's execution units.
    pub share_cpucapacity: bool,
    /// `SD_SHARE_LLC`: members share the last-level cache.
    pub share_llc: bool,
    /// `SD_NUMA`: the domain crosses NUMA nodes.
    pub numa: bool,
    /// `SD_WAKE_AFFINE`: wakeups may pull the wakee toward the waker.
    pub wake_affine: bool,
    /// `SD_BALANCE_FORK`: balance new tasks at fork.
    pub balance_fork: bool,
    /// `SD_BALANCE_EXEC`: balance at exec.
    pub balance_exec: bool,
    /// `SD_BALANCE_NEWIDLE`: balance when a CPU is about to go idle.
    pub balance_newidle: bool,
    /// `SD_PREFER_SIBLING`: spread tasks to sibling groups first.
    pub prefer_sibling: bool,
    /// `SD_SERIALIZE`: only one CPU balances this domain at a time.
    pub serialize: bool,
}

/// One level of a CPU's scheduler-domain hierarchy, with the tunables the
/// kernel's `sd_init()` assigns.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SchedDomain {
    /// Which topology level this domain comes from.
    pub level: DomainLevel,
    /// CPUs covered by the domain.
    pub span: CpuMask,
    /// The balancing groups: spans of the child level covering `span`
    /// (single CPUs for the lowest level). The group containing the owning
    /// CPU comes first, the rest follow in `for_each_cpu_wrap` order from
    /// that CPU, exactly as `build_sched_groups()` links them.
    pub groups: Vec<CpuMask>,
    /// Behaviour flags.
    pub flags: DomainFlags,
    /// Imbalance threshold in percent (110 SMT, 117 elsewhere).
    pub imbalance_pct: u32,
    /// Minimum balance interval: the span weight, in milliseconds.
    pub min_interval_ms: u64,
    /// Maximum balance interval: twice the span weight, in milliseconds.
    pub max_interval_ms: u64,
    /// Interval multiplier while the CPU is busy.
    pub busy_factor: u32,
    /// Balance attempts before cache-hot tasks may be migrated.
    pub cache_nice_tries: u32,
}

/// One candidate level of the hierarchy, before degenerate levels are
/// dropped. `distance` is meaningful for NUMA levels only.
#[derive(Clone, Copy, Debug)]
struct LevelSpec {
    level: DomainLevel,
    distance: u32,
}

/// Dense per-CPU placement, before spans and SMT indices are derived.
#[derive(Clone, Copy, Debug)]
struct Placement {
    node: usize,
    package: usize,
    llc: usize,
    core: usize,
}

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
        _ => return None,
    })
}

/// The built-in machine presets as (name, one-line description).
pub fn presets() -> &'static [(&'static str, &'static str)] {
    PRESETS
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
        check_distances(&self.node_distance, self.nr_nodes()).map_err(inconsistent)
    }

    /// The scheduler domains of `cpu`, lowest level first, as the kernel's
    /// `build_sched_domains()` would attach them.
    ///
    /// Candidate levels are SMT (core), MC (LLC), PKG (node, the kernel's
    /// `cpu_cpu_mask()`) and one NUMA level per distinct remote distance in
    /// the table (spanning the nodes at most that far away). As in the
    /// kernel, a level that does not contain its child is widened to do so,
    /// a single-CPU level is dropped, and a level whose span equals the
    /// level kept below it is dropped (handing down `prefer_sibling`).
    /// Tunables follow `sd_init()`. Returns an empty list for a CPU the
    /// machine does not have, and for a 1-CPU machine.
    pub fn sched_domains(&self, cpu: usize) -> Vec<SchedDomain> {
        if cpu >= self.nr_cpus() {
            return Vec::new();
        }
        let specs = self.level_specs();
        let mut domains: Vec<SchedDomain> = Vec::new();
        let mut span = CpuMask::single(self.nr_cpus(), cpu);
        for (k, spec) in specs.iter().enumerate() {
            span = self.widen(&span, *spec, cpu);
            if span.weight() <= 1 {
                continue;
            }
            if let Some(kept) = domains.last_mut().filter(|d| d.span == span) {
                // The kernel folds the degenerate parent into its child.
                kept.flags.prefer_sibling |= prefers_sibling(spec.level);
                continue;
            }
            let groups = self.groups(cpu, &span, &specs[..k]);
            domains.push(initial_domain(*spec, &span, groups));
        }
        domains
    }

    /// All candidate levels in hierarchy order; NUMA levels use the distinct
    /// remote distances of the whole table, as `sched_init_numa()` does, so
    /// level `k` means the same thing on every CPU.
    fn level_specs(&self) -> Vec<LevelSpec> {
        let spec = |level| LevelSpec { level, distance: 0 };
        let mut specs = vec![
            spec(DomainLevel::Smt),
            spec(DomainLevel::Mc),
            spec(DomainLevel::Pkg),
        ];
        let distances: BTreeSet<u32> = self
            .node_distance
            .iter()
            .flatten()
            .copied()
            .filter(|&d| d > LOCAL_DISTANCE)
            .collect();
        specs.extend(distances.into_iter().map(|distance| LevelSpec {
            level: DomainLevel::Numa,
            distance,
        }));
        specs
    }

    /// The span of level `spec` for `cpu`, widened to contain `child` (the
    /// kernel's "arch topology borken" fixup). Indices are looked up with
    /// `get` so that a hand-edited, invalid topology cannot cause a panic.
    fn widen(&self, child: &CpuMask, spec: LevelSpec, cpu: usize) -> CpuMask {
        let mut span = self.raw_span(spec, cpu).unwrap_or_else(|| child.clone());
        if !child.is_subset_of(&span) {
            span.or_assign(child);
        }
        span
    }

    fn raw_span(&self, spec: LevelSpec, cpu: usize) -> Option<CpuMask> {
        let info = self.cpus.get(cpu)?;
        match spec.level {
            DomainLevel::Smt => self.core_span.get(info.core).cloned(),
            DomainLevel::Mc => self.llc_span.get(info.llc).cloned(),
            DomainLevel::Pkg => self.node_span.get(info.node).cloned(),
            DomainLevel::Numa => {
                let row = self.node_distance.get(info.node)?;
                let mut span = CpuMask::new(self.nr_cpus());
                for (node, _) in row.iter().enumerate().filter(|(_, d)| **d <= spec.distance) {
                    span.or_assign(self.node_span.get(node)?);
                }
                Some(span)
            }
        }
    }

    /// The span that the level just below `specs` has on `cpu`, i.e. the
    /// child domain span that `get_group()` uses for a group.
    fn child_span(&self, cpu: usize, specs: &[LevelSpec]) -> CpuMask {
        specs
            .iter()
            .fold(CpuMask::single(self.nr_cpus(), cpu), |span, spec| {
                self.widen(&span, *spec, cpu)
            })
    }

    /// Balancing groups of the domain `span` whose candidate levels below are
    /// `lower`, in the kernel's order: walk the span with
    /// `for_each_cpu_wrap` from `cpu` and add each not yet covered CPU's
    /// child span.
    fn groups(&self, cpu: usize, span: &CpuMask, lower: &[LevelSpec]) -> Vec<CpuMask> {
        let mut covered = CpuMask::new(self.nr_cpus());
        let mut groups = Vec::new();
        for member in span.iter_wrap(cpu) {
            if covered.test(member) {
                continue;
            }
            let group = self.child_span(member, lower);
            covered.or_assign(&group);
            groups.push(group);
        }
        groups
    }
}

/// Whether `sd_init()` leaves `SD_PREFER_SIBLING` set on this level.
fn prefers_sibling(level: DomainLevel) -> bool {
    level != DomainLevel::Numa
}

/// A domain with `sd_init()`'s defaults for its level.
fn initial_domain(spec: LevelSpec, span: &CpuMask, groups: Vec<CpuMask>) -> SchedDomain {
    let weight = span.weight();
    let mut domain = SchedDomain {
        level: spec.level,
        span: span.clone(),
        groups,
        flags: DomainFlags {
            wake_affine: true,
            balance_fork: true,
            balance_exec: true,
            balance_newidle: true,
            prefer_sibling: prefers_sibling(spec.level),
            ..DomainFlags::default()
        },
        imbalance_pct: 117,
        min_interval_ms: weight as u64,
        max_interval_ms: 2 * weight as u64,
        busy_factor: 16,
        cache_nice_tries: 0,
    };
    match spec.level {
        DomainLevel::Smt => {
            domain.flags.share_cpucapacity = true;
            domain.flags.share_llc = true;
            domain.imbalance_pct = 110;
        }
        DomainLevel::Mc => {
            domain.flags.share_llc = true;
            domain.cache_nice_tries = 1;
        }
        DomainLevel::Pkg => domain.cache_nice_tries = 1,
        DomainLevel::Numa => {
            domain.flags.numa = true;
            domain.flags.serialize = true;
            domain.cache_nice_tries = 2;
            if spec.distance > RECLAIM_DISTANCE {
                // Too far for the waker's cache or memory to help the wakee.
                domain.flags.wake_affine = false;
                domain.flags.balance_fork = false;
                domain.flags.balance_exec = false;
            }
        }
    }
    domain
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

/// Checks a distance table the way ACPI SLIT validation does, plus the
/// symmetry the domain builder relies on.
fn check_distances(table: &[Vec<u32>], nr_nodes: usize) -> Result<(), String> {
    if table.len() != nr_nodes || table.iter().any(|row| row.len() != nr_nodes) {
        return Err(format!(
            "node_distance must be a {nr_nodes}x{nr_nodes} table"
        ));
    }
    for (a, row) in table.iter().enumerate() {
        for (b, &d) in row.iter().enumerate() {
            if a == b && d != LOCAL_DISTANCE {
                return Err(format!(
                    "distance from node {a} to itself is {d}, expected {LOCAL_DISTANCE}"
                ));
            }
            if a != b && !(LOCAL_DISTANCE + 1..=MAX_DISTANCE).contains(&d) {
                return Err(format!(
                    "distance from node {a} to node {b} is {d}, expected {} to {MAX_DISTANCE}",
                    LOCAL_DISTANCE + 1
                ));
            }
            if table[b][a] != d {
                return Err(format!(
                    "distance from node {a} to node {b} is {d} but the reverse is {}; the table must be symmetric",
                    table[b][a]
                ));
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

/// Import of `lscpu -p` output; see [`Topology::from_lscpu`].
mod lscpu {
    use super::{build, dense_ids, Placement, Topology, TopologyError, MAX_CPUS};
    use std::collections::BTreeMap;

    struct Columns {
        count: usize,
        cpu: usize,
        core: usize,
        socket: usize,
        node: Option<usize>,
        /// Cache column indices, most preferred LLC candidate first.
        caches: Vec<usize>,
    }

    struct Row {
        line: usize,
        core: u64,
        socket: u64,
        node: u64,
        caches: Vec<Option<u64>>,
    }

    fn error(line: usize, message: impl Into<String>) -> TopologyError {
        TopologyError::Lscpu {
            line,
            message: message.into(),
        }
    }

    pub(super) fn parse(text: &str) -> Result<Topology, TopologyError> {
        let mut columns: Option<Columns> = None;
        let mut rows: BTreeMap<u64, Row> = BTreeMap::new();
        let mut last_line = 0;
        for (idx, raw) in text.lines().enumerate() {
            let line = idx + 1;
            last_line = line;
            let trimmed = raw.trim();
            if trimmed.is_empty() {
                continue;
            }
            if let Some(comment) = trimmed.strip_prefix('#') {
                if is_header(comment) {
                    columns = Some(parse_header(comment, line)?);
                }
                continue;
            }
            let cols = columns.as_ref().ok_or_else(|| {
                error(
                    line,
                    "expected the column header comment (\"# CPU,Core,Socket,Node,,L1d,L1i,L2,L3\") before the first data line",
                )
            })?;
            let (cpu, row) = parse_row(trimmed, cols, line)?;
            if let Some(first) = rows.get(&cpu) {
                return Err(error(
                    line,
                    format!("CPU {cpu} is listed twice (first on line {})", first.line),
                ));
            }
            rows.insert(cpu, row);
        }
        if rows.is_empty() {
            return Err(error(
                last_line.max(1),
                "expected at least one CPU line such as \"0,0,0,0,,0,0,0,0\", found none",
            ));
        }
        let rows = dense_rows(rows)?;
        build("lscpu", &placements(&rows))
    }

    /// Whether a comment is the column header, whose first column is `CPU`.
    fn is_header(comment: &str) -> bool {
        comment
            .split(',')
            .next()
            .is_some_and(|first| first.trim().eq_ignore_ascii_case("cpu"))
    }

    fn parse_header(comment: &str, line: usize) -> Result<Columns, TopologyError> {
        let names: Vec<String> = comment
            .split(',')
            .map(|n| n.trim().to_ascii_lowercase())
            .collect();
        let find = |name: &str| names.iter().position(|n| n == name);
        let require = |name: &str| {
            find(&name.to_ascii_lowercase()).ok_or_else(|| {
                error(
                    line,
                    format!("the header has no {name} column; expected e.g. \"# CPU,Core,Socket,Node,,L1d,L1i,L2,L3\""),
                )
            })
        };
        let mut caches: Vec<(u32, bool, usize)> = names
            .iter()
            .enumerate()
            .filter_map(|(i, n)| cache_rank(n).map(|(level, data)| (level, data, i)))
            .collect();
        // Highest level first; at equal level a data/unified cache beats an
        // instruction cache.
        caches.sort_by_key(|&(level, data, _)| std::cmp::Reverse((level, data)));
        Ok(Columns {
            count: names.len(),
            cpu: require("CPU")?,
            core: require("Core")?,
            socket: require("Socket")?,
            node: find("node"),
            caches: caches.into_iter().map(|(_, _, i)| i).collect(),
        })
    }

    /// Parses a cache column name such as `l3`, `l1d` or `l1i` into (level,
    /// holds data).
    fn cache_rank(name: &str) -> Option<(u32, bool)> {
        let rest = name.strip_prefix('l')?;
        let digits_end = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        let level = rest[..digits_end].parse().ok()?;
        match &rest[digits_end..] {
            "" | "d" | "u" => Some((level, true)),
            "i" => Some((level, false)),
            _ => None,
        }
    }

    fn parse_row(text: &str, cols: &Columns, line: usize) -> Result<(u64, Row), TopologyError> {
        let fields: Vec<&str> = text.split(',').map(str::trim).collect();
        if fields.len() < cols.count {
            return Err(error(
                line,
                format!(
                    "expected {} comma-separated fields as in the header, found {}",
                    cols.count,
                    fields.len()
                ),
            ));
        }
        let number = |idx: usize, name: &str| -> Result<u64, TopologyError> {
            fields[idx].parse().map_err(|_| {
                error(
                    line,
                    format!(
                        "expected a number in the {name} column, found \"{}\"",
                        fields[idx]
                    ),
                )
            })
        };
        let cpu = number(cols.cpu, "CPU")?;
        let node = match cols.node {
            Some(idx) if !fields[idx].is_empty() => number(idx, "Node")?,
            _ => 0,
        };
        let caches = cols
            .caches
            .iter()
            .map(|&idx| match fields[idx] {
                "" => Ok(None),
                _ => number(idx, "cache").map(Some),
            })
            .collect::<Result<_, _>>()?;
        let row = Row {
            line,
            core: number(cols.core, "Core")?,
            socket: number(cols.socket, "Socket")?,
            node,
            caches,
        };
        Ok((cpu, row))
    }

    /// Checks that CPU ids are exactly `0..n` and returns the rows in CPU
    /// order.
    fn dense_rows(rows: BTreeMap<u64, Row>) -> Result<Vec<Row>, TopologyError> {
        let mut out = Vec::with_capacity(rows.len());
        for (expected, (cpu, row)) in rows.into_iter().enumerate() {
            if cpu != expected as u64 {
                return Err(error(
                    row.line,
                    format!("found CPU {cpu} but CPU {expected} is missing; CPU ids must run densely from 0"),
                ));
            }
            if expected >= MAX_CPUS {
                return Err(error(
                    row.line,
                    format!("CPU {cpu}: schedlab supports at most {MAX_CPUS} CPUs"),
                ));
            }
            out.push(row);
        }
        Ok(out)
    }

    fn placements(rows: &[Row]) -> Vec<Placement> {
        let llc_column =
            (0..rows[0].caches.len()).find(|&c| rows.iter().all(|r| r.caches[c].is_some()));
        // Without cache information, treat each socket as one LLC.
        let llc_keys: Vec<(u64, u64)> = rows
            .iter()
            .map(|r| match llc_column {
                Some(c) => (0, r.caches[c].unwrap_or_default()),
                None => (1, r.socket),
            })
            .collect();
        let nodes = dense_ids(&rows.iter().map(|r| r.node).collect::<Vec<_>>());
        let packages = dense_ids(&rows.iter().map(|r| r.socket).collect::<Vec<_>>());
        let cores = dense_ids(&rows.iter().map(|r| (r.socket, r.core)).collect::<Vec<_>>());
        let llcs = dense_ids(&llc_keys);
        (0..rows.len())
            .map(|i| Placement {
                node: nodes[i],
                package: packages[i],
                llc: llcs[i],
                core: cores[i],
            })
            .collect()
    }
}

/// Import of a sysfs copy; see [`Topology::from_sysfs`].
mod sysfs {
    use super::{
        build, check_distances, dense_ids, Placement, Topology, TopologyError, MAX_CPUS,
        MAX_NODE_ID,
    };
    use crate::cpumask::{CpuListError, CpuMask};
    use std::fs;
    use std::path::{Path, PathBuf};
    use std::str::FromStr;

    /// What one CPU's directory says about it, with the file each group
    /// mask came from for error messages.
    struct CpuEntry {
        dir: PathBuf,
        package: i64,
        node: u64,
        siblings: (CpuMask, PathBuf),
        llc: Option<(CpuMask, PathBuf)>,
    }

    fn error(path: &Path, message: impl Into<String>) -> TopologyError {
        TopologyError::Sysfs {
            path: path.to_path_buf(),
            message: message.into(),
        }
    }

    pub(super) fn parse(root: &Path) -> Result<Topology, TopologyError> {
        let n = online_cpus(root)?;
        let entries = (0..n)
            .map(|cpu| read_cpu(root, cpu, n))
            .collect::<Result<Vec<_>, _>>()?;
        let cores = group_ids(&entries.iter().map(|e| &e.siblings).collect::<Vec<_>>())?;
        let llcs = llc_ids(&entries)?;
        let packages = dense_ids(&entries.iter().map(|e| e.package).collect::<Vec<_>>());
        let raw_nodes: Vec<u64> = entries.iter().map(|e| e.node).collect();
        let nodes = dense_ids(&raw_nodes);
        let placements: Vec<Placement> = (0..n)
            .map(|i| Placement {
                node: nodes[i],
                package: packages[i],
                llc: llcs[i],
                core: cores[i],
            })
            .collect();
        let mut topology = build("sysfs", &placements)?;
        let mut distinct_nodes = raw_nodes;
        distinct_nodes.sort_unstable();
        distinct_nodes.dedup();
        if let Some(table) = node_distances(root, &distinct_nodes)? {
            topology.node_distance = table;
            topology.validate()?;
        }
        Ok(topology)
    }

    fn list_error(path: &Path, err: CpuListError) -> TopologyError {
        let message = match err {
            CpuListError::OutOfRange { cpu, .. } => {
                format!("CPU {cpu} is beyond the {MAX_CPUS} CPUs schedlab supports")
            }
            other => format!("malformed CPU list: {other}"),
        };
        error(path, message)
    }

    fn read_text(path: &Path) -> Result<String, TopologyError> {
        fs::read_to_string(path).map_err(|e| error(path, format!("cannot read: {e}")))
    }

    fn read_number<T: FromStr>(path: &Path) -> Result<T, TopologyError> {
        let text = read_text(path)?;
        text.trim().parse().map_err(|_| {
            error(
                path,
                format!("expected a number, found \"{}\"", text.trim()),
            )
        })
    }

    /// Reads a cpulist file and keeps the CPUs below `nr_cpus`; lists may
    /// mention CPUs that are not online.
    fn read_cpulist(path: &Path, nr_cpus: usize) -> Result<CpuMask, TopologyError> {
        let text = read_text(path)?;
        let parsed =
            CpuMask::parse_cpulist(text.trim(), MAX_CPUS).map_err(|e| list_error(path, e))?;
        Ok(CpuMask::from_cpus(
            nr_cpus,
            parsed.iter().take_while(|&c| c < nr_cpus),
        ))
    }

    fn online_cpus(root: &Path) -> Result<usize, TopologyError> {
        let path = root.join("online");
        let online = CpuMask::parse_cpulist(read_text(&path)?.trim(), MAX_CPUS)
            .map_err(|e| list_error(&path, e))?;
        let n = online.weight();
        if n == 0 || online != CpuMask::from_cpus(MAX_CPUS, 0..n) {
            return Err(error(
                &path,
                format!(
                    "expected the online CPUs to be numbered densely from 0 (like \"0-{}\"), found \"{online}\"",
                    n.max(1) - 1
                ),
            ));
        }
        Ok(n)
    }

    fn read_cpu(root: &Path, cpu: usize, n: usize) -> Result<CpuEntry, TopologyError> {
        let dir = root.join(format!("cpu{cpu}"));
        let topo = dir.join("topology");
        let package = read_number(&topo.join("physical_package_id"))?;
        let siblings_path = ["core_cpus_list", "thread_siblings_list"]
            .iter()
            .map(|f| topo.join(f))
            .find(|p| p.exists())
            .ok_or_else(|| {
                error(
                    &topo.join("thread_siblings_list"),
                    "missing (neither core_cpus_list nor thread_siblings_list exists)",
                )
            })?;
        let siblings = read_cpulist(&siblings_path, n)?;
        let llc = match llc_list_path(&dir)? {
            Some(path) => Some((read_cpulist(&path, n)?, path)),
            None => None,
        };
        Ok(CpuEntry {
            package,
            node: node_of(&dir)?,
            siblings: (siblings, siblings_path),
            llc,
            dir,
        })
    }

    /// Numeric suffixes of the entries of `dir` named `prefix<digits>`,
    /// ascending so the result does not depend on directory order.
    fn numbered_entries(dir: &Path, prefix: &str) -> Result<Vec<u64>, TopologyError> {
        let listing =
            fs::read_dir(dir).map_err(|e| error(dir, format!("cannot list directory: {e}")))?;
        let mut ids = Vec::new();
        for entry in listing {
            let entry = entry.map_err(|e| error(dir, format!("cannot list directory: {e}")))?;
            let name = entry.file_name();
            let Some(suffix) = name.to_str().and_then(|n| n.strip_prefix(prefix)) else {
                continue;
            };
            if !suffix.is_empty() && suffix.bytes().all(|b| b.is_ascii_digit()) {
                if let Ok(id) = suffix.parse() {
                    ids.push(id);
                }
            }
        }
        ids.sort_unstable();
        Ok(ids)
    }

    fn node_of(cpu_dir: &Path) -> Result<u64, TopologyError> {
        Ok(numbered_entries(cpu_dir, "node")?
            .first()
            .copied()
            .unwrap_or(0))
    }

    /// The `shared_cpu_list` of the highest-level data or unified cache.
    fn llc_list_path(cpu_dir: &Path) -> Result<Option<PathBuf>, TopologyError> {
        let cache = cpu_dir.join("cache");
        if !cache.is_dir() {
            return Ok(None);
        }
        let mut best: Option<(u32, PathBuf)> = None;
        for index in numbered_entries(&cache, "index")? {
            let dir = cache.join(format!("index{index}"));
            let kind = read_text(&dir.join("type"))?;
            if !matches!(kind.trim(), "Unified" | "Data") {
                continue;
            }
            let level: u32 = read_number(&dir.join("level"))?;
            if best.as_ref().is_none_or(|(l, _)| level > *l) {
                best = Some((level, dir.join("shared_cpu_list")));
            }
        }
        Ok(best.map(|(_, path)| path))
    }

    /// Dense ids for groups given by per-CPU member lists (sibling or cache
    /// sharing lists), numbered by lowest member. Every member must report
    /// the same list, otherwise the groups would not partition the machine.
    fn group_ids(lists: &[&(CpuMask, PathBuf)]) -> Result<Vec<usize>, TopologyError> {
        let mut ids: Vec<usize> = Vec::with_capacity(lists.len());
        let mut next = 0;
        for (cpu, (mask, path)) in lists.iter().enumerate() {
            if !mask.test(cpu) {
                return Err(error(
                    path,
                    format!("expected the list to include CPU {cpu} itself, found \"{mask}\""),
                ));
            }
            if let Some(other) = mask.iter().find(|&m| lists[m].0 != *mask) {
                return Err(error(
                    path,
                    format!(
                        "lists \"{mask}\" but {} lists \"{}\"; the lists of all members must agree",
                        lists[other].1.display(),
                        lists[other].0
                    ),
                ));
            }
            match mask.first().filter(|&first| first < cpu) {
                Some(first) => ids.push(ids[first]),
                None => {
                    ids.push(next);
                    next += 1;
                }
            }
        }
        Ok(ids)
    }

    fn llc_ids(entries: &[CpuEntry]) -> Result<Vec<usize>, TopologyError> {
        let with_cache: Vec<&(CpuMask, PathBuf)> =
            entries.iter().filter_map(|e| e.llc.as_ref()).collect();
        if with_cache.is_empty() {
            return Ok(dense_ids(
                &entries.iter().map(|e| e.package).collect::<Vec<_>>(),
            ));
        }
        if let Some(bare) = entries.iter().find(|e| e.llc.is_none()) {
            return Err(error(
                &bare.dir.join("cache"),
                "expected a data or unified cache (index*/type), as other CPUs have",
            ));
        }
        group_ids(&with_cache)
    }

    /// Reads `../node/online` and `../node/nodeM/distance` if present.
    /// Each distance file lists one value per online node (including nodes
    /// without CPUs), in node order; only the nodes with CPUs are kept.
    fn node_distances(
        root: &Path,
        raw_nodes: &[u64],
    ) -> Result<Option<Vec<Vec<u32>>>, TopologyError> {
        let Some(node_root) = root.parent().map(|p| p.join("node")) else {
            return Ok(None);
        };
        let online_path = node_root.join("online");
        if !online_path.exists() {
            return Ok(None);
        }
        let online = CpuMask::parse_cpulist(read_text(&online_path)?.trim(), MAX_NODE_ID)
            .map_err(|e| error(&online_path, format!("malformed node list: {e}")))?;
        let order: Vec<u64> = online.iter().map(|n| n as u64).collect();
        let rank = |node: u64| order.binary_search(&node).ok();
        let ranks = raw_nodes
            .iter()
            .map(|&node| {
                rank(node).ok_or_else(|| {
                    error(
                        &online_path,
                        format!("node {node} has CPUs but is not listed as online"),
                    )
                })
            })
            .collect::<Result<Vec<usize>, _>>()?;
        let mut table = Vec::with_capacity(raw_nodes.len());
        for &a in raw_nodes {
            let path = node_root.join(format!("node{a}")).join("distance");
            let row = read_distance_row(&path, order.len())?;
            table.push(ranks.iter().map(|&r| row[r]).collect());
        }
        check_distances(&table, raw_nodes.len())
            .map_err(|e| error(&node_root, format!("invalid node distances: {e}")))?;
        Ok(Some(table))
    }

    fn read_distance_row(path: &Path, nr_online: usize) -> Result<Vec<u32>, TopologyError> {
        let text = read_text(path)?;
        let row = text
            .split_whitespace()
            .map(str::parse)
            .collect::<Result<Vec<u32>, _>>()
            .map_err(|_| {
                error(
                    path,
                    format!(
                        "expected whitespace-separated numbers, found \"{}\"",
                        text.trim()
                    ),
                )
            })?;
        if row.len() != nr_online {
            return Err(error(
                path,
                format!(
                    "expected {nr_online} distances (one per online node), found {}",
                    row.len()
                ),
            ));
        }
        Ok(row)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn mask(nr: usize, cpus: &[usize]) -> CpuMask {
        CpuMask::from_cpus(nr, cpus.iter().copied())
    }

    fn levels(t: &Topology, cpu: usize) -> Vec<DomainLevel> {
        t.sched_domains(cpu).iter().map(|d| d.level).collect()
    }

    fn preset(name: &str) -> Topology {
        Topology::preset(name).unwrap()
    }

    /// Counts as (cpus, cores, llcs, nodes, packages, max SMT).
    fn shape(t: &Topology) -> (usize, usize, usize, usize, usize, usize) {
        (
            t.nr_cpus(),
            t.nr_cores(),
            t.nr_llcs(),
            t.nr_nodes(),
            t.nr_packages(),
            t.max_smt(),
        )
    }

    #[test]
    fn every_listed_preset_builds_and_validates() {
        for (name, description) in presets() {
            let t = preset(name);
            assert_eq!(t.name, *name);
            assert!(!description.is_empty());
            t.validate().unwrap();
        }
    }

    #[test]
    fn preset_counts() {
        use DomainLevel::*;
        let expect = [
            ("1cpu", (1, 1, 1, 1, 1, 1), vec![]),
            ("2cpu", (2, 2, 1, 1, 1, 1), vec![Mc]),
            ("4cpu", (4, 4, 1, 1, 1, 1), vec![Mc]),
            ("guest-16", (16, 16, 1, 1, 1, 1), vec![Mc]),
            ("amd-16c", (32, 16, 2, 1, 1, 2), vec![Smt, Mc, Pkg]),
            ("ryzen-3900x", (24, 12, 4, 1, 1, 2), vec![Smt, Mc, Pkg]),
            (
                "epyc-2s-192",
                (192, 96, 12, 2, 2, 2),
                vec![Smt, Mc, Pkg, Numa],
            ),
        ];
        for (name, counts, domain_levels) in expect {
            let t = preset(name);
            assert_eq!(shape(&t), counts, "{name}");
            for cpu in 0..t.nr_cpus() {
                assert_eq!(levels(&t, cpu), domain_levels, "{name} cpu {cpu}");
            }
        }
    }

    #[test]
    fn describe_summaries() {
        assert_eq!(
            preset("epyc-2s-192").describe(),
            "epyc-2s-192: 192 CPUs, 2 nodes, 2 packages, 12 LLCs, 96 cores, SMT2"
        );
        assert_eq!(
            preset("1cpu").describe(),
            "1cpu: 1 CPU, 1 node, 1 package, 1 LLC, 1 core, no SMT"
        );
        assert_eq!(
            preset("ryzen-3900x").describe(),
            "ryzen-3900x: 24 CPUs, 1 node, 1 package, 4 LLCs, 12 cores, SMT2"
        );
    }

    #[test]
    fn ryzen_3900x_layout() {
        let t = preset("ryzen-3900x");
        for cpu in 0..12 {
            assert_eq!(t.smt_siblings(cpu), &mask(24, &[cpu, cpu + 12]));
            assert_eq!(t.smt_siblings(cpu + 12), t.smt_siblings(cpu));
            assert_eq!(t.cpus[cpu].thread, 0);
            assert_eq!(t.cpus[cpu + 12].thread, 1);
            assert_eq!(t.llc_of(cpu), cpu / 3);
            assert_eq!(t.llc_of(cpu + 12), cpu / 3);
            assert_eq!(t.llc_size(cpu), 6);
        }
        assert_eq!(t.llc_span[1], mask(24, &[3, 4, 5, 15, 16, 17]));
        assert!(t.cpus_share_cache(3, 17));
        assert!(!t.cpus_share_cache(2, 3));
        assert!(!t.cpus_share_cache(0, 24));
        assert_eq!(t.node_distance, vec![vec![LOCAL_DISTANCE]]);
    }

    #[test]
    fn amd_16c_layout() {
        let t = preset("amd-16c");
        assert_eq!(t.smt_siblings(5), &mask(32, &[5, 21]));
        let ccd0: Vec<usize> = (0..8).chain(16..24).collect();
        assert_eq!(t.llc_span[0], mask(32, &ccd0));
        assert_eq!(t.llc_of(8), 1);
        assert_eq!(t.llc_of(24), 1);
        assert_eq!(t.llc_size(0), 16);
    }

    #[test]
    fn epyc_2s_192_layout() {
        let t = preset("epyc-2s-192");
        for (cpu, package, thread) in [
            (0, 0, 0),
            (47, 0, 0),
            (48, 1, 0),
            (95, 1, 0),
            (96, 0, 1),
            (143, 0, 1),
            (144, 1, 1),
            (191, 1, 1),
        ] {
            let info = t.cpus[cpu];
            assert_eq!(
                (info.package, info.node, info.thread),
                (package, package, thread),
                "cpu {cpu}"
            );
        }
        assert_eq!(t.smt_siblings(0), &mask(192, &[0, 96]));
        assert_eq!(t.smt_siblings(48), &mask(192, &[48, 144]));
        let ccx0: Vec<usize> = (0..8).chain(96..104).collect();
        assert_eq!(t.llc_span[0], mask(192, &ccx0));
        assert_eq!(t.llc_of(48), 6);
        assert_eq!(t.llc_of(191), 11);
        assert_eq!(t.llc_size(100), 16);
        let socket1: Vec<usize> = (48..96).chain(144..192).collect();
        assert_eq!(t.node_span[1], mask(192, &socket1));
        assert_eq!(t.package_span[1], t.node_span[1]);
        assert_eq!(t.node_distance, vec![vec![10, 32], vec![32, 10]]);
        assert_eq!(t.all_cpus().weight(), 192);
    }

    #[test]
    fn flat_machines() {
        let t = Topology::flat(8).unwrap();
        assert_eq!(t.name, "flat-8");
        assert_eq!(shape(&t), (8, 8, 1, 1, 1, 1));
        assert_eq!(Topology::flat(4).unwrap().cpus, preset("4cpu").cpus);
        assert!(matches!(
            Topology::flat(0),
            Err(TopologyError::InvalidShape(_))
        ));
        assert!(matches!(
            Topology::flat(MAX_CPUS + 1),
            Err(TopologyError::InvalidShape(_))
        ));
        let big = Topology::flat(MAX_CPUS).unwrap();
        assert_eq!(big.nr_cpus(), MAX_CPUS);
        let domains = big.sched_domains(MAX_CPUS - 1);
        assert_eq!(domains.len(), 1);
        assert_eq!(domains[0].groups.len(), MAX_CPUS);
        assert_eq!(
            domains[0].groups[0],
            CpuMask::single(MAX_CPUS, MAX_CPUS - 1)
        );
    }

    #[test]
    fn uniform_rejects_bad_shapes() {
        let err = Topology::uniform("x", 1, 1, 0, 4, 1).unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid machine shape: LLCs per node must be at least 1"
        );
        assert!(matches!(
            Topology::uniform("x", usize::MAX, 2, 1, 1, 1),
            Err(TopologyError::InvalidShape(_))
        ));
        assert!(matches!(
            Topology::uniform("x", 2, 1, 1, 4097, 1),
            Err(TopologyError::InvalidShape(_))
        ));
    }

    #[test]
    fn unknown_preset_lists_known_names() {
        let err = Topology::preset("pdp-11").unwrap_err();
        let msg = err.to_string();
        assert!(msg.starts_with("unknown machine preset \"pdp-11\"; known presets: 1cpu, 2cpu"));
        for (name, _) in presets() {
            assert!(msg.contains(name), "{msg}");
        }
    }

    #[test]
    fn ryzen_domains_in_detail() {
        let t = preset("ryzen-3900x");
        let d = t.sched_domains(4);
        let (smt, mc, pkg) = (&d[0], &d[1], &d[2]);

        assert_eq!(smt.span, mask(24, &[4, 16]));
        assert_eq!(smt.groups, vec![mask(24, &[4]), mask(24, &[16])]);
        assert!(smt.flags.share_cpucapacity && smt.flags.share_llc);
        assert_eq!((smt.imbalance_pct, smt.cache_nice_tries), (110, 0));
        assert_eq!(
            (smt.min_interval_ms, smt.max_interval_ms, smt.busy_factor),
            (2, 4, 16)
        );

        assert_eq!(mc.span, mask(24, &[3, 4, 5, 15, 16, 17]));
        // Wrap order from CPU 4: 4, 5, 15 (new group {3,15}), ...
        assert_eq!(
            mc.groups,
            vec![mask(24, &[4, 16]), mask(24, &[5, 17]), mask(24, &[3, 15])]
        );
        assert!(mc.flags.share_llc && !mc.flags.share_cpucapacity);
        assert_eq!((mc.imbalance_pct, mc.cache_nice_tries), (117, 1));
        assert_eq!((mc.min_interval_ms, mc.max_interval_ms), (6, 12));

        assert_eq!(pkg.span, t.all_cpus());
        let llcs: Vec<CpuMask> = [1, 2, 3, 0]
            .iter()
            .map(|&l| t.llc_span[l].clone())
            .collect();
        assert_eq!(pkg.groups, llcs);
        assert!(!pkg.flags.share_llc && !pkg.flags.numa);
        assert!(pkg.flags.wake_affine && pkg.flags.balance_fork && pkg.flags.prefer_sibling);
        assert_eq!((pkg.imbalance_pct, pkg.cache_nice_tries), (117, 1));
    }

    #[test]
    fn epyc_numa_level_loses_wake_affine() {
        let t = preset("epyc-2s-192");
        let d = t.sched_domains(100);
        let numa = &d[3];
        assert_eq!(numa.level, DomainLevel::Numa);
        assert_eq!(numa.span, t.all_cpus());
        assert_eq!(
            numa.groups,
            vec![t.node_span[0].clone(), t.node_span[1].clone()]
        );
        let f = numa.flags;
        assert!(f.numa && f.serialize && f.balance_newidle);
        assert!(!f.wake_affine && !f.balance_fork && !f.balance_exec && !f.prefer_sibling);
        assert_eq!((numa.imbalance_pct, numa.cache_nice_tries), (117, 2));
        assert_eq!((numa.min_interval_ms, numa.max_interval_ms), (192, 384));
        // From socket 1 the local node's group comes first.
        assert_eq!(t.sched_domains(50)[3].groups[0], t.node_span[1]);
    }

    #[test]
    fn near_numa_level_keeps_wake_affine() {
        let mut t = preset("epyc-2s-192");
        t.node_distance = vec![vec![10, 21], vec![21, 10]];
        t.validate().unwrap();
        let numa = &t.sched_domains(0)[3];
        assert!(numa.flags.numa && numa.flags.wake_affine && numa.flags.balance_fork);
    }

    #[test]
    fn nps2_gives_node_pkg_and_two_numa_levels() {
        let t = Topology::uniform("nps2", 2, 2, 2, 4, 2).unwrap();
        assert_eq!(t.node_distance[0], vec![10, 20, 32, 32]);
        let d = t.sched_domains(0);
        let got: Vec<(DomainLevel, usize)> = d.iter().map(|d| (d.level, d.span.weight())).collect();
        use DomainLevel::*;
        assert_eq!(
            got,
            vec![(Smt, 2), (Mc, 8), (Pkg, 16), (Numa, 32), (Numa, 64)]
        );
        assert!(
            d[3].flags.wake_affine,
            "distance 20 is below RECLAIM_DISTANCE"
        );
        assert!(!d[4].flags.wake_affine);
        assert_eq!(d[3].span, t.package_span[0]);
        assert_eq!(d[4].groups.len(), 2, "groups of the top level are packages");
    }

    #[test]
    fn groups_partition_each_span_with_own_group_first() {
        for (name, _) in presets() {
            let t = preset(name);
            for cpu in 0..t.nr_cpus() {
                let domains = t.sched_domains(cpu);
                let mut child = CpuMask::single(t.nr_cpus(), cpu);
                for d in &domains {
                    assert!(d.span.test(cpu), "{name} cpu {cpu} {}", d.level);
                    assert!(child.is_subset_of(&d.span));
                    assert_ne!(child, d.span, "degenerate level kept");
                    assert_eq!(d.groups[0], child, "{name} cpu {cpu} {}", d.level);
                    assert!(d.groups.len() >= 2);
                    let mut covered = CpuMask::new(t.nr_cpus());
                    for g in &d.groups {
                        assert!(!g.intersects(&covered), "overlapping groups");
                        covered.or_assign(g);
                    }
                    assert_eq!(covered, d.span);
                    child = d.span.clone();
                }
            }
        }
    }

    #[test]
    fn sched_domains_of_missing_cpu_is_empty() {
        assert!(preset("4cpu").sched_domains(4).is_empty());
        assert!(preset("1cpu").sched_domains(0).is_empty());
    }

    #[test]
    fn sched_domains_survive_an_invalid_topology() {
        let mut t = preset("ryzen-3900x");
        t.llc_span.clear();
        t.node_distance = vec![vec![10, 40]];
        assert!(t.validate().is_err());
        // Must not panic; the exact result is unspecified.
        let _ = t.sched_domains(3);
    }

    #[test]
    fn validate_catches_hand_edits() {
        let base = preset("amd-16c");
        let mut t = base.clone();
        t.cpus[3].llc = 1;
        assert!(matches!(t.validate(), Err(TopologyError::Inconsistent(_))));
        let mut t = base.clone();
        t.cpus[20].thread = 0;
        assert!(t.validate().unwrap_err().to_string().contains("SMT index"));
        let mut t = base.clone();
        t.llc_span[0].set(8);
        assert!(t.validate().unwrap_err().to_string().contains("partition"));
        let mut t = preset("epyc-2s-192");
        t.node_distance[0][1] = 40;
        assert!(t.validate().unwrap_err().to_string().contains("symmetric"));
        t.node_distance[1][0] = 40;
        t.validate().unwrap();
        t.node_distance[0][0] = 11;
        assert!(t.validate().is_err());
    }

    // ---- lscpu ----

    /// A 2-socket machine with 2 cores per socket, SMT2 and an L3 per
    /// socket, numbered like x86 Linux.
    fn two_socket_reference() -> Topology {
        Topology::uniform("reference", 2, 1, 1, 2, 2).unwrap()
    }

    fn renamed(mut t: Topology, name: &str) -> Topology {
        t.name = name.to_string();
        t
    }

    const LSCPU_2S: &str = "\
# The following is the parsable format, which can be fed to other
# programs. Each different item in every column has an unique ID
# starting usually from zero.
# CPU,Core,Socket,Node,,L1d,L1i,L2,L3
0,0,0,0,,0,0,0,0
1,1,0,0,,1,1,1,0
2,2,1,1,,2,2,2,1
3,3,1,1,,3,3,3,1
4,0,0,0,,0,0,0,0
5,1,0,0,,1,1,1,0
6,2,1,1,,2,2,2,1
7,3,1,1,,3,3,3,1
";

    #[test]
    fn lscpu_matches_uniform() {
        let t = Topology::from_lscpu(LSCPU_2S).unwrap();
        assert_eq!(t, renamed(two_socket_reference(), "lscpu"));
        assert_eq!(t.llc_span[0], mask(8, &[0, 1, 4, 5]));
        use DomainLevel::*;
        // PKG equals MC here (one L3 per node), so it folds away.
        assert_eq!(levels(&t, 0), vec![Smt, Mc, Numa]);
    }

    #[test]
    fn lscpu_tolerates_sparse_ids_order_and_missing_node_column() {
        let text = "\
# CPU,Core,Socket,,L1d,L1i,L2
3,9,4,,9,9,9
0,2,0,,2,2,2
1,7,0,,7,7,7
2,8,4,,8,8,8
";
        let t = Topology::from_lscpu(text).unwrap();
        assert_eq!(shape(&t), (4, 4, 4, 1, 2, 1));
        assert_eq!(t.cpus[3].core, 3);
        assert_eq!(t.cpus[2].package, 1);
        assert_eq!(t.llc_of(1), 1, "L2 is the LLC when there is no L3");
    }

    #[test]
    fn lscpu_without_cache_values_uses_sockets() {
        let text = "# CPU,Core,Socket,Node,,L1d,L1i,L2,L3\n0,0,0,0,,,,,\n1,1,1,0,,,,,\n";
        let t = Topology::from_lscpu(text).unwrap();
        assert_eq!(t.nr_llcs(), 2);
        assert_eq!(t.nr_nodes(), 1);
        assert_eq!(t.node_distance, vec![vec![10]]);
    }

    fn lscpu_error(text: &str) -> (usize, String) {
        match Topology::from_lscpu(text).unwrap_err() {
            TopologyError::Lscpu { line, message } => (line, message),
            other => panic!("unexpected error {other:?}"),
        }
    }

    #[test]
    fn lscpu_errors_name_the_line() {
        let (line, msg) = lscpu_error("# CPU,Core,Socket,Node\n0,0,0,0\n1,x,0,0\n");
        assert_eq!(line, 3);
        assert!(
            msg.contains("expected a number in the Core column, found \"x\""),
            "{msg}"
        );

        let (line, msg) = lscpu_error("# CPU,Core,Socket\n0,0,0\n2,1,0\n");
        assert_eq!(line, 3);
        assert!(msg.contains("CPU 1 is missing"), "{msg}");

        let (line, msg) = lscpu_error("# comment\n0,0,0,0\n");
        assert_eq!(line, 2);
        assert!(msg.contains("header"), "{msg}");

        let (line, msg) = lscpu_error("# CPU,Socket,Node\n0,0,0\n");
        assert_eq!(line, 1);
        assert!(msg.contains("no Core column"), "{msg}");

        let (line, msg) = lscpu_error("# CPU,Core,Socket\n0,0,0\n0,1,0\n");
        assert_eq!(line, 3);
        assert!(msg.contains("listed twice (first on line 2)"), "{msg}");

        let (line, msg) = lscpu_error("# CPU,Core,Socket,Node\n0,0\n");
        assert_eq!(line, 2);
        assert!(msg.contains("expected 4 comma-separated fields"), "{msg}");

        let (line, _) = lscpu_error("");
        assert_eq!(line, 1);
        let err = Topology::from_lscpu("# CPU,Core,Socket\n0,0,-1\n").unwrap_err();
        assert!(
            err.to_string().starts_with("lscpu input, line 2: "),
            "{err}"
        );
    }

    // ---- sysfs ----

    /// A scratch directory under the system temp dir, removed on drop.
    struct TempDir(PathBuf);

    impl TempDir {
        fn new(tag: &str) -> TempDir {
            let path = std::env::temp_dir()
                .join(format!("schedlab-topology-{tag}-{}", std::process::id()));
            let _ = fs::remove_dir_all(&path);
            fs::create_dir_all(&path).unwrap();
            TempDir(path)
        }

        fn write(&self, rel: &str, contents: &str) {
            let path = self.0.join(rel);
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(path, contents).unwrap();
        }

        fn mkdir(&self, rel: &str) {
            fs::create_dir_all(self.0.join(rel)).unwrap();
        }

        fn cpu_root(&self) -> PathBuf {
            self.0.join("cpu")
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    fn write_cache(dir: &TempDir, cpu: usize, index: usize, level: u32, kind: &str, shared: &str) {
        let base = format!("cpu/cpu{cpu}/cache/index{index}");
        dir.write(&format!("{base}/level"), &format!("{level}\n"));
        dir.write(&format!("{base}/type"), &format!("{kind}\n"));
        dir.write(&format!("{base}/shared_cpu_list"), &format!("{shared}\n"));
    }

    /// Lays out the sysfs view of `two_socket_reference()`: like a real
    /// system, core_id restarts in each package and the lists are
    /// newline-terminated.
    fn write_two_socket_sysfs(dir: &TempDir, sibling_file: &str) {
        dir.write("cpu/online", "0-7\n");
        for cpu in 0..8 {
            let core = cpu % 4;
            let package = core / 2;
            let base = format!("cpu/cpu{cpu}");
            dir.write(
                &format!("{base}/topology/core_id"),
                &format!("{}\n", core % 2),
            );
            dir.write(
                &format!("{base}/topology/physical_package_id"),
                &format!("{package}\n"),
            );
            dir.write(
                &format!("{base}/topology/{sibling_file}"),
                &format!("{},{}\n", core, core + 4),
            );
            dir.mkdir(&format!("{base}/node{package}"));
            let l3 = if package == 0 { "0-1,4-5" } else { "2-3,6-7" };
            let own = format!("{},{}", core, core + 4);
            write_cache(dir, cpu, 0, 1, "Data", &own);
            write_cache(dir, cpu, 1, 1, "Instruction", &own);
            write_cache(dir, cpu, 2, 2, "Unified", &own);
            write_cache(dir, cpu, 3, 3, "Unified", l3);
        }
    }

    #[test]
    fn sysfs_matches_uniform() {
        for sibling_file in ["thread_siblings_list", "core_cpus_list"] {
            let dir = TempDir::new(&format!("match-{sibling_file}"));
            write_two_socket_sysfs(&dir, sibling_file);
            let t = Topology::from_sysfs(&dir.cpu_root()).unwrap();
            assert_eq!(
                t,
                renamed(two_socket_reference(), "sysfs"),
                "{sibling_file}"
            );
        }
    }

    #[test]
    fn sysfs_reads_node_distances_when_present() {
        let dir = TempDir::new("distance");
        write_two_socket_sysfs(&dir, "thread_siblings_list");
        // Node 2 is a CPU-less memory node; its column must be skipped.
        dir.write("node/online", "0-2\n");
        dir.write("node/node0/distance", "10 21 30\n");
        dir.write("node/node1/distance", "21 10 30\n");
        let t = Topology::from_sysfs(&dir.cpu_root()).unwrap();
        assert_eq!(t.node_distance, vec![vec![10, 21], vec![21, 10]]);
        assert!(t.sched_domains(0).last().unwrap().flags.wake_affine);

        dir.write("node/node1/distance", "21 10\n");
        let err = Topology::from_sysfs(&dir.cpu_root())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("node1/distance: expected 3 distances"),
            "{err}"
        );
    }

    #[test]
    fn sysfs_without_cache_or_nodes_uses_packages_and_node_0() {
        let dir = TempDir::new("bare");
        dir.write("cpu/online", "0-1\n");
        for cpu in 0..2 {
            dir.write(
                &format!("cpu/cpu{cpu}/topology/physical_package_id"),
                &format!("{cpu}\n"),
            );
            dir.write(
                &format!("cpu/cpu{cpu}/topology/thread_siblings_list"),
                &format!("{cpu}\n"),
            );
        }
        let t = Topology::from_sysfs(&dir.cpu_root()).unwrap();
        assert_eq!(shape(&t), (2, 2, 2, 1, 2, 1));
    }

    fn sysfs_error(dir: &TempDir) -> (PathBuf, String) {
        match Topology::from_sysfs(&dir.cpu_root()).unwrap_err() {
            TopologyError::Sysfs { path, message } => (path, message),
            other => panic!("unexpected error {other:?}"),
        }
    }

    #[test]
    fn sysfs_errors_name_the_file() {
        let dir = TempDir::new("errors");
        write_two_socket_sysfs(&dir, "thread_siblings_list");

        fs::remove_file(dir.0.join("cpu/cpu5/topology/physical_package_id")).unwrap();
        let (path, msg) = sysfs_error(&dir);
        assert!(
            path.ends_with("cpu5/topology/physical_package_id"),
            "{path:?}"
        );
        assert!(msg.starts_with("cannot read"), "{msg}");

        dir.write("cpu/cpu5/topology/physical_package_id", "zero\n");
        let (path, msg) = sysfs_error(&dir);
        assert!(path.ends_with("cpu5/topology/physical_package_id"));
        assert_eq!(msg, "expected a number, found \"zero\"");
        dir.write("cpu/cpu5/topology/physical_package_id", "0\n");

        dir.write("cpu/cpu3/topology/thread_siblings_list", "3,9999\n");
        let (path, msg) = sysfs_error(&dir);
        assert!(path.ends_with("cpu3/topology/thread_siblings_list"));
        assert_eq!(msg, "CPU 9999 is beyond the 8192 CPUs schedlab supports");

        dir.write("cpu/cpu3/topology/thread_siblings_list", "3\n");
        let (path, msg) = sysfs_error(&dir);
        // CPU 7 still claims CPU 3 as its sibling; both files are named.
        assert!(
            path.ends_with("cpu7/topology/thread_siblings_list"),
            "{path:?}"
        );
        assert!(
            msg.contains("cpu3/topology/thread_siblings_list lists \"3\""),
            "{msg}"
        );
        assert!(msg.contains("must agree"), "{msg}");
        dir.write("cpu/cpu3/topology/thread_siblings_list", "3,7\n");

        dir.write("cpu/online", "0-3,5-7\n");
        let (path, msg) = sysfs_error(&dir);
        assert!(path.ends_with("cpu/online"));
        assert!(msg.contains("densely"), "{msg}");
        dir.write("cpu/online", "0-7\n");

        fs::remove_dir_all(dir.0.join("cpu/cpu6/cache")).unwrap();
        let (path, msg) = sysfs_error(&dir);
        assert!(path.ends_with("cpu6/cache"), "{path:?}");
        assert!(msg.contains("data or unified cache"), "{msg}");

        let empty = TempDir::new("empty");
        let (path, msg) = sysfs_error(&empty);
        assert!(path.ends_with("cpu/online"));
        assert!(msg.starts_with("cannot read"), "{msg}");
    }

    #[test]
    fn sysfs_error_message_includes_path() {
        let err = TopologyError::Sysfs {
            path: PathBuf::from("/x/cpu/online"),
            message: "cannot read".into(),
        };
        assert_eq!(err.to_string(), "/x/cpu/online: cannot read");
    }

    #[test]
    fn dense_ids_keep_order() {
        assert_eq!(dense_ids(&[7, 3, 7, 100, 3]), vec![1, 0, 1, 2, 0]);
        assert_eq!(dense_ids::<u8>(&[]), Vec::<usize>::new());
    }

    #[test]
    fn domain_level_names() {
        assert_eq!(DomainLevel::Mc.to_string(), "MC");
        assert_eq!(DomainLevel::Numa.name(), "NUMA");
    }
}
