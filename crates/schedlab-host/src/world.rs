//! Scenarios with a hosted sched_ext scheduler: the core's world builder
//! ([`schedlab::workload::world`]) builds the machine, the tasks and the
//! cgroups, asks the [`ExtLoader`] it is given for the scheduler and
//! attaches it; [`Hosting`] is that loader for BPF C schedulers. It finds
//! the source (a shipped scheduler, a published crate or a path), resolves
//! the loader profile, compiles and loads the scheduler and does the
//! profile's and the scenario's set-up.
//!
//! [`build`] and [`build_on`] are the core's builders with [`Hosting`]:
//! what the front ends and the tests call to build any scenario.

use std::path::{Path, PathBuf};
use std::rc::Rc;

use schedlab::machine::topology::Topology;
use schedlab::sched::ext::ops::ExtOps;
use schedlab::sched::sim::Sim;
use schedlab::workload::scenario::{Scenario, ScenarioError, SchedulerSpec};
use schedlab::workload::world::{self, ExtLoader};

/// Builds a ready-to-run simulator for any scenario, compiling and loading
/// its sched_ext scheduler if it has one.
pub fn build(s: &Scenario, file: &str) -> Result<Sim, ScenarioError> {
    build_on(s, file, world::topology(s, file)?)
}

/// [`build`] on a given machine (the scenario's own `[machine]` table
/// chooses only the costs then).
pub fn build_on(s: &Scenario, file: &str, topo: Topology) -> Result<Sim, ScenarioError> {
    world::build_with(s, file, topo, &Hosting)
}

/// The loader of hosted BPF C schedulers, for the core's builder.
#[derive(Clone, Copy, Debug, Default)]
pub struct Hosting;

impl ExtLoader for Hosting {
    /// Compiles and loads the scenario's sched_ext scheduler, then applies
    /// its loader profile's set-up and the scenario's rodata options.
    fn load(&self, sim: &mut Sim, s: &Scenario, file: &str) -> Result<Rc<dyn ExtOps>, ScenarioError> {
        let bad = |msg: String| ScenarioError::invalid(file, None, msg);
        let spec = &s.scheduler;
        let name = spec.sched.as_deref().ok_or_else(|| {
            let names: Vec<&str> = crate::shipped::SHIPPED.iter().map(|s| s.0).collect();
            bad(format!("scheduler.sched: missing: name a shipped scheduler ({}) or a .bpf.c file", names.join(", ")))
        })?;
        let path = ext_source(name, file).map_err(|e| bad(format!("scheduler.sched: {e}")))?;
        let mut cfg = crate::LoadConfig::default();
        let mut options = Vec::new();
        for (k, v) in &spec.options {
            let text = option_text(v).ok_or_else(|| bad(format!("scheduler.options.{k}: {v} is not a number, boolean or string")))?;
            options.push((k.clone(), text));
        }
        cfg.ops_flags = spec.ops_flags.clone();
        let plan = loader_plan(spec, name, &path, &sim.topo, file)?;
        if let Some(p) = &plan {
            crate::profile::apply::load_config(p, &mut cfg);
        }
        cfg.includes = ext_includes(&spec.include, file).map_err(|e| bad(e.to_string()))?;
        cfg.op_timeout_ns = spec.op_timeout.map(|d| d.0);
        let ops = crate::load(&path, &cfg).map_err(|e| bad(format!("scheduler.sched {name}: {e}")))?;
        sim.scx.origin = ops.origin().cloned();
        // The loader's set-up first, then the scenario's own options on top
        // (as --sched-set overrides what the loader chose).
        if let Some(p) = &plan {
            crate::profile::apply::before_attach(&ops, sim, p).map_err(|e| bad(format!("scheduler.profile ({name}): {e}")))?;
        }
        for (k, v) in &options {
            ops.set_rodata(k, v).map_err(|e| bad(format!("scheduler.options.{k}: {e}")))?;
        }
        Ok(ops)
    }
}

