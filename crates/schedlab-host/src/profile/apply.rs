//! Carrying out a [`Plan`] on a hosted scheduler, in the order a libbpf
//! loader does: (open) resize arrays and set rodata, set ops flags, (load)
//! update maps, write .bss/.data, write members of map elements and run the
//! SEC("syscall") programs of the load phase; those of the attach phase
//! run right after the attach
//! ([`schedlab::sched::ext::ops::ExtOps::attached`]).
//!
//! Resizes happen inside [`crate::load`] (from
//! [`load_config`]), since the arrays need their storage before anything
//! runs.

use super::expr::Value;
use super::resolve::{Phase, Plan};
use crate::{HostError, HostedScheduler, LoadConfig};
use schedlab::sched::sim::Sim;

/// A boxed error from the hosting layer, kept as the cause.
type Cause = Box<dyn std::error::Error + Send + Sync>;

/// Why a [`Plan`] could not be carried out (or written for scx-load).
/// Each names the profile line it came from (`origin`).
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    /// An ops flag the kernel does not define.
    #[error("unknown ops flag `{flag}`; valid: {valid}")]
    UnknownFlag {
        /// The flag as written.
        flag: String,
        /// The valid names, comma-separated.
        valid: String,
    },
    /// A rodata, .bss or .data write was refused.
    #[error("{origin}: profile of {who}: {err}")]
    Write {
        /// The profile line.
        origin: String,
        /// The scheduler.
        who: String,
        /// Why.
        err: Cause,
    },
    /// `bpf_map_update_elem()` failed.
    #[error("{origin}: bpf_map_update_elem({map}) failed: {errno}")]
    MapUpdate {
        /// The profile line.
        origin: String,
        /// The map.
        map: String,
        /// The (negative) errno.
        errno: i64,
    },
    /// The profile names a map the scheduler does not have.
    #[error("{origin}: no map `{map}`; the scheduler's maps are: {maps}")]
    NoMap {
        /// The profile line.
        origin: String,
        /// The map.
        map: String,
        /// The scheduler's maps, comma-separated.
        maps: String,
    },
    /// A map could not be created into a map-in-map.
    #[error("{origin}: {err}")]
    InnerMap {
        /// The profile line.
        origin: String,
        /// Why.
        err: HostError,
    },
    /// A SEC("syscall") program could not be run.
    #[error("{origin}: {err}")]
    Syscall {
        /// The profile line.
        origin: String,
        /// Why.
        err: HostError,
    },
    /// A SEC("syscall") program returned an error the loader stops on.
    #[error("{origin}: SEC(\"syscall\") {prog}() returned {ret}; {who}'s loader stops here (set on_error = \"warn\" to go on)")]
    SyscallFailed {
        /// The profile line.
        origin: String,
        /// The program.
        prog: String,
        /// Its return value.
        ret: i32,
        /// The scheduler.
        who: String,
    },
    /// The arena library's setup failed.
    #[error("{origin}: profile of {who}: arena_lib: {err}")]
    ArenaLib {
        /// The profile line.
        origin: String,
        /// The scheduler.
        who: String,
        /// Why.
        err: Cause,
    },
    /// A string write into an array element (scx-load has no such command).
    #[error("{origin}: a string cannot be written into an array element")]
    StringInArray {
        /// The profile line.
        origin: String,
    },
}

/// A value as the rodata parser reads it (booleans as 1 and 0, which
/// `bool` and integer variables both take, as C converts them).
pub fn value_text(v: &Value) -> String {
    match v {
        Value::Bool(b) => (*b as u8).to_string(),
        other => other.to_string(),
    }
}

