//! Topological CPU ids, as kernel/sched/ext/cid.c numbers them (7.3), and
//! the cid kfuncs of a cid-form scheduler (`struct sched_ext_ops_cid`).
//!
//! The simulator works in CPUs; a cid-form scheduler sees cids. The
//! translation happens here and in struct_ops_cid.rs, at the host
//! boundary: op arguments (a CPU becomes its cid), values the scheduler
//! returns or passes to kfuncs (a cid becomes its CPU, an invalid one is
//! the kernel's "invalid cid" error), `SCX_DSQ_LOCAL_ON | cid` verdicts,
//! and `struct scx_cmask`s, which the host writes into the scheduler's
//! arena as the kernel does (its per-CPU set_cmask scratch and the online
//! mask, allocated before ops.init()).
//!
//! Numbering (scx_cid_init()): walk the online CPUs; take the node of the
//! lowest unnumbered CPU, then within it the LLC of its lowest unnumbered
//! CPU, then within that the core of its lowest unnumbered CPU, whose CPUs
//! get the next cids in ascending order. So a core, an LLC and a node are
//! each a contiguous cid range. Each LLC is cut into shards of at most
//! `cid_shard_size` (default 24) cids with its cores spread evenly
//! (calc_shard_layout()). Possible CPUs that are not online come last with
//! no topology; the simulator has none.

use schedlab::engine::Cpu;
use schedlab::machine::cpumask::CpuMask;
use schedlab::machine::topology::Topology;
use schedlab::sched::ext::abi::TaskStructC;
use schedlab::sched::ext::kfuncs as k;
use schedlab::sched::sim::Sim;

use super::state::{bad, with_ctx, HostState};

/// SCX_CID_SHARD_SIZE_DFL.
pub(crate) const SHARD_SIZE_DFL: u32 = 24;
/// SCX_CID_SHARD_MAX_CPUS.
pub(crate) const SHARD_MAX_CPUS: u32 = 512;
/// SCX_OPS_TID_TO_TASK.
pub(crate) const OPS_TID_TO_TASK: u64 = 1 << 8;
/// SCX_ENQ_RESCUE.
pub(crate) const ENQ_RESCUE: u64 = 1 << 34;
const EINVAL: i32 = 22;

/// `struct scx_cid_topo`: where a cid sits (-1 everywhere but the shard
/// for a cid without topology, or after scx_bpf_cid_override()).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct CidTopo {
    pub core_cid: i32,
    pub core_idx: i32,
    pub llc_cid: i32,
    pub llc_idx: i32,
    pub node_cid: i32,
    pub node_idx: i32,
    pub shard_cid: i32,
    pub shard_idx: i32,
}

/// SCX_CID_TOPO_NEG.
const TOPO_NEG: CidTopo =
    CidTopo { core_cid: -1, core_idx: -1, llc_cid: -1, llc_idx: -1, node_cid: -1, node_idx: -1, shard_cid: -1, shard_idx: -1 };

/// `struct scx_cid_tables`: the cid <-> CPU maps and the shard layout.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct CidTables {
    pub cid_to_cpu: Vec<i32>,
    pub cpu_to_cid: Vec<i32>,
    pub cid_to_shard: Vec<i32>,
    /// Each shard's NUMA node (-1: none).
    pub shard_node: Vec<i32>,
    /// Each shard's (first cid, number of cids).
    pub shards: Vec<(u32, u32)>,
    pub topo: Vec<CidTopo>,
}

/// calc_shard_layout(): (cores per shard, shards that get one core more)
/// for the CPUs of one LLC.
fn shard_layout(topo: &Topology, llc_cpus: &CpuMask, shard_size: u32) -> (u32, u32) {
    let nr_cpus = llc_cpus.weight() as u32;
    let nr_cores = llc_cpus.iter().filter(|&c| topo.smt_siblings(c).first() == Some(c)).count() as u32;
    let nr_shards = nr_cpus.div_ceil(shard_size).max(1).max(nr_cpus.div_ceil(SHARD_MAX_CPUS));
    (nr_cores / nr_shards, nr_cores % nr_shards)
}

