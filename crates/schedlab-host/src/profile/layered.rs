//! The `[layer_specs]` step of a loader profile: scx_layered's layer
//! configuration, read from the binary's own positional arguments (its
//! `LayerSpec` JSON, `f:FILE`, `file:FILE` or inline) and written into the
//! BPF object as its user space does it (src/main.rs of scx_layered 1.1.4:
//! the spec defaults of `main()`, `verify_layer_specs()`,
//! `Scheduler::init_layers()`, the layer counts of `Scheduler::init()`,
//! `init_cpus()`, the LLC and node proximity maps, `init_node_ctx()`, and
//! the first `refresh_cpumasks()`).
//!
//! ```toml
//! [profile]
//! positional = "layer specs"         # the binary takes its specs as positional arguments
//!
//! [layer_specs]
//! default = "scx_layered.json"       # used when none is given (a shipped file or a path
//!                                    # relative to the profile)
//! ```
//!
//! Why Rust and not `[[set]]` entries: the translation walks a JSON
//! document three levels deep (layers, OR blocks, AND matchers), maps
//! enum tags to numbers with their own payload fields, converts floats
//! (util ranges, `xllc_mig_min_us`), and the set-up around it shuffles
//! per-CPU layer orders and proximity maps with `fastrand` seeded by CPU
//! and LLC and allocates CPUs to layers core by core: no `[[set]]`
//! expression says that sanely. The step is one named translation, like
//! `[arena_lib]`; what it writes goes through the same plan as every other
//! entry (writes into `layers[i].matches[j].matches[k].kind`, per-CPU map
//! members, `SEC("syscall")` runs).
//!
//! Not reproduced: the user-space refresh loop that grows and shrinks
//! Confined and Grouped layers with their utilization every `--interval`.
//! The layers keep the allocation of the loader's first refresh at zero
//! utilization: each Confined or Grouped layer its `cpus_range` minimum
//! (rounded up to whole cores), Open layers the rest. A layer whose range
//! is fixed (`cpus_range: [n, n]`, `cpus_range_frac: [f, f]`) is sized as
//! the binary sizes it at any time. Also refused, with the reason: cgroup
//! regexes and templates (the binary's cgroup-filesystem watcher),
//! `membw_gb` (PMU bandwidth tracking), growth algorithms other than
//! Sticky, Linear and Reverse, and hint matchers (a pinned BPF map).

use super::expr::Value;
use super::layered_topo as topo;
use super::machine::Machine;
use super::resolve::{Run, Write};
use serde::Deserialize;
use std::collections::BTreeMap;
use toml::Spanned;

/// The `[layer_specs]` table as written.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LayerSpecsDef {
    /// The layer specs used when the command line gives none: a shipped
    /// data file ([`super::SHIPPED_DATA`]) or a path relative to the profile.
    pub default: Spanned<String>,
}

/// `enum consts` of scx_layered's intf.h.
pub(crate) const MAX_LAYERS: usize = 16;
const MAX_LAYER_MATCH_ORS: usize = 32;
const NR_LAYER_MATCH_KINDS: usize = 26;
const MAX_COMM: usize = 16;
const MAX_PATH: usize = 4096;
const MAX_LAYER_NAME: usize = 128;
const MAX_CPUS_U8: usize = 64;
const MAX_CPUS: usize = 512;
const MAX_NUMA_NODES: usize = 32;
const MAX_LLCS: usize = 64;
const MIN_LAYER_WEIGHT: u32 = 1;
const MAX_LAYER_WEIGHT: u32 = 10000;
const DEFAULT_LAYER_WEIGHT: u32 = 100;
/// `2 * SCX_SLICE_DFL / 1000` and `4 * SCX_SLICE_DFL / 1000` (µs).
const DFL_DISALLOW_OPEN_AFTER_US: u64 = 40_000;
const DFL_DISALLOW_PREEMPT_AFTER_US: u64 = 80_000;

/// `enum layer_kind`.
const LAYER_KIND_OPEN: i128 = 0;
const LAYER_KIND_GROUPED: i128 = 1;
const LAYER_KIND_CONFINED: i128 = 2;

/// One matcher of an AND block, as config.rs's `LayerMatch` (externally
/// tagged: `{"CommPrefix": "x"}`).
#[derive(Clone, Debug, Deserialize)]
pub(crate) enum Match {
    CgroupPrefix(String),
    CgroupSuffix(String),
    CgroupContains(String),
    CgroupRegex(String),
    CommPrefix(String),
    CommPrefixExclude(String),
    PcommPrefix(String),
    PcommPrefixExclude(String),
    NiceAbove(i32),
    NiceBelow(i32),
    NiceEquals(i32),
    UIDEquals(u32),
    GIDEquals(u32),
    PIDEquals(u32),
    PPIDEquals(u32),
    TGIDEquals(u32),
    NSPIDEquals(u64, u32),
    NSEquals(u32),
    CmdJoin(String),
    IsGroupLeader(bool),
    IsKthread(bool),
    UsedGpuTid(bool),
    UsedGpuPid(bool),
    AvgRuntime(u64, u64),
    HintEquals(u64),
    SystemCpuUtilBelow(f64),
    DsqInsertBelow(f64),
    NumaNode(u32),
}

