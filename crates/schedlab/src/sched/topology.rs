//! The scheduler-domain hierarchy the kernel builds on a machine: the
//! counterpart of kernel/sched/topology.c (`build_sched_domains()`,
//! `sd_init()`, `build_sched_groups()`, `sched_init_numa()`).
//!
//! It reads the machine model ([`crate::machine::topology`]) and produces,
//! per CPU, the [`SchedDomain`]s that balancing (balance.rs) and wakeup
//! placement walk.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::Arc;

use crate::machine::cpumask::CpuMask;
use crate::machine::topology::{Topology, LOCAL_DISTANCE, RECLAIM_DISTANCE};

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
    /// How many: `sd->span_weight`.
    pub span_weight: u32,
    /// The span as CPU ids `span_lo..span_hi` when it is one contiguous
    /// run (every preset's and most imported machines' levels); `span_hi`
    /// is 0 otherwise. spans() then answers without reading the mask,
    /// which on a large machine is a cache miss per domain walked.
    span_lo: u32,
    span_hi: u32,
    /// The balancing groups: spans of the child level covering `span`
    /// (single CPUs for the lowest level). The group containing the owning
    /// CPU comes first, the rest follow in `for_each_cpu_wrap` order from
    /// that CPU, exactly as `build_sched_groups()` links them.
    pub groups: SchedGroups,
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

impl SchedDomain {
    /// Whether `cpu` is in the span. A span that is one run of CPU ids
    /// answers from its bounds, without reading the mask (heap words
    /// beyond 256 CPUs, one mask per CPU and level).
    #[inline]
    pub fn spans(&self, cpu: usize) -> bool {
        if self.span_hi != 0 {
            return (self.span_lo as usize..self.span_hi as usize).contains(&cpu);
        }
        self.span.test(cpu)
    }
}

/// One candidate level of the hierarchy, before degenerate levels are
/// dropped. `distance` is meaningful for NUMA levels only.
#[derive(Clone, Copy, Debug)]
struct LevelSpec {
    level: DomainLevel,
    distance: u32,
}

/// The balancing groups of one CPU's domain. As in the kernel, where every
/// CPU of a domain span links into one shared ring of `sched_group`s
/// (`build_sched_groups()` claims each group once), the group spans are
/// stored once per distinct domain span and shared; each CPU keeps only
/// where its walk starts (or, for an irregular topology whose walks are not
/// rotations of one order, its own order of group indices). Two are equal
/// when they hold the same groups in the same order, however numbered.
#[derive(Clone, Debug)]
pub struct SchedGroups {
    all: Arc<[CpuMask]>,
    /// Each group's CPUs, ascending: balancing walks every CPU of every
    /// group of a span, and a mask's walk reads all its words (64 of them
    /// per group on a 4,096-CPU machine, for a 1-CPU group).
    cpus: Arc<[Box<[u32]>]>,
    order: GroupOrder,
    /// The id of the shared groups' first ([`Group::id`]); NO_GROUP_ID
    /// for groups of this CPU's own.
    first_id: u32,
}

/// The id of a group not shared with other CPUs' domains.
pub const NO_GROUP_ID: u32 = u32::MAX;

/// One balancing group: its span and its CPUs.
#[derive(Clone, Copy, Debug)]
pub struct Group<'a> {
    /// The group's span.
    pub mask: &'a CpuMask,
    /// The same CPUs, ascending.
    pub cpus: &'a [u32],
    /// A number for this set of CPUs, the same in every CPU's domains
    /// that share it and unique among a machine's groups (ids are dense
    /// from 0); [`NO_GROUP_ID`] for a group of one CPU's domain only.
    pub id: u32,
}

impl Group<'_> {
    /// Whether `cpu` is in the group.
    pub fn contains(&self, cpu: u32) -> bool {
        self.cpus.binary_search(&cpu).is_ok()
    }

    /// Whether the group shares a CPU with `m`, by whichever is shorter:
    /// its CPU list or the mask's words.
    pub fn intersects(&self, m: &CpuMask) -> bool {
        if self.cpus.len() * 4 < m.words().len() {
            self.cpus.iter().any(|&c| m.test(c as usize))
        } else {
            self.mask.intersects(m)
        }
    }
}