impl CidTables {
    /// scx_cid_init() on machine `topo` with every CPU online;
    /// `shard_size` is ops.cid_shard_size (0: the default).
    pub(crate) fn build(topo: &Topology, shard_size: u32) -> CidTables {
        let n = topo.nr_cpus();
        let shard_size = if shard_size == 0 { SHARD_SIZE_DFL } else { shard_size };
        let max_cids = shard_size.min(SHARD_MAX_CPUS);
        let mut t = CidTables {
            cid_to_cpu: vec![-1; n],
            cpu_to_cid: vec![-1; n],
            cid_to_shard: vec![-1; n],
            shard_node: Vec::new(),
            shards: Vec::new(),
            topo: vec![TOPO_NEG; n],
        };
        let mut to_walk = topo.all_cpus();
        let (mut next_cid, mut next_node, mut next_llc, mut next_core) = (0i32, 0i32, 0i32, 0i32);
        while let Some(first) = to_walk.first() {
            let nid = topo.node_of(first);
            let (node_cid, node_idx) = (next_cid, next_node);
            next_node += 1;
            let mut node_cpus = to_walk.and(&topo.node_span[nid]);
            while let Some(ncpu) = node_cpus.first() {
                let mut llc_cpus = node_cpus.and(&topo.llc_span[topo.llc_of(ncpu)]);
                let (llc_cid, llc_idx) = (next_cid, next_llc);
                next_llc += 1;
                let (cores_per_shard, nr_large) = shard_layout(topo, &llc_cpus, shard_size);
                let (mut shard_local, mut cores_in_shard, mut cids_in_shard) = (0u32, 0u32, 0u32);
                let mut shard_cid = next_cid;
                let mut shard_idx = t.shard_node.len() as i32;
                t.shard_node.push(nid as i32);
                while let Some(lcpu) = llc_cpus.first() {
                    let core_cpus = llc_cpus.and(topo.smt_siblings(lcpu));
                    let (core_cid, core_idx) = (next_cid, next_core);
                    next_core += 1;
                    let cids_in_core = core_cpus.weight() as u32;
                    let max_cores = cores_per_shard + u32::from(shard_local < nr_large);
                    if cores_in_shard > 0 && (cores_in_shard >= max_cores || cids_in_shard + cids_in_core > max_cids) {
                        shard_local += 1;
                        cores_in_shard = 0;
                        cids_in_shard = 0;
                        shard_cid = next_cid;
                        shard_idx = t.shard_node.len() as i32;
                        t.shard_node.push(nid as i32);
                    }
                    cores_in_shard += 1;
                    cids_in_shard += cids_in_core;
                    for c in core_cpus.iter() {
                        let cid = next_cid;
                        next_cid += 1;
                        t.cid_to_cpu[cid as usize] = c as i32;
                        t.cpu_to_cid[c] = cid;
                        t.cid_to_shard[cid as usize] = shard_idx;
                        t.topo[cid as usize] =
                            CidTopo { core_cid, core_idx, llc_cid, llc_idx, node_cid, node_idx, shard_cid, shard_idx };
                        llc_cpus.clear(c);
                        node_cpus.clear(c);
                        to_walk.clear(c);
                    }
                }
            }
        }
        t.fill_shard_ranges();
        t
    }

    /// cid_shard_ranges[] from cid_to_shard[]: shards are contiguous.
    fn fill_shard_ranges(&mut self) {
        let nr = self.cid_to_shard.iter().copied().max().map_or(0, |m| m + 1) as usize;
        self.shards = vec![(0, 0); nr];
        for (cid, &s) in self.cid_to_shard.iter().enumerate() {
            let r = &mut self.shards[s as usize];
            if r.1 == 0 {
                r.0 = cid as u32;
            }
            r.1 += 1;
        }
    }

    pub(crate) fn nr_cids(&self) -> u32 {
        self.cid_to_cpu.len() as u32
    }