/// A sched_ext scheduler source or include directory that cannot be found.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    /// The shipped scheduler cannot be written to the cache.
    #[error("{}: {err}", dir.display())]
    Cache {
        /// The cache directory.
        dir: PathBuf,
        /// The I/O error.
        err: std::io::Error,
    },
    /// A published crate that cannot be fetched.
    #[error(transparent)]
    Fetch(#[from] crate::fetch::FetchError),
    /// A scheduler directory without one main `.bpf.c`.
    #[error(transparent)]
    Dir(#[from] crate::source::ResolveError),
    /// A name that is no shipped scheduler, crate or path.
    #[error("no scheduler {name:?}: expected a shipped one ({shipped}), crate:NAME[@VERSION] (e.g. crate:scx_bpfland), or the path of a .bpf.c file or a scheduler's directory")]
    Unknown {
        /// The name given.
        name: String,
        /// The shipped schedulers, comma-separated.
        shipped: String,
    },
    /// A `scheduler.include` entry that is not a directory.
    #[error("scheduler.include: {0:?} is not a directory (relative paths are taken from the scenario's directory)")]
    NotADirectory(String),
}

/// The path of the scheduler a scenario names: a shipped one, a published
/// crate (`crate:NAME[@VERSION]`, fetched into the cache once), or a
/// `.bpf.c` file or scheduler directory relative to the scenario.
pub fn ext_source(name: &str, scenario_file: &str) -> Result<PathBuf, SourceError> {
    let cache = crate::compile::cache_dir();
    if let Some(p) = crate::shipped::materialize(name, &cache).map_err(|err| SourceError::Cache { dir: cache.clone(), err })? {
        return Ok(p);
    }
    if name.starts_with("crate:") {
        let root = crate::fetch::fetch(name, &cache)?;
        return Ok(root.join("src/bpf/main.bpf.c"));
    }
    let direct = PathBuf::from(name);
    let rel = Path::new(scenario_file).parent().map(|d| d.join(name)).unwrap_or_else(|| direct.clone());
    for cand in [rel, direct] {
        if cand.is_file() {
            return Ok(cand);
        }
        if cand.is_dir() {
            return crate::source::main_of_dir(&cand).map_err(SourceError::Dir);
        }
    }
    let names: Vec<&str> = crate::shipped::SHIPPED.iter().map(|s| s.0).collect();
    Err(SourceError::Unknown { name: name.to_string(), shipped: names.join(", ") })
}

/// `scheduler.include` directories, relative to the scenario file (an
/// absolute path, or one that exists from the current directory, as is).
pub fn ext_includes(dirs: &[String], scenario_file: &str) -> Result<Vec<PathBuf>, SourceError> {
    dirs.iter()
        .map(|d| {
            let direct = PathBuf::from(d);
            let rel = Path::new(scenario_file).parent().map(|p| p.join(d)).unwrap_or_else(|| direct.clone());
            [rel, direct]
                .into_iter()
                .find(|c| c.is_dir())
                .ok_or_else(|| SourceError::NotADirectory(d.clone()))
        })
        .collect()
}

/// The loader profile a scenario's scheduler uses (`scheduler.profile`,
/// else the shipped one of the scheduler it names), resolved for the
/// machine with `scheduler.args`; None without a profile.
pub fn loader_plan(
    spec: &SchedulerSpec,
    name: &str,
    source: &Path,
    topo: &Topology,
    file: &str,
) -> Result<Option<crate::profile::Plan>, ScenarioError> {
    use crate::profile::{self, args, resolve, Machine, Profile};
    let bad = |msg: String| ScenarioError::invalid(file, None, msg);
    let prof = match spec.profile.as_deref() {
        Some("none") => None,
        Some(p) => {
            let rel = Path::new(file).parent().map(|d| d.join(p)).filter(|c| c.is_file()).unwrap_or_else(|| PathBuf::from(p));
            Some(Profile::load(&rel).map_err(|e| bad(format!("scheduler.profile: {e}")))?)
        }
        None => profile::scheduler_of(name, source).and_then(|(s, _)| profile::shipped(&s)),
    };
    let argv = args::split_words(spec.args.as_deref().unwrap_or("")).map_err(|e| bad(format!("scheduler.args: {e}")))?;
    let Some(prof) = prof else {
        if !argv.is_empty() {
            return Err(bad(format!(
                "scheduler.args: {name} has no loader profile to read its flags with; give one with scheduler.profile (--sched-profile FILE)"
            )));
        }
        return Ok(None);
    };
    let plan = resolve::resolve(&prof, &Machine::new(topo), &argv).map_err(|e| bad(format!("scheduler.profile: {e}")))?;
    Ok(Some(plan))
}

/// A rodata value as text, for the loader's parser.
fn option_text(v: &toml::Value) -> Option<String> {
    match v {
        toml::Value::Boolean(b) => Some(b.to_string()),
        toml::Value::Integer(i) => Some(i.to_string()),
        toml::Value::String(s) => Some(s.clone()),
        _ => None,
    }
}
