//! Integration tests of hosting: whole simulations from small TOML
//! scenarios with hosted sched_ext schedulers, the loader profiles, the
//! shipped scenarios' golden hashes and the fuzz corpus. The core crate's
//! own (crates/schedlab/tests/integration) need no hosted scheduler.

mod bpfrt;
mod cid;
mod determinism;
mod ecosystem;
mod experiments;
mod ext_cgroup;
mod ext;
mod faults;
mod fuzz_corpus;
mod golden;
mod host;
mod layered;
mod profiles;
mod scheds;
mod upstream;

use std::path::{Path, PathBuf};

use schedlab::results::report::Results;
use schedlab_host::{HostedScheduler, LoadConfig};
use schedlab::workload::scenario::Scenario;
use schedlab::sched::sim::Sim;

/// Builds a simulator from scenario text, with invariant checks after every event.
pub fn sim(toml: &str) -> Sim {
    let s = Scenario::parse(toml, "test.toml", &[]).unwrap_or_else(|e| panic!("{e}"));
    let mut sim = schedlab_host::world::build(&s, "test.toml").unwrap_or_else(|e| panic!("{e}"));
    sim.check_invariants = true;
    sim
}

/// Runs a scenario and returns its results.
pub fn run(toml: &str) -> (Sim, Results) {
    let mut s = sim(toml);
    s.run();
    let r = Results::collect(&s, "test", "eevdf");
    (s, r)
}

pub fn runtime_of(sim: &Sim, name: &str) -> u64 {
    sim.tasks.iter().find(|t| t.name == name).unwrap_or_else(|| panic!("no task {name}")).stats.runtime_ns
}

/// This crate's directory (crates/schedlab-host).
pub fn manifest() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).to_path_buf()
}

/// A shipped scheduler's source (schedulers/NAME.bpf.c).
pub fn shipped(name: &str) -> PathBuf {
    manifest().join("../../schedulers").join(format!("{name}.bpf.c"))
}

/// The compile cache shared by the integration tests, apart from the
/// user's, so tests never see objects another build left.
pub fn cfg() -> LoadConfig {
    LoadConfig { cache_dir: Some(std::env::temp_dir().join("schedlab-test-cache")), ..LoadConfig::default() }
}

/// Compiles (or finds in the cache) and loads a BPF C scheduler.
pub fn load_with(path: &Path, cfg: &LoadConfig) -> HostedScheduler {
    schedlab_host::load_owned(path, cfg).unwrap_or_else(|e| panic!("{e}"))
}

#[path = "../../../schedlab/tests/common/mix.rs"]
mod mix;
pub use mix::hog_mix;