/// The fields every layer kind has (config.rs's `LayerCommon`; unknown
/// fields are ignored, as the binary's serde ignores them).
#[derive(Clone, Debug, Deserialize)]
pub(crate) struct Common {
    #[serde(default)]
    min_exec_us: u64,
    #[serde(default)]
    yield_ignore: f64,
    #[serde(default)]
    pub(crate) slice_us: u64,
    #[serde(default)]
    fifo: bool,
    #[serde(default)]
    pub(crate) preempt: bool,
    #[serde(default)]
    preempt_first: bool,
    #[serde(default)]
    pub(crate) exclusive: bool,
    #[serde(default)]
    skip_remote_node: bool,
    #[serde(default)]
    prev_over_idle_core: bool,
    #[serde(default)]
    pub(crate) weight: u32,
    #[serde(default)]
    disallow_open_after_us: Option<u64>,
    #[serde(default)]
    disallow_preempt_after_us: Option<u64>,
    #[serde(default)]
    xllc_mig_min_us: f64,
    #[serde(default)]
    pub(crate) growth_algo: Growth,
    #[serde(default)]
    perf: u64,
    #[serde(default)]
    pub(crate) nodes: Vec<usize>,
    #[serde(default)]
    pub(crate) llcs: Vec<usize>,
    #[serde(default)]
    placement: Placement,
    #[serde(default)]
    member_expire_ms: u64,
    /// Cross-node migration gating: (0, 0) turns it off (always allowed).
    #[serde(default = "xnuma_threshold")]
    pub(crate) xnuma_threshold: (f64, f64),
}

/// config.rs's `default_xnuma_threshold()`.
fn xnuma_threshold() -> (f64, f64) {
    (0.6, 0.7)
}

/// `LayerGrowthAlgo`: the order in which a layer takes cores.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
pub(crate) enum Growth {
    #[default]
    Sticky,
    Linear,
    Reverse,
    Random,
    Topo,
    RoundRobin,
    BigLittle,
    LittleBig,
    NodeSpread,
    NodeSpreadReverse,
    NodeSpreadRandom,
    CpuSetSpread,
    CpuSetSpreadReverse,
    CpuSetSpreadRandom,
    RandomTopo,
    StickyDynamic,
}

/// `LayerPlacement`.
#[derive(Clone, Copy, Debug, Default, Deserialize)]
enum Placement {
    #[default]
    Standard,
    Sticky,
    Floating,
}

/// `LayerKind` (externally tagged: `{"Confined": {...}}`).
#[derive(Clone, Debug, Deserialize)]
pub(crate) enum Kind {
    Confined {
        util_range: (f64, f64),
        #[serde(default)]
        cpus_range: Option<(usize, usize)>,
        #[serde(default)]
        cpus_range_frac: Option<(f64, f64)>,
        #[serde(default)]
        membw_gb: Option<f64>,
        #[serde(default)]
        protected: bool,
        #[serde(flatten)]
        common: Common,
    },
    Grouped {
        util_range: (f64, f64),
        #[serde(default)]
        cpus_range: Option<(usize, usize)>,
        #[serde(default)]
        cpus_range_frac: Option<(f64, f64)>,
        #[serde(default)]
        membw_gb: Option<f64>,
        #[serde(default)]
        protected: bool,
        #[serde(default)]
        idle_confined: bool,
        #[serde(flatten)]
        common: Common,
    },
    Open {
        #[serde(flatten)]
        common: Common,
    },
}

impl Kind {
    pub(crate) fn common(&self) -> &Common {
        match self {
            Kind::Confined { common, .. } | Kind::Grouped { common, .. } | Kind::Open { common } => common,
        }
    }
    fn common_mut(&mut self) -> &mut Common {
        match self {
            Kind::Confined { common, .. } | Kind::Grouped { common, .. } | Kind::Open { common } => common,
        }
    }
    pub(crate) fn is_open(&self) -> bool {
        matches!(self, Kind::Open { .. })
    }
    pub(crate) fn is_grouped(&self) -> bool {
        matches!(self, Kind::Grouped { .. })
    }
    fn bpf(&self) -> i128 {
        match self {
            Kind::Confined { .. } => LAYER_KIND_CONFINED,
            Kind::Grouped { .. } => LAYER_KIND_GROUPED,
            Kind::Open { .. } => LAYER_KIND_OPEN,
        }
    }
    /// `resolve_cpus_pct_range()`: (min, max) CPUs; None for Open.
    pub(crate) fn cpus_range(&self, nr_cpus: usize) -> Option<Result<(usize, usize), String>> {
        let (range, frac) = match self {
            Kind::Confined { cpus_range, cpus_range_frac, .. } | Kind::Grouped { cpus_range, cpus_range_frac, .. } => (cpus_range, cpus_range_frac),
            Kind::Open { .. } => return None,
        };
        Some(match (range, frac) {
            (Some(_), Some(_)) => Err("cpus_range cannot be used with cpus_range_frac; give one".into()),
            (Some(r), None) => Ok(*r),
            (None, Some((a, b))) => {
                if !(0.0..=1.0).contains(a) || !(0.0..=1.0).contains(b) {
                    return Some(Err("cpus_range_frac values must be between 0.0 and 1.0".into()));
                }
                let lo = ((nr_cpus as f64) * a).round_ties_even() as usize;
                let hi = ((nr_cpus as f64) * b).round_ties_even() as usize;
                Ok((lo.max(1), hi.max(1).min(nr_cpus)))
            }
            (None, None) => Ok((0, nr_cpus)),
        })
    }
}