/// Adds what must be known at load time (resizes, the ops table) to `cfg`.
pub fn load_config(plan: &Plan, cfg: &mut LoadConfig) {
    cfg.resize.extend(plan.resize.iter().cloned());
    cfg.map_max_entries.extend(plan.map_sizes.iter().cloned());
    if let Some(a) = &plan.arena_lib {
        cfg.c_consts.push(format!("sizeof({})", a.task_ctx));
    }
    // Writes into members of array elements need offsets and sizes the
    // object records (host::paths).
    let mut known: std::collections::BTreeSet<String> = cfg.c_consts.iter().cloned().collect();
    // Paths of one shape need the same expressions: each shape is
    // expanded once (it is noted once a path of it parses). A target
    // without a member is no path and needs none.
    let mut shapes = std::collections::BTreeSet::new();
    for w in &plan.writes {
        if !w.target.contains('.') {
            continue;
        }
        let shape = crate::paths::shape(&w.target);
        if shapes.contains(&shape) {
            continue;
        }
        let exprs = crate::paths::exprs(&w.target);
        if !exprs.is_empty() {
            shapes.insert(shape);
        }
        for e in exprs {
            if known.insert(e.clone()) {
                cfg.c_consts.push(e);
            }
        }
    }
    for p in &plan.patches {
        // Map members, told apart from globals by their parenthesis.
        let shape = format!("(*{}){}", p.map, crate::paths::shape(&p.member));
        if shapes.contains(&shape) {
            continue;
        }
        let exprs = crate::paths::map_member_exprs(&p.map, &p.member);
        if !exprs.is_empty() {
            shapes.insert(shape);
        }
        for e in exprs {
            if known.insert(e.clone()) {
                cfg.c_consts.push(e);
            }
        }
    }
    if cfg.ops.is_none() {
        cfg.ops = plan.ops.clone();
    }
}

/// Everything before the attach; the attach-phase runs are kept on the
/// scheduler for [`schedlab::sched::ext::ops::ExtOps::attached`].
pub fn before_attach(h: &HostedScheduler, sim: &mut Sim, plan: &Plan) -> Result<(), ApplyError> {
    let who = &plan.scheduler;
    for w in &plan.writes {
        let done: Result<(), Cause> = if crate::paths::is_path(&w.target) {
            h.set_path(&w.target, &w.value).map_err(Cause::from)
        } else {
            h.set_value(&w.target, &value_text(&w.value)).map_err(Cause::from)
        };
        done.map_err(|err| ApplyError::Write { origin: w.origin.clone(), who: who.clone(), err })?;
    }
    let bits = plan.flag_bits()?;
    if plan.replace_flags || bits != 0 {
        h.set_ops_flags(bits, plan.replace_flags);
    }
    for m in &plan.maps {
        match h.map_update(&m.map, &m.key, &m.value, 0) {
            Some(0) => {}
            Some(errno) => return Err(ApplyError::MapUpdate { origin: m.origin.clone(), map: m.map.clone(), errno }),
            None => return Err(ApplyError::NoMap { origin: m.origin.clone(), map: m.map.clone(), maps: h.map_names().join(", ") }),
        }
    }
    for m in &plan.inner_maps {
        h.create_inner_map(&m.outer, m.slot, m.map_type, m.key_size, m.value_size, m.max_entries)
            .map_err(|err| ApplyError::InnerMap { origin: m.origin.clone(), err })?;
    }
    let nr_cpus = sim.nr_cpus() as u32;
    for p in &plan.patches {
        h.patch_map(&p.map, p.key, p.cpu, nr_cpus, &p.member, &p.bytes)
            .map_err(|e| ApplyError::Write { origin: p.origin.clone(), who: who.clone(), err: e.into() })?;
    }
    let mut later = Vec::new();
    for r in &plan.runs {
        if r.phase == Phase::Attach {
            later.push(r.clone());
            continue;
        }
        let mut ctx = r.ctx.clone();
        let ret = h.run_syscall_on(sim, &r.prog, &mut ctx, r.cpu).map_err(|err| ApplyError::Syscall { origin: r.origin.clone(), err })?;
        if ret != 0 && r.fail {
            return Err(ApplyError::SyscallFailed { origin: r.origin.clone(), prog: r.prog.clone(), ret, who: who.clone() });
        }
    }
    if let Some(a) = &plan.arena_lib {
        h.arena_lib_setup(sim, a).map_err(|e| ApplyError::ArenaLib { origin: a.origin.clone(), who: who.clone(), err: e.into() })?;
    }
    h.run_after_attach(later);
    Ok(())
}