    /// scx_bpf_cid_override(): the scheduler's own cpu -> cid map and shard
    /// starts, checked as the kernel checks them (Err: its error message;
    /// the tables are then unchanged). Topology is cleared.
    pub(crate) fn override_with(&mut self, topo: &Topology, cpu_to_cid: &[i32], shard_start: &[i32]) -> Result<(), String> {
        let np = self.nr_cids();
        let ns = shard_start.len();
        if cpu_to_cid.len() != np as usize {
            return Err(format!("scx_bpf_cid_override: cpu_to_cid expected {np} entries, got {}", cpu_to_cid.len()));
        }
        if ns == 0 || ns > np as usize {
            return Err(format!("scx_bpf_cid_override: invalid shard_start count {ns}"));
        }
        if shard_start[0] != 0 {
            return Err(format!("scx_bpf_cid_override: shard_start[0] must be 0, got {}", shard_start[0]));
        }
        for si in 1..ns {
            if shard_start[si] <= shard_start[si - 1] {
                return Err(format!("scx_bpf_cid_override: shard_start not increasing at [{si}]"));
            }
            if shard_start[si] as u32 >= np {
                return Err(format!("scx_bpf_cid_override: shard_start[{si}]={} >= {np}", shard_start[si]));
            }
            let span = shard_start[si] - shard_start[si - 1];
            if span as u32 > SHARD_MAX_CPUS {
                return Err(format!("scx_bpf_cid_override: shard[{}] span {span} exceeds max {SHARD_MAX_CPUS}", si - 1));
            }
        }
        let last = np as i32 - shard_start[ns - 1];
        if last as u32 > SHARD_MAX_CPUS {
            return Err(format!("scx_bpf_cid_override: shard[{}] span {last} exceeds max {SHARD_MAX_CPUS}", ns - 1));
        }
        let mut seen = vec![false; np as usize];
        for &c in cpu_to_cid {
            if c < 0 || c as u32 >= np {
                return Err(format!("invalid cid {c}"));
            }
            if std::mem::replace(&mut seen[c as usize], true) {
                return Err(format!("cid {c} assigned to multiple cpus"));
            }
        }
        for (cpu, &c) in cpu_to_cid.iter().enumerate() {
            self.cpu_to_cid[cpu] = c;
            self.cid_to_cpu[c as usize] = cpu as i32;
        }
        let end = |si: usize| if si + 1 < ns { shard_start[si + 1] } else { np as i32 };
        // Each shard's node: the one most of its CPUs are on (lowest on a tie).
        self.shard_node = (0..ns)
            .map(|si| {
                let mut counts = vec![0u32; topo.nr_nodes()];
                for cid in shard_start[si]..end(si) {
                    counts[topo.node_of(self.cid_to_cpu[cid as usize] as usize)] += 1;
                }
                let best = counts.iter().copied().max().unwrap_or(0);
                if best == 0 { -1 } else { counts.iter().position(|&c| c == best).map_or(-1, |i| i as i32) }
            })
            .collect();
        let mut si = 0;
        for cid in 0..np as usize {
            if si + 1 < ns && cid as i32 >= shard_start[si + 1] {
                si += 1;
            }
            self.cid_to_shard[cid] = si as i32;
            self.topo[cid] = CidTopo { shard_cid: shard_start[si], shard_idx: si as i32, ..TOPO_NEG };
        }
        self.shards = (0..ns).map(|si| (shard_start[si] as u32, (end(si) - shard_start[si]) as u32)).collect();
        Ok(())
    }
}

/// SCX_CMASK_NR_WORDS(): storage words covering `nr_cids` at any base.
pub(crate) fn cmask_nr_words(nr_cids: u32) -> u32 {
    ((nr_cids as u64).div_ceil(64) + 1) as u32
}

/// Bytes of a `struct scx_cmask` with storage for `nr_cids`: the header
/// (base, nr_cids, alloc_words, padded to 16) and its words.
pub(crate) fn cmask_bytes(nr_cids: u32) -> usize {
    16 + 8 * cmask_nr_words(nr_cids) as usize
}

/// A `struct scx_cmask` in memory the host may touch (the scheduler's
/// arena, or a test's buffer).
pub(crate) struct Cmask(pub *mut u8);

impl Cmask {
    fn hdr(&self, i: usize) -> u32 {
        // SAFETY: the caller vouched for the header (Cmask's contract).
        unsafe { self.0.add(4 * i).cast::<u32>().read_volatile() }
    }
    pub(crate) fn base(&self) -> u32 {
        self.hdr(0)
    }
    pub(crate) fn nr_cids(&self) -> u32 {
        self.hdr(1)
    }
    pub(crate) fn alloc_words(&self) -> u32 {
        self.hdr(2)
    }
    fn word(&self, w: usize) -> *mut u64 {
        // SAFETY: words within alloc_words lie inside the object.
        unsafe { self.0.add(16 + 8 * w).cast::<u64>() }
    }

    /// scx_cmask_ref_init_kern() + scx_cmask_ref_from_cpumask(): the
    /// header from the kernel's own geometry, then each word of the active
    /// range from `cpu_set` (the CPU of each cid).
    ///
    /// # Safety
    /// `self.0` points at `cmask_bytes(nr_cids)` writable bytes.
    pub(crate) unsafe fn fill(&self, base: u32, nr_cids: u32, t: &CidTables, cpu_set: impl Fn(usize) -> bool) {
        // SAFETY: per the contract.
        unsafe {
            self.0.cast::<u32>().write_volatile(base);
            self.0.add(4).cast::<u32>().write_volatile(nr_cids);
            self.0.add(8).cast::<u32>().write_volatile(cmask_nr_words(nr_cids));
        }
        if nr_cids == 0 {
            return;
        }
        let nr_words = (base + nr_cids - 1) / 64 - base / 64 + 1;
        for wi in 0..nr_words {
            let first = (base / 64 + wi) * 64;
            let mut word = 0u64;
            for bit in 0..64 {
                let cid = first + bit;
                if cid >= base && cid < base + nr_cids && cpu_set(t.cid_to_cpu[cid as usize] as usize) {
                    word |= 1 << bit;
                }
            }
            // SAFETY: wi < nr_words <= cmask_nr_words(nr_cids).
            unsafe { self.word(wi as usize).write_volatile(word) };
        }
    }

