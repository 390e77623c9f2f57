//! schedlab: a deterministic discrete-event simulator of the Linux CPU
//! scheduler (the EEVDF fair class, the RT class and sched_ext with hosted
//! BPF C schedulers) on a modelled machine. This is the core crate; the
//! hosting of BPF C schedulers, the runner of the same scenarios on the
//! live kernel and the plots are crates above it (see the second table).
//!
//! # Layers
//!
//! Read from the bottom up; each layer imports only the layers listed
//! before it (the module doc of each folder repeats its own rule):
//!
//! | folder | what lives there | kernel counterpart |
//! |---|---|---|
//! | [`engine`] | simulated time, per-purpose RNG streams, the event queue ordered by `(time, seq)` and the running event-stream hash | — |
//! | [`machine`] | CPU masks, the machine model (nodes, packages, LLCs, cores, SMT) with its presets and lscpu / sysfs importers, the cost model | `include/linux/cpumask.h`, arch topology |
//! | [`sched`] | the simulated kernel: tasks, runqueues, the [`Sim`](sched::sim::Sim) state and event loop, the core, the fair / RT / sched_ext classes, balancing, the sched-domain builder, features, PELT, the behaviour-program interpreter | `kernel/sched/` |
//! | [`workload`] | scenarios (TOML), the world builder, the workload kinds, rt-app JSON | the user-space benchmarks |
//! | [`results`] | what a run reports: results and JSON, CSV, comparisons, sweeps, Perfetto traces, sim-vs-real agreement | `tracing`, schedstat |
//! | [`import`] | the tracefs line parser; readers of recorded scheduler traces (tracefs / trace-cmd text so far) into one event stream, and the per-task model derived from it (run bursts, sleeps ended by a timer or a waker, exits) for `schedlab import-trace` | the sched tracepoints (`include/trace/events/sched.h`) |
//!
//! Layers that not every program needs are crates of their own above this
//! one, each importing only this crate:
//!
//! | crate | what lives there | kernel counterpart |
//! |---|---|---|
//! | `schedlab-plot` (crates/schedlab-plot) | SVG and PNG charts of the results (plotters, the embedded font) | — |
//! | `schedlab-real` (crates/schedlab-real) | real mode: the same workloads as processes and threads on the live kernel, read back through schedstat and tracefs | — |
//! | `schedlab-host` (crates/schedlab-host) | hosting: BPF C schedulers compiled natively against its `shim/` (C headers and runtime) and loaded, with all the `unsafe`, as an [`ExtOps`](sched::ext::ops::ExtOps); loader profiles (`profiles/`), the shipped schedulers (`schedulers/`), the loader the world builder is given ([`workload::world::ExtLoader`]), and the front end the CLI and the Python package share | `kernel/bpf/`, libbpf |
//!
//! The core reaches no crate above it: where the simulator needs a hosted
//! scheduler, the world builder takes a loader from its caller.
//!
//! The `schedlab` binary (crates/schedlab-cli) sits on top of all of them;
//! the Python package (crates/schedlab-py) links this crate and
//! `schedlab-host` only.
//!
//! One exception to the bottom-up rule, as in the kernel: the simulated
//! kernel calls its tracepoints ([`results::trace`]), and the consumers
//! attached there (Perfetto writer, utilisation timeline) live with the
//! results.
//!
//! # Determinism
//!
//! The same scenario and seed give byte-identical output: time is integer
//! nanoseconds, events are ordered by `(time, seq)`, every random draw comes
//! from a named stream ([`engine::rng::Stream`]), and hash-ordered maps are
//! banned (clippy.toml).

#![deny(missing_docs)]
#![deny(unreachable_pub)]

pub mod engine;
pub mod import;
pub mod machine;
pub mod results;
pub mod sched;
pub mod workload;
