//! Seed experiments: the direction of each effect the seeds report.

use schedlab::scenario::Scenario;

fn vm_throughput(vms: u32, credit: bool) -> u64 {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scenarios/seed003-vm-overcommit.toml");
    let sets = vec![format!("workload.0.vms={vms}"), "duration=\"2s\"".to_string(), format!("features.YIELD_TO_LAG_CREDIT={credit}")];
    let s = Scenario::load(std::path::Path::new(path), &sets).unwrap();
    let mut sim = schedlab::world::build(&s, path).unwrap();
    // The invariants are exercised elsewhere; this is a measurement.
    sim.check_invariants = false;
    sim.run();
    sim.metrics[0].work
}

/// Seed 003: lag credit on yield_to() raises guest throughput under 2, 3 and
/// 4 overcommitted VMs (+6.65%, +4.80%, +7.59% on real hardware).
#[test]
fn seed003_yield_to_lag_credit_raises_vm_throughput() {
    for vms in [2, 3, 4] {
        let off = vm_throughput(vms, false);
        let on = vm_throughput(vms, true);
        let gain = (on as f64 / off as f64 - 1.0) * 100.0;
        eprintln!("seed 003, {vms} VMs: {off} -> {on} guest ops ({gain:+.2}%)");
        assert!(on > off, "{vms} VMs: lag credit {on} ops vs {off} without");
    }
}