    /// scx_cmask_ref_init()'s checks of a BPF-supplied header against
    /// `npossible` cids: Err(-EINVAL) if the range or storage is bad.
    pub(crate) fn check(&self, npossible: u32) -> Result<(u32, u32), i32> {
        let (base, nr, alloc) = (self.base(), self.nr_cids(), self.alloc_words());
        if base >= npossible || nr > npossible - base || cmask_nr_words(nr) > alloc {
            return Err(-EINVAL);
        }
        Ok((base, nr))
    }

    /// Whether `cid` is set (false outside the active range).
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) fn test(&self, cid: u32) -> bool {
        let (base, nr) = (self.base(), self.nr_cids());
        // SAFETY: inside the active range, within alloc_words (checked).
        cid >= base && cid < base + nr && unsafe { self.word((cid / 64 - base / 64) as usize).read_volatile() } & (1 << (cid % 64)) != 0
    }

    /// Sets (or clears) every cid of the active range `base..base + nr`.
    pub(crate) fn assign_range(&self, base: u32, nr: u32, set: bool) {
        for cid in base..base + nr {
            let w = self.word((cid / 64 - base / 64) as usize);
            // SAFETY: as in test(); the range was checked by check().
            unsafe { w.write_volatile(if set { w.read_volatile() | 1 << (cid % 64) } else { w.read_volatile() & !(1 << (cid % 64)) }) };
        }
    }
}

/// Where a cid-form scheduler's enable stands (what the cid kfuncs may see).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Phase {
    /// Loaded, not enabled: no tables yet (kfuncs answer -EINVAL).
    Loaded,
    /// In ops.init_cids(): scx_bpf_cid_override() may change the layout;
    /// caps storage does not exist yet.
    InitCids,
    /// Tables published, caps live (from ops.init() on).
    Live,
}

/// The callbacks of `struct sched_ext_ops_cid` after `priv` (schedlab_cid.h).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub(crate) struct CidOpsTailC {
    pub sub_attach: usize,
    pub sub_detach: usize,
    pub sub_caps_updated: usize,
    pub sub_ecaps_updated: usize,
    pub init_cids: usize,
    pub cid_shard_size: u32,
    pub rescue_bandwidth_ppt: u32,
    pub rescue_quantum_us: u32,
}

/// A cid-form scheduler's host state (in [`super::state::Inner`]).
pub(crate) struct CidState {
    pub phase: Phase,
    /// The layout being built (in ops.init_cids()) or published.
    pub tables: Option<CidTables>,
    pub tail: CidOpsTailC,
    /// The scheduler's arena (map index).
    pub arena: usize,
    /// Per-CPU set_cmask() scratch cmasks in the arena.
    pub scratch: Vec<usize>,
    /// The online cmask in the arena (scx_bpf_online_cmask()).
    pub online: usize,
    /// The kernel's sub-allocator over arena pages: (next, end).
    pool: (usize, usize),
}

impl CidState {
    pub(crate) fn new(tail: CidOpsTailC, arena: usize) -> CidState {
        CidState { phase: Phase::Loaded, tables: None, tail, arena, scratch: Vec::new(), online: 0, pool: (0, 0) }
    }

    /// The published tables (none before ops.init_cids() returned).
    pub(crate) fn live(&self) -> Option<&CidTables> {
        self.tables.as_ref().filter(|_| self.phase == Phase::Live)
    }
}

/// SCX_ARENA_GROW_PAGES.
const ARENA_GROW_PAGES: u32 = 4;

/// scx_arena_alloc(): `size` bytes (8-aligned) from pages the host takes
/// from the scheduler's arena four at a time, as the kernel's gen_pool.
fn arena_alloc(h: &HostState, size: usize) -> Option<usize> {
    let mut inner = h.inner.borrow_mut();
    let inner = &mut *inner;
    let st = inner.cid.as_mut()?;
    let size = size.next_multiple_of(8);
    if st.pool.0 + size > st.pool.1 || st.pool.0 == 0 {
        let pages = ARENA_GROW_PAGES.max(size.div_ceil(super::arena::PAGE) as u32);
        let p = inner.maps.get_mut(st.arena)?.arena()?.alloc(0, pages, 0)?;
        st.pool = (p, p + pages as usize * super::arena::PAGE);
    }
    let at = st.pool.0;
    st.pool.0 += size;
    Some(at)
}