fn cpu_lists(all: &[CpuMask]) -> Arc<[Box<[u32]>]> {
    all.iter().map(|m| m.iter().map(|c| c as u32).collect()).collect()
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum GroupOrder {
    /// The shared order, starting at this index and wrapping.
    Rotate(u32),
    /// This CPU's own order of indices into the shared groups.
    Explicit(Arc<[u32]>),
}

impl SchedGroups {
    /// Groups given in this CPU's order (tests, single-CPU builds).
    pub fn new(groups: Vec<CpuMask>) -> SchedGroups {
        let all: Arc<[CpuMask]> = groups.into();
        SchedGroups { cpus: cpu_lists(&all), all, order: GroupOrder::Rotate(0), first_id: NO_GROUP_ID }
    }

    /// The shared groups' first id and their CPU lists in id order (None
    /// for groups of this CPU's own).
    pub fn shared(&self) -> Option<(u32, &[Box<[u32]>])> {
        (self.first_id != NO_GROUP_ID).then_some((self.first_id, &self.cpus[..]))
    }

    /// Where this CPU's walk starts in the shared order, when its walk is
    /// a rotation of it (its own group's index); None for an order of its own.
    pub fn rotation(&self) -> Option<usize> {
        match self.order {
            GroupOrder::Rotate(first) => Some(first as usize),
            GroupOrder::Explicit(_) => None,
        }
    }

    /// Group `k` of the shared order (not this CPU's order).
    pub fn shared_group(&self, k: usize) -> Group<'_> {
        let id = if self.first_id == NO_GROUP_ID { NO_GROUP_ID } else { self.first_id + k as u32 };
        Group { mask: &self.all[k], cpus: &self.cpus[k], id }
    }

    /// How many groups.
    pub fn len(&self) -> usize {
        self.all.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.all.is_empty()
    }

    fn index(&self, i: usize) -> usize {
        match &self.order {
            GroupOrder::Rotate(first) => {
                // (first + i) % len, without a division per group: a walk
                // of a 4,096-CPU domain visits 4,096 of them.
                let k = *first as usize + i;
                if k >= self.all.len() {
                    k - self.all.len()
                } else {
                    k
                }
            }
            GroupOrder::Explicit(o) => o[i] as usize,
        }
    }

    /// The groups in this CPU's order: its own group first.
    pub fn iter(&self) -> impl Iterator<Item = &CpuMask> + '_ {
        (0..self.all.len()).map(move |i| &self.all[self.index(i)])
    }

    /// The groups with their CPU lists, in this CPU's order.
    pub fn groups(&self) -> impl Iterator<Item = Group<'_>> + '_ {
        (0..self.all.len()).map(move |i| self.shared_group(self.index(i)))
    }
}

impl std::ops::Index<usize> for SchedGroups {
    type Output = CpuMask;
    fn index(&self, i: usize) -> &CpuMask {
        &self.all[SchedGroups::index(self, i)]
    }
}

impl<'a> IntoIterator for &'a SchedGroups {
    type Item = &'a CpuMask;
    type IntoIter = Box<dyn Iterator<Item = &'a CpuMask> + 'a>;
    fn into_iter(self) -> Self::IntoIter {
        Box::new(self.iter())
    }
}

impl PartialEq for SchedGroups {
    fn eq(&self, other: &SchedGroups) -> bool {
        (&self.all, &self.cpus, &self.order) == (&other.all, &other.cpus, &other.order)
    }
}

impl Eq for SchedGroups {}

impl PartialEq<Vec<CpuMask>> for SchedGroups {
    fn eq(&self, other: &Vec<CpuMask>) -> bool {
        self.len() == other.len() && self.iter().zip(other).all(|(a, b)| a == b)
    }
}

/// One distinct domain span's groups, shared by the CPUs it spans.
struct SharedGroups {
    all: Arc<[CpuMask]>,
    cpus: Arc<[Box<[u32]>]>,
    /// The first group's id; the others follow.
    first_id: u32,
    /// The group each CPU of the span belongs to (u32::MAX outside).
    owner: Vec<u32>,
    /// Whether the groups partition the span (no NUMA overlap).
    disjoint: bool,
    /// Whether they partition it in runs: walking the span in CPU order
    /// meets each group's CPUs together (group ids, given in the order
    /// first met, never go down). Then every CPU's walk takes the groups in
    /// their order, rotated to start at its own.
    runs: bool,
}