/// One layer (config.rs's `LayerSpec`).
#[derive(Clone, Debug, Deserialize)]
pub(crate) struct Spec {
    pub(crate) name: String,
    #[serde(default)]
    #[allow(dead_code)] // read by the binary's stats only
    comment: Option<String>,
    #[serde(default)]
    template: Option<serde_json::Value>,
    pub(crate) matches: Vec<Vec<Match>>,
    pub(crate) kind: Kind,
}

/// Reads one positional spec argument as `LayerSpec::parse()` does:
/// `f:FILE` / `file:FILE`, or the JSON itself. `shipped` names an
/// embedded file by its name when no such path exists.
pub(crate) fn parse_arg(input: &str, shipped: &dyn Fn(&str) -> Option<&'static str>) -> Result<Vec<Spec>, String> {
    let (name, text) = match input.split_once(':').filter(|(p, _)| *p == "f" || *p == "file") {
        Some((_, path)) => {
            let text = match std::fs::read_to_string(path) {
                Ok(t) => t,
                Err(e) => match shipped(path) {
                    Some(t) => t.to_string(),
                    None => return Err(format!("{path}: cannot read it ({e}); give f:PATH of a layer config (a JSON array of layer specs)")),
                },
            };
            (path.to_string(), text)
        }
        None => ("inline spec".to_string(), input.to_string()),
    };
    serde_json::from_str::<Vec<Spec>>(&text).map_err(|e| {
        let what = e.to_string();
        let what = what.split(" at line ").next().unwrap_or(&what).to_string();
        format!(
            "{name}:{}:{}: {what}; scx_layered's layer config is a JSON array of {{\"name\", \"matches\": [[{{\"CommPrefix\": \"x\"}}]], \"kind\": {{\"Confined\"|\"Grouped\"|\"Open\": {{...}}}}}}",
            e.line(),
            e.column()
        )
    })
}

