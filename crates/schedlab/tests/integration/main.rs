//! Integration tests: whole simulations from small TOML scenarios.

mod determinism;
mod ext;
mod fair;
mod host;
mod placement;
mod programs;
mod properties;
mod rt;
mod rtapp;
mod scheds;
mod seeds;
mod trace;
mod workloads;

#[path = "../common/perfetto.rs"]
mod perfetto;

use schedlab::report::Results;
use schedlab::scenario::Scenario;
use schedlab::sim::Sim;

/// Builds a simulator from scenario text, with invariant checks after every event.
pub fn sim(toml: &str) -> Sim {
    let s = Scenario::parse(toml, "test.toml", &[]).unwrap_or_else(|e| panic!("{e}"));
    let mut sim = schedlab::world::build(&s, "test.toml").unwrap_or_else(|e| panic!("{e}"));
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