impl SharedGroups {
    /// The groups in their order, started at group `first`.
    fn rotated(&self, first: u32) -> SchedGroups {
        SchedGroups { all: self.all.clone(), cpus: self.cpus.clone(), order: GroupOrder::Rotate(first), first_id: self.first_id }
    }
}

impl Topology {
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
        self.domains_of(cpu, &mut BTreeMap::new(), &mut 0)
    }

    /// [`Topology::sched_domains`] of every CPU, with each distinct domain
    /// span's groups built once and shared (memory and time grow with
    /// CPUs x levels, not CPUs squared). The shared groups are numbered
    /// ([`Group::id`]) from 0 across the machine.
    pub fn all_sched_domains(&self) -> Vec<Vec<SchedDomain>> {
        let (mut shared, mut ids) = (BTreeMap::new(), 0);
        (0..self.nr_cpus()).map(|c| self.domains_of(c, &mut shared, &mut ids)).collect()
    }

    fn domains_of(&self, cpu: usize, shared: &mut BTreeMap<(usize, CpuMask), SharedGroups>, ids: &mut u32) -> Vec<SchedDomain> {
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
            let key = (k, span.clone());
            let sg = shared.entry(key).or_insert_with(|| {
                let sg = self.shared_groups(&span, &specs[..k], *ids);
                *ids += sg.all.len() as u32;
                sg
            });
            let groups = self.groups_from(cpu, &span, sg);
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

    /// The groups of the domain `span` whose candidate levels below are
    /// `lower`, built once: every member's child span (`get_group()`),
    /// each distinct one stored once, in the order the span's first CPU
    /// meets them.
    fn shared_groups(&self, span: &CpuMask, lower: &[LevelSpec], first_id: u32) -> SharedGroups {
        let mut owner = vec![u32::MAX; self.nr_cpus()];
        let mut index: BTreeMap<CpuMask, u32> = BTreeMap::new();
        let mut all = Vec::new();
        for member in span.iter() {
            let group = self.child_span(member, lower);
            let next = all.len() as u32;
            let g = *index.entry(group.clone()).or_insert_with(|| {
                all.push(group);
                next
            });
            owner[member] = g;
        }
        // Overlapping groups (NUMA levels) cover more than the span's weight.
        let disjoint = all.iter().map(CpuMask::weight).sum::<usize>() == span.weight();
        let runs = disjoint && span.iter().map(|m| owner[m]).is_sorted();
        // Shared words: fork balancing returns the idlest group's mask.
        let all: Arc<[CpuMask]> = all.into_iter().map(CpuMask::shared).collect();
        SharedGroups { cpus: cpu_lists(&all), all, first_id, owner, disjoint, runs }
    }

    /// `cpu`'s order of the shared groups, in the kernel's order: walk the
    /// span with `for_each_cpu_wrap` from `cpu` and add each not yet
    /// covered CPU's child span (`build_sched_groups()`).
    fn groups_from(&self, cpu: usize, span: &CpuMask, sg: &SharedGroups) -> SchedGroups {
        if sg.runs {
            // The walk from `cpu` finishes its own run, takes the later
            // groups, wraps to the earlier ones: no need to walk it (which,
            // for every CPU of a large LLC, costs CPUs squared).
            return sg.rotated(sg.owner[cpu]);
        }
        let mut order: Vec<u32> = Vec::new();
        if sg.disjoint {
            // The groups partition the span: a CPU is covered exactly when
            // its own group has been taken.
            let mut taken = vec![false; sg.all.len()];
            for member in span.iter_wrap(cpu) {
                let g = sg.owner[member];
                if !std::mem::replace(&mut taken[g as usize], true) {
                    order.push(g);
                }
            }
        } else {
            let mut covered = vec![false; self.nr_cpus()];
            for member in span.iter_wrap(cpu) {
                if covered[member] {
                    continue;
                }
                let g = sg.owner[member];
                order.push(g);
                for c in sg.all[g as usize].iter() {
                    if let Some(x) = covered.get_mut(c) {
                        *x = true;
                    }
                }
            }
        }
        let len = sg.all.len() as u32;
        let first = order.first().copied().unwrap_or(0);
        let rotation = order.len() == sg.all.len() && order.iter().enumerate().all(|(i, &g)| g == (first + i as u32) % len);
        if rotation {
            return sg.rotated(first);
        }
        // Overlapping groups (NUMA levels) may not all be taken: keep
        // exactly those this CPU's walk took.
        if order.len() != sg.all.len() {
            return SchedGroups::new(order.iter().map(|&g| sg.all[g as usize].clone()).collect());
        }
        SchedGroups { all: sg.all.clone(), cpus: sg.cpus.clone(), order: GroupOrder::Explicit(order.into()), first_id: sg.first_id }
    }
}

