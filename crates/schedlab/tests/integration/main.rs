//! Integration tests: whole simulations from small TOML scenarios, on the
//! simulator alone (schedulers in Rust at most); the ones with hosted
//! sched_ext schedulers are crates/schedlab-host/tests/integration.

mod cgroup;
mod fair;
mod invariants;
mod placement;
mod programs;
mod properties;
mod rt;
mod rtapp;
mod trace;
mod workloads;

#[path = "../common/perfetto.rs"]
mod perfetto;

use std::path::{Path, PathBuf};

use schedlab::results::report::Results;
use schedlab::workload::scenario::Scenario;
use schedlab::sched::sim::Sim;

/// Builds a simulator from scenario text, with invariant checks after every event.
pub fn sim(toml: &str) -> Sim {
    let s = Scenario::parse(toml, "test.toml", &[]).unwrap_or_else(|e| panic!("{e}"));
    let mut sim = schedlab::workload::world::build(&s, "test.toml").unwrap_or_else(|e| panic!("{e}"));
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

/// This crate's directory (crates/schedlab).
pub fn manifest() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).to_path_buf()
}

#[path = "../common/mix.rs"]
mod mix;
pub use mix::hog_mix;
