//! The sub-scheduler kfuncs (kernel/sched/ext/sub.c, 7.3) for the only
//! scheduler schedlab hosts: the root, with no sub-schedulers attached.
//!
//! The kernel looks a child up by cgroup id in a table that holds only
//! attached sub-schedulers (scx_find_sub_sched()), never the root. With
//! none attached every lookup fails, so:
//!
//! - scx_bpf_sub_dispatch(): false;
//! - scx_bpf_sub_grant(): -ENODEV; scx_bpf_sub_revoke(): nothing;
//! - scx_bpf_sub_kill_bstr(): -ENODEV;
//! - scx_bpf_sub_caps(0, ...): the root's own caps, which are every cap on
//!   every cid (scx_init_root_caps()); for any other id -ENODEV.
//!
//! Argument checks come first, in the kernel's order: the cap kfuncs need
//! a cid-form scheduler, caps outside __SCX_CAP_ALL are an error, and a
//! cmask must be arena memory with a sane header (scx_cmask_ref_init()).
//! ops.sub_attach / sub_detach / sub_caps_updated / sub_ecaps_updated are
//! never called: nothing attaches, and the root gets no ecaps
//! notifications.

use schedlab::sched::sim::Sim;

use super::cid::{self, Cmask, Phase};
use super::state::{bad, with_ctx, HostState};

const ENODEV: i32 = 19;
const EINVAL: i32 = 22;
const EOPNOTSUPP: i32 = 95;
/// __SCX_CAP_ALL.
const CAP_ALL: u64 = 0xf;

/// The cap kfuncs' "requires a cid-form scheduler" check.
fn cid_form(sim: &mut Sim, h: &HostState) -> bool {
    cid::kf(sim);
    if cid::is_cid(h) {
        return true;
    }
    bad(sim, "sub-cap kfuncs require a cid-form scheduler".into());
    false
}

/// A BPF-supplied cmask, checked (Err: -EINVAL, already reported).
fn cmask_arg(sim: &mut Sim, h: &HostState, m: *mut u8, what: &str) -> Result<(Cmask, u32, u32), i32> {
    let np = sim.nr_cpus() as u32;
    if m.is_null() || !cid::arena_holds(h, m as usize, 16) {
        bad(sim, format!("invalid {what} (-{EINVAL})"));
        return Err(-EINVAL);
    }
    let c = Cmask(m);
    let (base, nr) = match c.check(np) {
        Ok(r) => r,
        Err(e) => {
            bad(sim, format!("invalid {what} ({e})"));
            return Err(e);
        }
    };
    if !cid::arena_holds(h, m as usize, cid::cmask_bytes(nr)) {
        bad(sim, format!("invalid {what} (-{EINVAL})"));
        return Err(-EINVAL);
    }
    Ok((c, base, nr))
}

/// No sub-scheduler is attached: nothing to dispatch.
pub(super) extern "C" fn scx_bpf_sub_dispatch(_cgroup_id: u64) -> bool {
    with_ctx(|sim, _| {
        cid::kf(sim);
        false
    })
}

/// sub_cap_preamble(): the child is looked up before the caps are checked.
pub(super) extern "C" fn scx_bpf_sub_grant(_cgroup_id: u64, _caps: u64, _cmask: *const u8, _denied: *mut u8) -> i32 {
    with_ctx(|sim, h| if cid_form(sim, h) { -ENODEV } else { -EOPNOTSUPP })
}

pub(super) extern "C" fn scx_bpf_sub_revoke(_cgroup_id: u64, _caps: u64, _cmask: *const u8) {
    with_ctx(|sim, h| {
        cid_form(sim, h);
    })
}

pub(super) extern "C" fn schedlab_sub_kill(_cgroup_id: u64, _msg: *const std::ffi::c_char) -> i32 {
    with_ctx(|sim, h| if cid_form(sim, h) { -ENODEV } else { -EOPNOTSUPP })
}

/// scx_bpf_sub_caps(): `out`'s active range gets the union of `caps`
/// over the target's cap masks. The root holds every cap on every cid, so
/// that is all of the range, or none of it for `caps == 0`.
pub(super) extern "C" fn scx_bpf_sub_caps(cgroup_id: u64, caps: u64, out: *mut u8) -> i32 {
    with_ctx(|sim, h| {
        if !cid_form(sim, h) {
            return -EOPNOTSUPP;
        }
        if caps & !CAP_ALL != 0 {
            bad(sim, format!("invalid caps 0x{caps:x}"));
            return -EINVAL;
        }
        if cgroup_id != 0 {
            return -ENODEV;
        }
        if h.inner.borrow().cid.as_ref().map(|s| s.phase) != Some(Phase::Live) {
            bad(sim, "scx_bpf_sub_caps() called before caps storage is initialized".into());
            return -ENODEV;
        }
        let (m, base, nr) = match cmask_arg(sim, h, out, "out") {
            Ok(r) => r,
            Err(e) => return e,
        };
        m.assign_range(base, nr, caps != 0);
        0
    })
}
