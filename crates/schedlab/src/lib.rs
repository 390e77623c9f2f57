//! schedlab: a deterministic discrete-event simulator of the Linux CPU
//! scheduler (EEVDF and RT classes, sched_ext to follow) on a modelled machine.

pub mod agreement;
pub mod compare;
pub mod cost;
pub mod cpumask;
pub mod csv;
pub mod engine;
pub mod exec;
pub mod features;
pub mod plot;
pub mod report;
pub mod real;
pub mod rng;
pub mod rtapp;
pub mod scenario;
pub mod sweep;
pub mod sched;
pub mod sim;
pub mod task;
pub mod time;
pub mod topology;
pub mod trace;
pub mod workload;
pub mod world;
