//! The user-space half of the scx arena library: what `ArenaLib::setup()`
//! does with a loaded object before the attach (see
//! [`crate::profile::arena_lib`] for the steps), carried out on
//! a hosted scheduler.

use super::loader::{self, Rodata};
use super::state::Inner;
use super::{HostError, HostedScheduler};
use crate::profile::arena_lib::ArenaLibSetup;
use schedlab::sched::sim::Sim;

/// Places the `__arena_global` objects at the top of the object's arena,
/// as libbpf lays out the `.addr_space.1` section at the end of the arena
/// (zero-filled), and points each object's pointer at its place.
pub(super) fn place_arena_globals(inner: &mut Inner, pages: &loader::Pages, vars: &[Rodata]) -> Result<(), String> {
    if vars.is_empty() {
        return Ok(());
    }
    let total: usize = vars.iter().map(|v| (v.elem_size as usize).next_multiple_of(64)).sum();
    let Some(arena) = inner.maps.iter_mut().find_map(|m| m.arena()) else {
        return Err(format!("`{}` is an __arena_global but the object has no BPF_MAP_TYPE_ARENA map", vars[0].name));
    };
    let mut at = arena.place_top(total).ok_or_else(|| format!("the arena is too small for its {total} bytes of __arena_global objects"))?;
    for v in vars {
        loader::write_rodata(pages, v, 0, &at.to_ne_bytes()[..v.size as usize])?;
        at += (v.elem_size as usize).next_multiple_of(64);
    }
    Ok(())
}

fn words(v: &[u64]) -> Vec<u8> {
    v.iter().flat_map(|w| w.to_ne_bytes()).collect()
}

impl HostedScheduler {
    /// The value of a C constant expression the load asked for
    /// ([`super::LoadConfig::c_consts`]), e.g. `sizeof(struct task_ctx)`.
    pub fn c_const(&self, expr: &str) -> Option<i64> {
        self.consts.iter().find(|(t, _)| t == expr).map(|(_, s)| *s)
    }

    /// Writes `data` at `addr` the way user space writes into the arena
    /// through its mapping; the pages must have been allocated.
    fn arena_write(&self, addr: u64, data: &[u8]) -> Result<(), String> {
        let mut inner = self.state.inner.borrow_mut();
        let ok = inner.maps.iter_mut().filter_map(|m| m.arena()).any(|a| a.touch(addr as usize, data.len()));
        if !ok {
            return Err(format!("{addr:#x} (+{} bytes), which is not memory of the arena (a user page fault)", data.len()));
        }
        // SAFETY: the range lies in pages of an arena mapping, now
        // allocated (checked above), which stay mapped while `inner` lives.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), addr as usize as *mut u8, data.len()) };
        Ok(())
    }

    fn arena_prog(&self, sim: &mut Sim, prog: &str, ctx: &mut [u8]) -> Result<(), String> {
        let ret = self.run_syscall_on(sim, prog, ctx, 0).map_err(|e: HostError| e.to_string())?;
        if ret != 0 {
            return Err(format!("SEC(\"syscall\") {prog}() returned {ret}; the loader stops here"));
        }
        Ok(())
    }

    /// `ArenaLib::setup()`: the arena, then the topology tree.
    pub(crate) fn arena_lib_setup(&self, sim: &mut Sim, s: &ArenaLibSetup) -> Result<(), String> {
        let size = self.c_const(&format!("sizeof({})", s.task_ctx)).ok_or_else(|| format!("sizeof({}) was not recorded at load", s.task_ctx))? as u64;
        let mut init = words(&[s.static_pages, size, s.task_ctx_align]);
        self.arena_prog(sim, "arena_init", &mut init)?;
        let mut topo: Vec<u8> = s.max_children.iter().flat_map(|c| c.to_ne_bytes()).collect();
        self.arena_prog(sim, "arena_topology_init", &mut topo)?;
        for n in &s.nodes {
            let mut alloc = words(&[0]);
            self.arena_prog(sim, "arena_alloc_mask", &mut alloc)?;
            let bitmap = u64::from_ne_bytes(alloc[..8].try_into().expect("8 bytes"));
            self.arena_write(bitmap, &words(&n.mask)).map_err(|e| format!("arena_alloc_mask() returned a bitmap at {e}"))?;
            let mut node = words(&[bitmap, 0, n.id]);
            self.arena_prog(sim, "arena_topology_node_init", &mut node).map_err(|e| format!("topology node {}: {e}", n.id))?;
        }
        Ok(())
    }
}
