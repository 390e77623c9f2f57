//! Carrying out a [`Plan`] on a hosted scheduler, in the order a libbpf
//! loader does: (open) resize arrays and set rodata, set ops flags, (load)
//! update maps, write .bss/.data and run the SEC("syscall") programs of the
//! load phase; those of the attach phase run right after the attach
//! ([`crate::sched::ext::ops::ExtOps::attached`]).
//!
//! Resizes happen inside [`crate::sched::ext::host::load`] (from
//! [`load_config`]), since the arrays need their storage before anything
//! runs.

use super::expr::Value;
use super::resolve::{Phase, Plan};
use crate::sched::ext::host::{HostedScheduler, LoadConfig};
use crate::sched::sim::Sim;

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
    if let Some(a) = &plan.arena_lib {
        cfg.c_consts.push(format!("sizeof({})", a.task_ctx));
    }
    // Writes into members of array elements need offsets and sizes the
    // object records (host::paths).
    for w in &plan.writes {
        for e in crate::sched::ext::host::paths::exprs(&w.target) {
            if !cfg.c_consts.contains(&e) {
                cfg.c_consts.push(e);
            }
        }
    }
    if cfg.ops.is_none() {
        cfg.ops = plan.ops.clone();
    }
}

/// Everything before the attach; the attach-phase runs are kept on the
/// scheduler for [`crate::sched::ext::ops::ExtOps::attached`].
pub fn before_attach(h: &HostedScheduler, sim: &mut Sim, plan: &Plan) -> Result<(), String> {
    let who = &plan.scheduler;
    for w in &plan.writes {
        if crate::sched::ext::host::paths::is_path(&w.target) {
            h.set_path(&w.target, &w.value).map_err(|e| format!("{}: profile of {who}: {e}", w.origin))?;
        } else {
            h.set_value(&w.target, &value_text(&w.value)).map_err(|e| format!("{}: profile of {who}: {e}", w.origin))?;
        }
    }
    let bits = plan.flag_bits()?;
    if plan.replace_flags || bits != 0 {
        h.set_ops_flags(bits, plan.replace_flags);
    }
    for m in &plan.maps {
        match h.map_update(&m.map, &m.key, &m.value, 0) {
            Some(0) => {}
            Some(err) => return Err(format!("{}: bpf_map_update_elem({}) failed: {err}", m.origin, m.map)),
            None => {
                return Err(format!("{}: no map `{}`; the scheduler's maps are: {}", m.origin, m.map, h.map_names().join(", ")))
            }
        }
    }
    let mut later = Vec::new();
    for r in &plan.runs {
        if r.phase == Phase::Attach {
            later.push(r.clone());
            continue;
        }
        let mut ctx = r.ctx.clone();
        let ret = h.run_syscall_on(sim, &r.prog, &mut ctx, r.cpu).map_err(|e| format!("{}: {e}", r.origin))?;
        if ret != 0 && r.fail {
            return Err(format!(
                "{}: SEC(\"syscall\") {}() returned {ret}; {who}'s loader stops here (set on_error = \"warn\" to go on)",
                r.origin, r.prog
            ));
        }
    }
    if let Some(a) = &plan.arena_lib {
        h.arena_lib_setup(sim, a).map_err(|e| format!("{}: profile of {who}: arena_lib: {e}", a.origin))?;
    }
    h.run_after_attach(later);
    Ok(())
}