/// The enable path of a cid-form root (scx_root_enable()) up to ops.init():
/// build the layout from the machine, run ops.init_cids() through
/// `init_cids` (which may override it), publish it, and allocate the
/// kernel's arena objects (scx_alloc_kern_arena_objs()). Err: the enable
/// fails with this message.
pub(crate) fn enable_cids(sim: &mut Sim, h: &HostState, init_cids: impl FnOnce(&mut Sim) -> i32) -> Result<(), String> {
    {
        let mut inner = h.inner.borrow_mut();
        let Some(st) = inner.cid.as_mut() else { return Ok(()) };
        st.tables = Some(CidTables::build(&sim.topo, st.tail.cid_shard_size));
        st.phase = Phase::InitCids;
    }
    let ret = init_cids(sim);
    if ret != 0 {
        return Err(format!("ops.init_cids() failed ({ret})"));
    }
    if let Some(st) = h.inner.borrow_mut().cid.as_mut() {
        st.phase = Phase::Live;
    }
    let n = sim.nr_cpus() as u32;
    let size = cmask_bytes(n);
    let mut scratch = Vec::with_capacity(n as usize);
    for _ in 0..n {
        let p = arena_alloc(h, size).ok_or("the arena has no room for the kernel's cmasks")?;
        // scx_cmask_init(): zeroed, the whole cid space.
        // SAFETY: `size` bytes of arena memory just allocated.
        unsafe {
            std::ptr::write_bytes(p as *mut u8, 0, size);
            Cmask(p as *mut u8).fill(0, n, &empty_tables(n), |_| false);
        }
        scratch.push(p);
    }
    let online = arena_alloc(h, size).ok_or("the arena has no room for the kernel's cmasks")?;
    let mut inner = h.inner.borrow_mut();
    let st = inner.cid.as_mut().ok_or("no cid state")?;
    let tables = st.tables.as_ref().ok_or("no cid tables")?;
    // SAFETY: as above. Every simulated CPU is online.
    unsafe { Cmask(online as *mut u8).fill(0, n, tables, |_| true) };
    st.scratch = scratch;
    st.online = online;
    Ok(())
}

/// Tables whose every cid is CPU 0 (only for zero-filling a cmask).
fn empty_tables(n: u32) -> CidTables {
    CidTables {
        cid_to_cpu: vec![0; n as usize],
        cpu_to_cid: vec![0; n as usize],
        cid_to_shard: vec![0; n as usize],
        shard_node: vec![-1],
        shards: vec![(0, n)],
        topo: vec![TOPO_NEG; n as usize],
    }
}

/// Whether `[addr, addr + len)` lies in the cid-form scheduler's arena
/// (the only memory the kernel reads a `__arena` argument from).
pub(crate) fn arena_holds(h: &HostState, addr: usize, len: usize) -> bool {
    let mut inner = h.inner.borrow_mut();
    let inner = &mut *inner;
    let Some(i) = inner.cid.as_ref().map(|s| s.arena) else { return false };
    inner.maps.get_mut(i).and_then(|m| m.arena()).is_some_and(|a| a.contains(addr, len))
}

/// Charges one kfunc call, as the core's kfuncs do.
pub(crate) fn kf(sim: &mut Sim) {
    sim.scx.stats.kfunc_calls += 1;
    sim.scx.cost_acc += sim.costs.scx_kfunc_ns;
}

/// The cid of `cpu` once the layout is published (None before, or for a
/// cpu-form scheduler).
pub(crate) fn cid_of(h: &HostState, cpu: Cpu) -> Option<i32> {
    h.inner.borrow().cid.as_ref()?.live()?.cpu_to_cid.get(cpu as usize).copied()
}

/// scx_cid_to_cpu(): the CPU of `cid`; an invalid cid is an error
/// ("invalid cid N"); -EINVAL without one before the tables are published.
pub(crate) fn cpu_of(sim: &mut Sim, h: &HostState, cid: i32) -> Result<Cpu, i32> {
    let r = {
        let inner = h.inner.borrow();
        match inner.cid.as_ref().and_then(|s| s.tables.as_ref().map(|t| (t, s.phase))) {
            None => Err(None),
            Some((t, _)) if cid < 0 || cid as u32 >= t.nr_cids() => Err(Some(format!("invalid cid {cid}"))),
            Some((_, Phase::InitCids | Phase::Loaded)) => Err(None),
            Some((t, Phase::Live)) => Ok(t.cid_to_cpu[cid as usize] as Cpu),
        }
    };
    r.map_err(|e| {
        if let Some(m) = e {
            bad(sim, m);
        }
        -EINVAL
    })
}

/// Whether the scheduler is cid-form.
pub(crate) fn is_cid(h: &HostState) -> bool {
    h.cid_form()
}