/// Whether `sd_init()` leaves `SD_PREFER_SIBLING` set on this level.
fn prefers_sibling(level: DomainLevel) -> bool {
    level != DomainLevel::Numa
}

/// A domain with `sd_init()`'s defaults for its level.
fn initial_domain(spec: LevelSpec, span: &CpuMask, groups: SchedGroups) -> SchedDomain {
    let weight = span.weight();
    let lo = span.first().unwrap_or(0);
    let contiguous = weight > 0 && span.next_set(lo + weight).is_none() && span.test(lo + weight - 1);
    let (span_lo, span_hi) = if contiguous { (lo as u32, (lo + weight) as u32) } else { (0, 0) };
    let mut domain = SchedDomain {
        level: spec.level,
        // Shared words: a balance pass copies its domain (a 4,096-CPU
        // span is 512 bytes), and a copy is then a reference count.
        span: span.clone().shared(),
        span_weight: weight as u32,
        span_lo,
        span_hi,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machine::topology::presets;

    fn preset(name: &str) -> Topology {
        Topology::preset(name).unwrap()
    }

    fn mask(nr: usize, cpus: &[usize]) -> CpuMask {
        CpuMask::from_cpus(nr, cpus.iter().copied())
    }

    #[test]
    fn spans_agrees_with_the_mask_contiguous_or_not() {
        for &(name, _) in crate::machine::topology::presets() {
            let t = preset(name);
            for cpu in 0..t.nr_cpus() {
                for d in t.sched_domains(cpu) {
                    for c in 0..t.nr_cpus() + 2 {
                        assert_eq!(d.spans(c), d.span.test(c), "{name}: CPU {cpu}'s {:?} domain, CPU {c}", d.level);
                    }
                }
            }
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

    /// The kernel's walk done per CPU with its own masks (the build before
    /// groups were shared), as a reference.
    fn reference_groups(t: &Topology, cpu: usize, span: &CpuMask, lower: &[LevelSpec]) -> Vec<CpuMask> {
        let mut covered = CpuMask::new(t.nr_cpus());
        let mut groups = Vec::new();
        for member in span.iter_wrap(cpu) {
            if covered.test(member) {
                continue;
            }
            let group = t.child_span(member, lower);
            covered.or_assign(&group);
            groups.push(group);
        }
        groups
    }

    #[test]
    fn shared_groups_are_each_cpus_own_walk() {
        for (name, _) in presets() {
            let t = preset(name);
            let specs = t.level_specs();
            let all = t.all_sched_domains();
            for (cpu, domains) in all.iter().enumerate() {
                assert_eq!(*domains, t.sched_domains(cpu), "{name} cpu {cpu}");
                for d in domains {
                    let k = specs.iter().position(|s| s.level == d.level && t.widen(&d.span, *s, cpu) == d.span).unwrap();
                    let want = reference_groups(&t, cpu, &d.span, &specs[..k]);
                    assert_eq!(d.groups, want, "{name} cpu {cpu} {}", d.level);
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
    fn domain_level_names() {
        assert_eq!(DomainLevel::Mc.to_string(), "MC");
        assert_eq!(DomainLevel::Numa.name(), "NUMA");
    }
}