/// `main()`'s spec defaults, then `verify_layer_specs()`, then the checks
/// of `Scheduler::init()` and `Layer::new()`, then what this step does not
/// reproduce. `slice_us` is the `--slice-us` flag.
pub(crate) fn verify(specs: &mut [Spec], slice_us: u64, m: &Machine) -> Result<(), String> {
    if specs.is_empty() {
        return Err("no layer spec; give at least one (the last one with \"matches\": [[]])".into());
    }
    // Scheduler::init() and CpuPool::new(): the BPF side's fixed sizes.
    for (what, n, max) in [("CPUs", m.nr_cpus, MAX_CPUS), ("NUMA nodes", m.nr_nodes, MAX_NUMA_NODES), ("LLCs", m.nr_llcs, MAX_LLCS)] {
        if n > max {
            return Err(format!("the machine has {n} {what}; scx_layered 1.1.4 handles at most {max}: use a smaller machine"));
        }
    }
    if specs.len() > MAX_LAYERS {
        return Err(format!("{} layer specs; scx_layered takes at most {MAX_LAYERS}", specs.len()));
    }
    let n = specs.len();
    for (idx, spec) in specs.iter_mut().enumerate() {
        let at = |m: String| format!("layer {idx} ({:?}): {m}", spec.name);
        let c = spec.kind.common_mut();
        if c.slice_us == 0 {
            c.slice_us = slice_us;
        }
        if c.weight == 0 {
            c.weight = DEFAULT_LAYER_WEIGHT;
        }
        c.weight = c.weight.clamp(MIN_LAYER_WEIGHT, MAX_LAYER_WEIGHT);
        if c.preempt {
            c.disallow_open_after_us = Some(u64::MAX);
            c.disallow_preempt_after_us = Some(u64::MAX);
        } else {
            c.disallow_open_after_us.get_or_insert(DFL_DISALLOW_OPEN_AFTER_US);
            c.disallow_preempt_after_us.get_or_insert(DFL_DISALLOW_PREEMPT_AFTER_US);
        }
        if idx < n - 1 {
            if spec.matches.is_empty() {
                return Err(at("a non-terminal spec needs matches; give at least one OR block".into()));
            }
        } else if spec.matches.len() != 1 || !spec.matches[0].is_empty() {
            return Err(at("the terminal (last) spec must have an empty match: \"matches\": [[]]".into()));
        }
        if spec.matches.len() > MAX_LAYER_MATCH_ORS {
            return Err(at(format!("{} OR blocks; at most {MAX_LAYER_MATCH_ORS}", spec.matches.len())));
        }
        if spec.template.is_some() {
            return Err(at("\"template\" is not reproduced (the binary expands it from the cgroup filesystem); remove it".into()));
        }
        for (o, ands) in spec.matches.iter().enumerate() {
            if ands.len() > NR_LAYER_MATCH_KINDS {
                return Err(at(format!("OR block {o} has {} matchers; at most {NR_LAYER_MATCH_KINDS}", ands.len())));
            }
            for mt in ands {
                let long = |s: &str, max: usize, what: &str| -> Result<(), String> {
                    // copy_into_cstr() needs room for the NUL.
                    if s.len() >= max {
                        return Err(at(format!("OR block {o}: {what} {s:?} is {} bytes; at most {} fit", s.len(), max - 1)));
                    }
                    Ok(())
                };
                match mt {
                    Match::CgroupPrefix(s) | Match::CgroupSuffix(s) | Match::CgroupContains(s) => long(s, MAX_PATH, "cgroup path")?,
                    Match::CommPrefix(s) | Match::CommPrefixExclude(s) => long(s, MAX_COMM, "comm prefix")?,
                    Match::PcommPrefix(s) | Match::PcommPrefixExclude(s) => long(s, MAX_COMM, "process name prefix")?,
                    Match::CmdJoin(s) => long(s, MAX_COMM, "join command")?,
                    Match::CgroupRegex(re) => {
                        return Err(at(format!("OR block {o}: CgroupRegex({re:?}) is not reproduced (the binary matches it in its cgroup-filesystem watcher); use CgroupPrefix, CgroupSuffix or CgroupContains")))
                    }
                    Match::HintEquals(_) | Match::SystemCpuUtilBelow(_) | Match::DsqInsertBelow(_) => {
                        return Err(at(format!("OR block {o}: hint matchers are not reproduced (tasks set hints through a pinned BPF map); remove them")))
                    }
                    Match::NumaNode(id) if !m.node.contains(&(*id as usize)) => {
                        return Err(at(format!("OR block {o}: NumaNode({id}): the machine has no such node ({} nodes)", m.nr_nodes)))
                    }
                    _ => {}
                }
            }
        }
        if let Kind::Confined { util_range, membw_gb, .. } | Kind::Grouped { util_range, membw_gb, .. } = &spec.kind {
            if util_range.0 < 0.0 || util_range.1 < 0.0 || util_range.0 >= util_range.1 {
                return Err(at(format!("invalid util_range ({}, {}); give [low, high] with 0 <= low < high", util_range.0, util_range.1)));
            }
            if membw_gb.is_some() {
                return Err(at("membw_gb is not reproduced (the binary measures memory bandwidth with PMU events); remove it".into()));
            }
        }
        if let Some(r) = spec.kind.cpus_range(m.nr_cpus) {
            let (lo, hi) = r.map_err(at)?;
            if lo > hi || (matches!(spec.kind, Kind::Confined { .. }) && hi == 0) {
                return Err(at(format!("invalid cpus_range ({lo}, {hi}); give [min, max] with min <= max (and max > 0 for Confined)")));
            }
        }
        let c = spec.kind.common();
        if !matches!(c.growth_algo, Growth::Sticky | Growth::Linear | Growth::Reverse) {
            return Err(at(format!("growth_algo {:?} is not reproduced; use \"Sticky\" (the default), \"Linear\" or \"Reverse\"", c.growth_algo)));
        }
        if let Some(&bad) = c.nodes.iter().find(|x| !m.node.contains(x)) {
            return Err(at(format!("nodes names node {bad}, which the machine does not have (it has {} nodes)", m.nr_nodes)));
        }
        if let Some(&bad) = c.llcs.iter().find(|x| !m.llc.contains(x)) {
            return Err(at(format!("llcs names LLC {bad}, which the machine does not have (it has {} LLCs)", m.nr_llcs)));
        }
        for (what, ids) in [("nodes", &c.nodes), ("llcs", &c.llcs)] {
            let mut seen = std::collections::BTreeSet::new();
            if let Some(d) = ids.iter().find(|&&x| !seen.insert(x)) {
                return Err(at(format!("{what} names {d} twice; name each once")));
            }
        }
    }
    Ok(())
}