/// A `SCX_DSQ_LOCAL_ON | cid` verdict of a cid-form scheduler names the
/// local DSQ of that cid's CPU (find_dsq_for_dispatch()'s scx_cpu_ret());
/// other DSQ ids pass. None: an invalid cid (already an error).
pub(crate) fn dsq_in(sim: &mut Sim, h: &HostState, dsq_id: u64) -> Option<u64> {
    const LOCAL_ON: u64 = (1 << 63) | (1 << 62);
    if !is_cid(h) || dsq_id & LOCAL_ON != LOCAL_ON {
        return Some(dsq_id);
    }
    let cid = (dsq_id & 0xffff_ffff) as u32 as i32;
    cpu_of(sim, h, cid).ok().map(|cpu| LOCAL_ON | cpu as u64)
}

/// scx_vet_enq_flags()'s SCX_ENQ_RESCUE rule, then the flag's meaning for
/// a root without sub-schedulers: it holds every cap on every cid, so a
/// rescue insert is a plain local insert (scx_resolve_local_dsq()).
pub(crate) fn enq_flags_in(sim: &mut Sim, h: &HostState, dsq_id: u64, enq_flags: u64) -> Option<u64> {
    if enq_flags & ENQ_RESCUE == 0 || !is_cid(h) {
        return Some(enq_flags);
    }
    const LOCAL: u64 = (1 << 63) | 2;
    const LOCAL_ON: u64 = (1 << 63) | (1 << 62);
    if dsq_id != LOCAL && dsq_id & LOCAL_ON != LOCAL_ON {
        bad(sim, format!("SCX_ENQ_RESCUE on a non-local DSQ 0x{dsq_id:x}"));
        return None;
    }
    Some(enq_flags & !ENQ_RESCUE)
}

/// A verdict's DSQ id and insert flags as the core takes them
/// ([`dsq_in`], [`enq_flags_in`]); None: rejected with an error.
#[inline]
pub(crate) fn dsq_args(sim: &mut Sim, h: &HostState, dsq_id: u64, enq_flags: u64) -> Option<(u64, u64)> {
    // Both pass everything through for a scheduler that is not cid-form:
    // one test for the two.
    if !is_cid(h) {
        return Some((dsq_id, enq_flags));
    }
    let f = enq_flags_in(sim, h, dsq_id, enq_flags)?;
    Some((dsq_in(sim, h, dsq_id)?, f))
}

fn need_cid(sim: &mut Sim, h: &HostState, what: &str) -> bool {
    kf(sim);
    if is_cid(h) {
        return true;
    }
    // The verifier refuses a cid kfunc in a cpu-form program.
    bad(sim, format!("{what}() requires a cid-form scheduler (struct sched_ext_ops_cid)"));
    false
}

pub(super) extern "C" fn scx_bpf_task_cid(p: *const TaskStructC) -> i32 {
    with_ctx(|sim, h| {
        if !need_cid(sim, h, "scx_bpf_task_cid") {
            return -EINVAL;
        }
        let Some(w) = h.who(sim, p, "scx_bpf_task_cid") else { return -EINVAL };
        let cpu = match w {
            super::kobj::Who::Task(t) => sim.task(t).cpu,
            super::kobj::Who::Idle(c) => c,
        };
        cid_of(h, cpu).unwrap_or(-EINVAL)
    })
}

pub(super) extern "C" fn scx_bpf_this_cid() -> i32 {
    with_ctx(|sim, h| {
        if !need_cid(sim, h, "scx_bpf_this_cid") {
            return -EINVAL;
        }
        cid_of(h, sim.this_cpu).unwrap_or(-EINVAL)
    })
}

/// num_possible_cpus(): every simulated CPU.
pub(super) extern "C" fn scx_bpf_nr_cids() -> u32 {
    with_ctx(|sim, _| {
        kf(sim);
        sim.nr_cpus() as u32
    })
}

/// num_online_cpus(): the simulator has no offline CPUs.
pub(super) extern "C" fn scx_bpf_nr_online_cids() -> u32 {
    with_ctx(|sim, _| {
        kf(sim);
        sim.nr_cpus() as u32
    })
}

pub(super) extern "C" fn scx_bpf_cid_to_cpu(cid: i32) -> i32 {
    with_ctx(|sim, h| {
        if !need_cid(sim, h, "scx_bpf_cid_to_cpu") {
            return -EINVAL;
        }
        cpu_of(sim, h, cid).map_or_else(|e| e, |c| c as i32)
    })
}

pub(super) extern "C" fn scx_bpf_cpu_to_cid(cpu: i32) -> i32 {
    with_ctx(|sim, h| {
        if !need_cid(sim, h, "scx_bpf_cpu_to_cid") {
            return -EINVAL;
        }
        if cpu < 0 || cpu as usize >= sim.nr_cpus() {
            bad(sim, format!("invalid CPU {cpu}"));
            return -EINVAL;
        }
        cid_of(h, cpu as Cpu).unwrap_or(-EINVAL)
    })
}

