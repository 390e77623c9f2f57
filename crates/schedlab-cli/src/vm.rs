//! `schedlab run --real --vm`: boots a sched_ext kernel under qemu.

use std::path::{Path, PathBuf};

use schedlab::scenario::Scenario;

use crate::real::{RealArgs, RealFailure};

pub fn run(_args: &RealArgs, _path: &Path, _s: &Scenario, _sets: &[String], _json: Option<PathBuf>, _quiet: bool) -> Result<(), RealFailure> {
    Err((1, "--vm: not built yet".into()))
}