/// `enum layer_match_kind`, the payload writes and `exclude` of one
/// matcher (`Scheduler::init_layers()`).
fn match_fields(mt: &Match) -> (i128, Vec<(&'static str, Value)>, bool) {
    let s = |x: &String| Value::Str(x.clone());
    let i = |x: i128| Value::Int(x);
    let b = |x: bool| Value::Bool(x);
    match mt {
        Match::CgroupPrefix(x) => (0, vec![("cgroup_prefix", s(x))], false),
        Match::CommPrefix(x) => (1, vec![("comm_prefix", s(x))], false),
        Match::CommPrefixExclude(x) => (1, vec![("comm_prefix", s(x))], true),
        Match::PcommPrefix(x) => (2, vec![("pcomm_prefix", s(x))], false),
        Match::PcommPrefixExclude(x) => (2, vec![("pcomm_prefix", s(x))], true),
        Match::NiceAbove(x) => (3, vec![("nice", i(*x as i128))], false),
        Match::NiceBelow(x) => (4, vec![("nice", i(*x as i128))], false),
        Match::NiceEquals(x) => (5, vec![("nice", i(*x as i128))], false),
        Match::UIDEquals(x) => (6, vec![("user_id", i(*x as i128))], false),
        Match::GIDEquals(x) => (7, vec![("group_id", i(*x as i128))], false),
        Match::PIDEquals(x) => (8, vec![("pid", i(*x as i128))], false),
        Match::PPIDEquals(x) => (9, vec![("ppid", i(*x as i128))], false),
        Match::TGIDEquals(x) => (10, vec![("tgid", i(*x as i128))], false),
        Match::NSPIDEquals(ns, pid) => (11, vec![("nsid", i(*ns as i128)), ("pid", i(*pid as i128))], false),
        Match::NSEquals(ns) => (12, vec![("nsid", i(*ns as i128))], false),
        Match::CmdJoin(x) => (13, vec![("comm_prefix", s(x))], false),
        Match::IsGroupLeader(x) => (14, vec![("is_group_leader", b(*x))], false),
        Match::IsKthread(x) => (15, vec![("is_kthread", b(*x))], false),
        Match::UsedGpuTid(x) => (16, vec![("used_gpu_tid", b(*x))], false),
        Match::UsedGpuPid(x) => (17, vec![("used_gpu_pid", b(*x))], false),
        Match::AvgRuntime(lo, hi) => (18, vec![("min_avg_runtime_us", i(*lo as i128)), ("max_avg_runtime_us", i(*hi as i128))], false),
        Match::CgroupSuffix(x) => (19, vec![("cgroup_suffix", s(x))], false),
        Match::CgroupContains(x) => (20, vec![("cgroup_substr", s(x))], false),
        // Refused by verify().
        Match::CgroupRegex(_) => (21, vec![], false),
        Match::HintEquals(h) => (22, vec![("hint", i(*h as i128))], false),
        Match::SystemCpuUtilBelow(t) => (23, vec![("system_cpu_util_below", i((*t * 10000.0) as u64 as i128))], false),
        Match::DsqInsertBelow(t) => (24, vec![("dsq_insert_below", i((*t * 10000.0) as u64 as i128))], false),
        Match::NumaNode(n) => (25, vec![("numa_node_id", i(*n as i128))], false),
    }
}

/// What the step resolves to: writes (rodata and .bss, in the loader's
/// order), map-member writes, and `SEC("syscall")` runs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LayeredSetup {
    /// Rodata and .bss writes, before load.
    pub writes: Vec<Write>,
    /// Map members user space writes after load.
    pub patches: Vec<MapPatch>,
    /// `SEC("syscall")` runs: `refresh_node_ctx` (load), then
    /// `refresh_layer_cpumasks` and `refresh_node_ctx` (attach).
    pub runs: Vec<Run>,
    /// The layers' CPUs after the first allocation, for tests and messages.
    pub layer_cpus: Vec<Vec<usize>>,
}

/// A write of `bytes` into member `member` (`.a[i].b`) of element `key` of
/// map `map` (CPU `cpu`'s copy of a per-CPU map).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MapPatch {
    /// The map.
    pub map: String,
    /// Its (u32) key.
    pub key: u32,
    /// The CPU whose copy (per-CPU maps; 0 otherwise).
    pub cpu: u32,
    /// The member path, starting with `.`.
    pub member: String,
    /// The bytes, little-endian.
    pub bytes: Vec<u8>,
    /// Where it came from, for messages.
    pub origin: String,
}

/// Resolves the step: `args` are the positional arguments (the specs),
/// `vars` the flags, `default` the specs when none are given.
pub(crate) fn setup(
    m: &Machine,
    vars: &BTreeMap<String, Value>,
    args: &[String],
    default: &str,
    shipped: &dyn Fn(&str) -> Option<&'static str>,
    origin: &str,
) -> Result<LayeredSetup, String> {
    let mut specs = Vec::new();
    let inputs: Vec<String> = if args.is_empty() { vec![format!("f:{default}")] } else { args.to_vec() };
    for (i, input) in inputs.iter().enumerate() {
        specs.extend(parse_arg(input, shipped).map_err(|e| if args.is_empty() { e } else { format!("specs[{i}]: {e}") })?);
    }
    let flag = |n: &str| vars.get(n).and_then(|v| v.int().ok()).unwrap_or(0);
    let slice_us = flag("slice_us") as u64;
    verify(&mut specs, slice_us, m)?;
    let mut out = LayeredSetup::default();
    let w = |out: &mut LayeredSetup, target: String, value: Value| out.writes.push(Write { target, value, origin: origin.to_string() });
    // Scheduler::init(): the layer counts by kind and preemption.
    let count = |f: &dyn Fn(&Spec) -> bool| Value::Int(specs.iter().filter(|s| f(s)).count() as i128);
    w(&mut out, "nr_layers".into(), Value::Int(specs.len() as i128));
    w(&mut out, "nr_op_layers".into(), count(&|s| s.kind.is_open() && s.kind.common().preempt));
    w(&mut out, "nr_on_layers".into(), count(&|s| s.kind.is_open() && !s.kind.common().preempt));
    w(&mut out, "nr_gp_layers".into(), count(&|s| s.kind.is_grouped() && s.kind.common().preempt));
    w(&mut out, "nr_gn_layers".into(), count(&|s| s.kind.is_grouped() && !s.kind.common().preempt));
    w(&mut out, "nr_excl_layers".into(), count(&|s| s.kind.common().exclusive));
    // The binary stores the microsecond values here as they are.
    let open = specs.iter().filter(|s| s.kind.is_open()).map(|s| s.kind.common());
    let min_open = open.clone().filter_map(|c| c.disallow_open_after_us).min().unwrap_or(u64::MAX);
    let min_preempt = open.filter_map(|c| c.disallow_preempt_after_us).min().unwrap_or(u64::MAX);
    let or_dfl = |v: u64, d: u64| Value::Int(if v == u64::MAX { d } else { v } as i128);
    w(&mut out, "min_open_layer_disallow_open_after_ns".into(), or_dfl(min_open, DFL_DISALLOW_OPEN_AFTER_US));
    w(&mut out, "min_open_layer_disallow_preempt_after_ns".into(), or_dfl(min_preempt, DFL_DISALLOW_PREEMPT_AFTER_US));
    init_layers(&mut out, &specs, origin);
    topo::setup(&mut out, &specs, m, vars, origin)?;
    Ok(out)
}