pub(super) extern "C" fn scx_bpf_cid_topo(cid: i32, out: *mut CidTopo, size: usize) {
    with_ctx(|sim, h| {
        if !need_cid(sim, h, "scx_bpf_cid_topo") || out.is_null() {
            return;
        }
        let topo = {
            let inner = h.inner.borrow();
            let t = inner.cid.as_ref().and_then(|s| s.live());
            match t {
                Some(t) if cid >= 0 && (cid as u32) < t.nr_cids() => Ok(t.topo[cid as usize]),
                Some(_) => Err(true),
                None => Err(false),
            }
        };
        let topo = match topo {
            Ok(t) => t,
            Err(invalid) => {
                if invalid {
                    bad(sim, format!("invalid cid {cid}"));
                }
                TOPO_NEG
            }
        };
        let n = size.min(std::mem::size_of::<CidTopo>());
        // SAFETY: `out` is the program's buffer of `size` bytes; at most
        // that many are written.
        unsafe { std::ptr::copy_nonoverlapping((&topo as *const CidTopo).cast::<u8>(), out.cast::<u8>(), n) };
    })
}

/// The CPU of `cid` for the cid kfuncs that wrap a CPU kfunc (whose cost
/// they pay): None, with the error, in a cpu-form program or for an
/// invalid cid.
fn kfunc_cpu(sim: &mut Sim, h: &HostState, what: &str, cid: i32) -> Option<Cpu> {
    if !is_cid(h) {
        need_cid(sim, h, what);
        return None;
    }
    cpu_of(sim, h, cid).ok()
}

pub(super) extern "C" fn scx_bpf_cid_curr(cid: i32) -> *mut TaskStructC {
    with_ctx(|sim, h| {
        let Some(cpu) = kfunc_cpu(sim, h, "scx_bpf_cid_curr", cid) else { return std::ptr::null_mut() };
        match k::scx_bpf_cpu_curr(sim, cpu as i32) {
            Some(curr) => super::rtfns::curr_ptr(sim, h, cpu, curr),
            None => std::ptr::null_mut(),
        }
    })
}

pub(super) extern "C" fn scx_bpf_online_cmask() -> *const u8 {
    with_ctx(|sim, h| {
        if !need_cid(sim, h, "scx_bpf_online_cmask") {
            return std::ptr::null();
        }
        h.inner.borrow().cid.as_ref().filter(|s| s.online != 0).map_or(std::ptr::null(), |s| s.online as *const u8)
    })
}

pub(super) extern "C" fn scx_bpf_kick_cid(cid: i32, flags: u64) {
    with_ctx(|sim, h| {
        if let Some(cpu) = kfunc_cpu(sim, h, "scx_bpf_kick_cid", cid) {
            k::scx_bpf_kick_cpu(sim, cpu as i32, flags);
        }
    })
}

pub(super) extern "C" fn scx_bpf_cidperf_cap(cid: i32) -> u32 {
    with_ctx(|sim, h| {
        kfunc_cpu(sim, h, "scx_bpf_cidperf_cap", cid).map_or(1024, |cpu| k::scx_bpf_cpuperf_cap(sim, cpu as i32))
    })
}

pub(super) extern "C" fn scx_bpf_cidperf_cur(cid: i32) -> u32 {
    with_ctx(|sim, h| {
        kfunc_cpu(sim, h, "scx_bpf_cidperf_cur", cid).map_or(1024, |cpu| k::scx_bpf_cpuperf_cur(sim, cpu as i32))
    })
}

/// scx_cpuperf_set() on the cid's CPU: 0, or -EINVAL (with the kernel's
/// error) for a bad cid or target. A root holds SCX_CAP_PERF everywhere.
pub(super) extern "C" fn scx_bpf_cidperf_set(cid: i32, perf: u32) -> i32 {
    with_ctx(|sim, h| {
        let Some(cpu) = kfunc_cpu(sim, h, "scx_bpf_cidperf_set", cid) else { return -EINVAL };
        k::scx_bpf_cpuperf_set(sim, cpu as i32, perf);
        if perf > 1024 {
            -EINVAL
        } else {
            0
        }
    })
}

/// scx_bpf_tid_to_task(): the live task with `tid` (here a tid is the
/// task index plus one, see abi.rs), NULL for none; an error without
/// SCX_OPS_TID_TO_TASK. A task leaves the table when it dies
/// (sched_ext_dead()).
pub(super) extern "C" fn scx_bpf_tid_to_task(tid: u64) -> *mut TaskStructC {
    with_ctx(|sim, h| {
        kf(sim);
        if !h.inner.borrow().tid_to_task {
            bad(sim, "scx_bpf_tid_to_task() called without SCX_OPS_TID_TO_TASK".into());
            return std::ptr::null_mut();
        }
        let Some(t) = tid.checked_sub(1).filter(|&t| t < sim.tasks.len() as u64) else { return std::ptr::null_mut() };
        let t = t as schedlab::engine::TaskId;
        if sim.task(t).state == schedlab::sched::task::TaskState::Dead || sim.task(t).scx.c.scx.tid != tid {
            return std::ptr::null_mut();
        }
        h.task_ptr(sim, t)
    })
}

