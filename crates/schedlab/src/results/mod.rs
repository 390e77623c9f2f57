//! The results layer: what a run reports, in every form.
//!
//! - [`report`]: the results of one run, as JSON and as the summary table;
//! - [`csv`]: the same numbers flattened into CSV tables;
//! - [`compare`]: run summaries and side-by-side comparison tables;
//! - [`sweep`]: grids of seeds and parameters, stored resumably, aggregated;
//! - [`trace`]: the scheduler's tracepoint hooks and their consumers (the
//!   streaming Perfetto writer, the utilisation timeline);
//! - [`agreement`]: the checks that compare a real run with a simulated one;
//! - [`agree`]: how far a simulation's figures are from the real run's.
//!
//! May import: [`crate::engine`], [`crate::machine`], [`crate::sched`] (to
//! read a finished `Sim`) and [`crate::workload`]. The one reference the
//! other way is the simulated kernel calling its tracepoints in [`trace`],
//! as the kernel calls its trace events.

pub mod agree;
pub mod agreement;
pub mod compare;
pub mod csv;
pub mod report;
pub mod sweep;
pub mod trace;