/// `Scheduler::init_layers()`.
fn init_layers(out: &mut LayeredSetup, specs: &[Spec], origin: &str) {
    let mut w = |target: String, value: Value| out.writes.push(Write { target, value, origin: origin.to_string() });
    for (l, spec) in specs.iter().enumerate() {
        let ly = format!("layers[{l}]");
        for (o, ands) in spec.matches.iter().enumerate() {
            for (a, mt) in ands.iter().enumerate() {
                let at = format!("{ly}.matches[{o}].matches[{a}]");
                let (kind, fields, exclude) = match_fields(mt);
                w(format!("{at}.exclude"), Value::Bool(exclude));
                w(format!("{at}.kind"), Value::Int(kind));
                for (f, v) in fields {
                    w(format!("{at}.{f}"), v);
                }
            }
            w(format!("{ly}.matches[{o}].nr_match_ands"), Value::Int(ands.len() as i128));
        }
        w(format!("{ly}.nr_match_ors"), Value::Int(spec.matches.len() as i128));
        w(format!("{ly}.kind"), Value::Int(spec.kind.bpf()));
        let c = spec.kind.common();
        let slice_ns = c.slice_us * 1000;
        let int = |x: u64| Value::Int(x as i128);
        w(format!("{ly}.slice_ns"), int(slice_ns));
        w(format!("{ly}.fifo"), Value::Bool(c.fifo));
        w(format!("{ly}.min_exec_ns"), int(c.min_exec_us * 1000));
        let step = if c.yield_ignore > 0.999 {
            0
        } else if c.yield_ignore < 0.001 {
            slice_ns
        } else {
            (slice_ns as f64 * (1.0 - c.yield_ignore)) as u64
        };
        w(format!("{ly}.yield_step_ns"), int(step));
        let mut name = spec.name.clone();
        // copy_into_cstr() keeps the terminating NUL.
        while name.len() >= MAX_LAYER_NAME {
            name.pop();
        }
        w(format!("{ly}.name"), Value::Str(name));
        w(format!("{ly}.preempt"), Value::Bool(c.preempt));
        w(format!("{ly}.preempt_first"), Value::Bool(c.preempt_first));
        w(format!("{ly}.excl"), Value::Bool(c.exclusive));
        w(format!("{ly}.skip_remote_node"), Value::Bool(c.skip_remote_node));
        w(format!("{ly}.prev_over_idle_core"), Value::Bool(c.prev_over_idle_core));
        w(format!("{ly}.growth_algo"), Value::Int(c.growth_algo as i128));
        w(format!("{ly}.weight"), int(c.weight as u64));
        w(format!("{ly}.member_expire_ms"), int(c.member_expire_ms));
        let ns = |us: Option<u64>| match us.unwrap_or(0) {
            u64::MAX => int(u64::MAX),
            v => int(v.saturating_mul(1000)),
        };
        w(format!("{ly}.disallow_open_after_ns"), ns(c.disallow_open_after_us));
        w(format!("{ly}.disallow_preempt_after_ns"), ns(c.disallow_preempt_after_us));
        w(format!("{ly}.xllc_mig_min_ns"), int((c.xllc_mig_min_us * 1000.0) as u64));
        w(format!("{ly}.perf"), int(c.perf.min(u32::MAX as u64)));
        w(format!("{ly}.task_place"), Value::Int(c.placement as i128));
        let protected = match &spec.kind {
            Kind::Confined { protected, .. } | Kind::Grouped { protected, .. } => *protected,
            Kind::Open { .. } => false,
        };
        w(format!("{ly}.is_protected"), Value::Bool(protected));
        w(format!("{ly}.idle_confined"), Value::Bool(matches!(spec.kind, Kind::Grouped { idle_confined: true, .. })));
        // No cpuset (templates are refused): every bit set.
        for k in 0..MAX_CPUS_U8 {
            w(format!("{ly}.cpuset[{k}]"), Value::Int(0xff));
        }
        w(format!("{ly}.has_cpuset"), Value::Bool(false));
    }
    // layer_iteration_order: by weight, ascending (stable).
    let mut order: Vec<usize> = (0..specs.len()).collect();
    order.sort_by_key(|&i| specs[i].kind.common().weight);
    for (idx, l) in order.into_iter().enumerate() {
        w(format!("layer_iteration_order[{idx}]"), Value::Int(l as i128));
    }
}