/// scx_bpf_cid_override(): only from ops.init_cids() (the verifier's
/// SCX_KF_ALLOW_INIT_CIDS); invalid input is an error and leaves the
/// layout as it was.
pub(super) extern "C" fn scx_bpf_cid_override(cpu_to_cid: *const i32, cpu_cnt: u32, shard_start: *const i32, shard_cnt: u32) {
    with_ctx(|sim, h| {
        kf(sim);
        let phase = h.inner.borrow().cid.as_ref().map(|s| s.phase);
        if phase != Some(Phase::InitCids) {
            bad(sim, "scx_bpf_cid_override() may only be called from ops.init_cids()".into());
            return;
        }
        let np = sim.nr_cpus() as u32;
        // The counts are checked before the arrays are read.
        if cpu_cnt != np {
            bad(sim, format!("scx_bpf_cid_override: cpu_to_cid expected {np} entries, got {cpu_cnt}"));
            return;
        }
        if shard_cnt == 0 || shard_cnt > np {
            bad(sim, format!("scx_bpf_cid_override: invalid shard_start count {shard_cnt}"));
            return;
        }
        let read = |p: *const i32, n: u32| -> Option<Vec<i32>> {
            (!p.is_null() && arena_holds(h, p as usize, n as usize * 4))
                // SAFETY: `n` i32s inside the scheduler's arena (checked).
                .then(|| unsafe { std::slice::from_raw_parts(p, n as usize) }.to_vec())
        };
        let (Some(c2c), Some(ss)) = (read(cpu_to_cid, cpu_cnt), read(shard_start, shard_cnt)) else {
            bad(sim, "scx_bpf_cid_override: the arrays must be arena memory".into());
            return;
        };
        let r = {
            let mut inner = h.inner.borrow_mut();
            match inner.cid.as_mut().and_then(|s| s.tables.as_mut()) {
                Some(t) => t.override_with(&sim.topo, &c2c, &ss),
                None => Err("scx_bpf_cid_override: no cid tables".into()),
            }
        };
        if let Err(e) = r {
            bad(sim, e);
        }
    })
}

/// The host functions of runtime_cid.c, by name.
pub(super) fn lookup(name: &str) -> Option<*mut std::ffi::c_void> {
    use super::sub;
    let f: *const () = match name {
        "scx_bpf_task_cid" => scx_bpf_task_cid as *const (),
        "scx_bpf_this_cid" => scx_bpf_this_cid as *const (),
        "scx_bpf_nr_cids" => scx_bpf_nr_cids as *const (),
        "scx_bpf_nr_online_cids" => scx_bpf_nr_online_cids as *const (),
        "scx_bpf_cid_to_cpu" => scx_bpf_cid_to_cpu as *const (),
        "scx_bpf_cpu_to_cid" => scx_bpf_cpu_to_cid as *const (),
        "scx_bpf_cid_topo" => scx_bpf_cid_topo as *const (),
        "scx_bpf_cid_curr" => scx_bpf_cid_curr as *const (),
        "scx_bpf_online_cmask" => scx_bpf_online_cmask as *const (),
        "scx_bpf_kick_cid" => scx_bpf_kick_cid as *const (),
        "scx_bpf_cidperf_cap" => scx_bpf_cidperf_cap as *const (),
        "scx_bpf_cidperf_cur" => scx_bpf_cidperf_cur as *const (),
        "scx_bpf_cidperf_set" => scx_bpf_cidperf_set as *const (),
        "scx_bpf_tid_to_task" => scx_bpf_tid_to_task as *const (),
        "scx_bpf_cid_override" => scx_bpf_cid_override as *const (),
        "scx_bpf_sub_dispatch" => sub::scx_bpf_sub_dispatch as *const (),
        "scx_bpf_sub_grant" => sub::scx_bpf_sub_grant as *const (),
        "scx_bpf_sub_revoke" => sub::scx_bpf_sub_revoke as *const (),
        "scx_bpf_sub_caps" => sub::scx_bpf_sub_caps as *const (),
        "schedlab_sub_kill" => sub::schedlab_sub_kill as *const (),
        _ => return None,
    };
    Some(f as *mut std::ffi::c_void)
}

#[cfg(test)]
#[path = "cid_tests.rs"]
mod tests;