#[cfg(test)]
mod tests {
    use super::super::{resolve, shipped, Machine};
    use schedlab::machine::topology::Topology;

    fn plan(topo: &Topology, argv: &[&str]) -> Result<super::super::Plan, String> {
        let p = shipped("scx_layered").expect("shipped profile");
        let argv: Vec<String> = argv.iter().map(|s| s.to_string()).collect();
        resolve(&p, &Machine::new(topo), &argv).map_err(|e| e.to_string())
    }

    fn write<'a>(p: &'a super::super::Plan, t: &str) -> Option<&'a super::Value> {
        p.writes.iter().rev().find(|w| w.target == t).map(|w| &w.value)
    }

    #[test]
    fn the_default_config_is_written_as_init_layers_writes_it() {
        let p = plan(&Topology::flat(4).unwrap(), &[]).unwrap();
        use super::Value::{Bool, Int, Str};
        assert_eq!(write(&p, "nr_layers"), Some(&Int(3)));
        assert_eq!(write(&p, "nr_on_layers"), Some(&Int(1)));
        assert_eq!(write(&p, "nr_gn_layers"), Some(&Int(1)));
        assert_eq!(write(&p, "nr_op_layers"), Some(&Int(0)));
        assert_eq!(write(&p, "layers[0].kind"), Some(&Int(2)), "Confined");
        assert_eq!(write(&p, "layers[1].kind"), Some(&Int(1)), "Grouped");
        assert_eq!(write(&p, "layers[2].kind"), Some(&Int(0)), "Open");
        assert_eq!(write(&p, "layers[0].matches[0].matches[0].kind"), Some(&Int(1)), "MATCH_COMM_PREFIX");
        assert_eq!(write(&p, "layers[0].matches[0].matches[0].comm_prefix"), Some(&Str("mixed0-yield".into())));
        assert_eq!(write(&p, "layers[1].matches[0].matches[1].kind"), Some(&Int(3)), "MATCH_NICE_ABOVE");
        assert_eq!(write(&p, "layers[1].matches[0].matches[1].nice"), Some(&Int(9)));
        assert_eq!(write(&p, "layers[1].matches[0].nr_match_ands"), Some(&Int(2)));
        assert_eq!(write(&p, "layers[1].nr_match_ors"), Some(&Int(2)));
        assert_eq!(write(&p, "layers[2].nr_match_ors"), Some(&Int(1)));
        assert_eq!(write(&p, "layers[2].matches[0].nr_match_ands"), Some(&Int(0)));
        assert_eq!(write(&p, "layers[0].slice_ns"), Some(&Int(20_000_000)), "--slice-us's default");
        assert_eq!(write(&p, "layers[0].weight"), Some(&Int(100)));
        assert_eq!(write(&p, "layers[0].disallow_open_after_ns"), Some(&Int(40_000_000)));
        assert_eq!(write(&p, "layers[2].name"), Some(&Str("rest".into())));
        assert_eq!(write(&p, "layers[0].matches[0].matches[0].exclude"), Some(&Bool(false)));
        // The first allocation: Linear growth, rotated per layer.
        assert_eq!(p.layer_cpus, [vec![0], vec![2], vec![1, 3]]);
        assert_eq!(write(&p, "layers[0].cpus[0]"), Some(&Int(0b0001)));
        assert_eq!(write(&p, "layers[2].cpus[0]"), Some(&Int(0b1010)));
        assert_eq!(write(&p, "fallback_cpus[0]"), Some(&Int(1)));
        assert!(p.runs.iter().any(|r| r.prog == "refresh_layer_cpumasks" && r.phase == super::super::Phase::Attach));
        // Per-CPU contexts: the CPU id, no layer, the proximity map.
        let patch = |cpu: u32, m: &str| p.patches.iter().find(|x| x.map == "cpu_ctxs" && x.cpu == cpu && x.member == m).map(|x| x.bytes.clone());
        assert_eq!(patch(3, ".cpu"), Some(3i32.to_le_bytes().to_vec()));
        assert_eq!(patch(3, ".layer_id"), Some(16u32.to_le_bytes().to_vec()));
        assert_eq!(patch(1, ".prox_map.cpus"), Some([1u16, 0, 2, 3].iter().flat_map(|x| x.to_le_bytes()).collect()));
        assert_eq!(patch(1, ".prox_map.sys_end"), Some(4u32.to_le_bytes().to_vec()));
    }

    #[test]
    fn a_config_file_from_the_command_line_replaces_the_default() {
        let dir = std::env::temp_dir().join(format!("schedlab-layered-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("one.json");
        std::fs::write(
            &f,
            r#"[{"name": "pinned", "matches": [[{"PcommPrefix": "db"}], [{"TGIDEquals": 7}]],
                 "kind": {"Confined": {"util_range": [0.1, 0.9], "cpus_range": [2, 2], "growth_algo": "Reverse", "slice_us": 500}}},
                {"name": "all", "matches": [[]], "kind": {"Open": {"preempt": true}}}]"#,
        )
        .unwrap();
        let p = plan(&Topology::flat(8).unwrap(), &[&format!("f:{}", f.display())]).unwrap();
        use super::Value::{Int, Str};
        assert_eq!(write(&p, "nr_layers"), Some(&Int(2)));
        assert_eq!(write(&p, "nr_op_layers"), Some(&Int(1)));
        assert_eq!(write(&p, "layers[0].matches[0].matches[0].pcomm_prefix"), Some(&Str("db".into())));
        assert_eq!(write(&p, "layers[0].matches[1].matches[0].tgid"), Some(&Int(7)));
        assert_eq!(write(&p, "layers[0].slice_ns"), Some(&Int(500_000)));
        assert_eq!(write(&p, "layers[1].disallow_preempt_after_ns"), Some(&Int(u64::MAX as i128)), "preempting layers never lose it");
        // Reverse growth: the highest cores first.
        assert_eq!(p.layer_cpus[0], [6, 7]);
        // Inline JSON, as the binary also takes it.
        let inline = r#"[{"name": "x", "matches": [[]], "kind": {"Open": {}}}]"#;
        let p = plan(&Topology::flat(2).unwrap(), &[inline]).unwrap();
        assert_eq!(write(&p, "nr_layers"), Some(&Int(1)));
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn bad_configs_are_refused_with_the_place_and_the_fix() {
        let t = Topology::flat(4).unwrap();
        let e = plan(&t, &[r#"[{"name": "a", "matches": [[{"CommPrefx": "x"}]], "kind": {"Open": {}}}]"#]).unwrap_err();
        assert!(e.starts_with("--sched-args:0: scx_layered: specs[0]: inline spec:1:"), "{e}");
        assert!(e.contains("unknown variant `CommPrefx`, expected one of `CgroupPrefix`"), "{e}");
        let e = plan(&t, &["f:/nonexistent/layers.json"]).unwrap_err();
        assert!(e.contains("/nonexistent/layers.json: cannot read it") && e.contains("give f:PATH"), "{e}");
        let e = plan(&t, &["[{"]).unwrap_err();
        assert!(e.contains("inline spec:1:2: EOF while parsing"), "{e}");
        let e = plan(&t, &[r#"[{"name": "a", "matches": [[{"CommPrefix": "x"}]], "kind": {"Open": {}}}]"#]).unwrap_err();
        assert!(e.contains("layer 0 (\"a\"): the terminal (last) spec must have an empty match"), "{e}");
        let e = plan(&t, &[r#"[{"name": "a", "matches": [[{"CgroupRegex": "^a"}]], "kind": {"Open": {}}}, {"name": "b", "matches": [[]], "kind": {"Open": {}}}]"#]).unwrap_err();
        assert!(e.contains("CgroupRegex(\"^a\") is not reproduced"), "{e}");
        let e = plan(&t, &[r#"[{"name": "a", "matches": [[]], "kind": {"Confined": {"util_range": [0.5, 0.8], "cpus_range": [3, 3]}}}, {"name": "b", "matches": [[]], "kind": {"Confined": {"util_range": [0.5, 0.8], "cpus_range": [2, 2]}}}]"#]).unwrap_err();
        assert!(e.contains("add up to 5 CPUs, more than the machine's 4"), "{e}");
        let e = plan(&t, &[r#"[{"name": "a", "matches": [[]], "kind": {"Grouped": {"util_range": [0.8, 0.5]}}}]"#]).unwrap_err();
        assert!(e.contains("invalid util_range (0.8, 0.5)"), "{e}");
        let e = plan(&t, &[r#"[{"name": "a", "matches": [[]], "kind": {"Open": {"growth_algo": "Topo"}}}]"#]).unwrap_err();
        assert!(e.contains("growth_algo Topo is not reproduced; use \"Sticky\""), "{e}");
        let e = plan(&t, &[r#"[{"name": "a", "matches": [[]], "kind": {"Open": {"nodes": [3]}}}]"#]).unwrap_err();
        assert!(e.contains("nodes names node 3, which the machine does not have (it has 1 nodes)"), "{e}");
        let e = plan(&t, &[r#"[{"name": "a", "matches": [[{"CommPrefix": "sixteen-bytes-xx"}]], "kind": {"Open": {}}}, {"name": "b", "matches": [[]], "kind": {"Open": {}}}]"#]).unwrap_err();
        assert!(e.contains("comm prefix \"sixteen-bytes-xx\" is 16 bytes; at most 15 fit"), "{e}");
    }
}
