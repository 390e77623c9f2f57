//! Hosting sched_ext schedulers written in BPF C, natively: the hosting
//! layer of schedlab, a crate above the simulator core (`schedlab`), which
//! it imports and which never imports it. The core runs a scheduler through
//! [`ExtOps`](schedlab::sched::ext::ops::ExtOps); this crate compiles and
//! loads one and implements that trait, and its [`world`] hands a scenario's
//! scheduler to the core's world builder (the builder takes a loader, see
//! [`schedlab::workload::world::ExtLoader`]). Also here: the loader
//! profiles ([`profile`], `profiles/`), the shipped schedulers
//! ([`shipped`]), and the [`frontend`] the CLI and the Python package share
//! (a front end's run may load a hosted scheduler).
//!
//! A scheduler's unmodified `.bpf.c` is compiled with the system C compiler
//! against the shim (crates/schedlab-host/shim: vmlinux.h subset, scx/ and bpf/
//! headers, runtime.c) into a shared object ([`compile`]), loaded into its
//! own copy (`loader`), and driven through [`ExtOps`](schedlab::sched::ext::ops::ExtOps) by
//! [`HostedScheduler`], which calls the object's struct_ops callbacks. The
//! callbacks call kfuncs, which reach the simulator through one accessor
//! (`state`). All the `unsafe` of sched_ext hosting is in this module.
//!
//! Layout:
//! - `compile`: shim materialisation, the scan pass, the cache, `cc`;
//! - `scan`: maps, rodata, ops tables and syscall programs from the
//!   preprocessed source, and the descriptor unit generated from them;
//! - `loader`: dlopen (in place, or of a private copy), `schedlab_attach()`, rodata writes;
//! - `struct_ops`: the `ExtOps` callbacks, each packing its arguments as the
//!   BPF_PROG context and calling the object's program;
//! - `cid`, `struct_ops_cid`, `sub`: the 7.3 cid form (`struct
//!   sched_ext_ops_cid`): cid numbering and translation, cmasks, the cid
//!   and sub-scheduler kfuncs;
//! - `state`: per-scheduler state and the thread-local context;
//! - `ffi`, `kptr`, `mapfns`, `rtfns`: the `extern "C"` kfuncs and helpers;
//! - `maps`: BPF map semantics, with `ringbuf`, `arena` and `perf` for
//!   ring buffers, arenas and perf event arrays;
//! - `kobj`: kernel objects lent to BPF (idle tasks, rq views); `cgroup`:
//!   the `struct cgroup`s of the simulator's cgroup tree; `fpe`: BPF division by zero on x86;
//! - `fault`: every call into the object is guarded: a fault or a callback
//!   that does not return ejects the scheduler instead of killing schedlab.
//!
//! # The object's ABI
//!
//! One exported symbol, `struct schedlab_module *schedlab_attach(void
//! *(*resolve)(const char *))`: the runtime asks for each host function by
//! name (so any missing one is reported, and nothing depends on the
//! executable's symbols), then returns the descriptor tables: maps (name,
//! address, type, key/value size, max_entries, flags), ARRAY_OF_MAPS
//! initialisers, rodata (name, address, size, element size, kind),
//! `struct sched_ext_ops` tables and SEC("syscall") programs. Every
//! struct_ops callback is a BPF_PROG, i.e. `RET name(u64 *ctx)` with the
//! arguments packed in a u64 array, exactly as in BPF.

#![deny(missing_docs)]
#![deny(unreachable_pub)]

pub mod frontend;
pub mod profile;
pub mod shipped;
pub mod world;

mod arena;
mod arena_lib;
pub(crate) mod paths;
mod cgroup;
mod cid;
pub mod compile;
mod ffi;
pub mod fetch;
mod fault;
mod fpe;
mod kobj;
mod kptr;
pub(crate) mod loader;
mod mapfns;
pub(crate) mod maps;
mod owners;
mod perf;
mod ringbuf;
mod rtfns;
mod scan;
mod scx_enums;
pub mod source;
mod state;
mod struct_ops;
mod struct_ops_cid;
mod sub;
mod tracepoints;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::ffi::c_void;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use schedlab::engine::Cpu;
use schedlab::sched::ext::ops::{ops_flags, Op};
use schedlab::sched::sim::Sim;

use loader::{c_str, Loaded, Rodata, SchedExtOpsC, OPS_MEMBERS};
use maps::{Map, MapDef, MapKind};
use state::{Callee, HostState, Inner};

/// Why a scheduler could not be compiled or loaded.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    #[error("{}", compile_failure(path, stderr))]
    /// The C compiler rejected the source.
    Compile {
        /// The source compiled.
        path: PathBuf,
        /// The compiler's messages.
        stderr: String,
    },
    #[error("loading {}: the runtime lacks `{symbol}`{}; refused, as the kernel's loader refuses a program that calls a kfunc or helper the kernel does not have", path.display(), at.as_ref().map(|a| format!(" (first used at {a})")).unwrap_or_default())]
    /// The object calls a kfunc or helper the runtime does not have.
    Unsupported {
        /// The object.
        path: PathBuf,
        /// The missing symbol.
        symbol: String,
        /// The first source line that uses it (file:line), from debug information.
        at: Option<String>,
    },
    /// The scheduler's source could not be found or fetched.
    #[error(transparent)]
    Source(#[from] source::ResolveError),
    #[error("cannot run the C compiler `{cc}` ({err}); install a C compiler (e.g. gcc) or set SCHEDLAB_CC")]
    /// The C compiler could not be started.
    NoCompiler {
        /// The compiler command.
        cc: String,
        /// Why it could not run.
        err: std::io::Error,
    },
    #[error("{what}: {err}")]
    /// A file could not be read or written.
    Io {
        /// What was being done.
        what: String,
        /// The error.
        err: std::io::Error,
    },
    #[error("{}: {msg}", path.display())]
    /// The compiled object's sections or symbols could not be read.
    Scan {
        /// The object.
        path: PathBuf,
        /// What is wrong.
        msg: String,
    },
    #[error("loading {}: {msg}", path.display())]
    /// The object could not be loaded (dlopen, relocation, map creation).
    Load {
        /// The object.
        path: PathBuf,
        /// What is wrong.
        msg: String,
    },
    #[error("{}: {msg}", path.display())]
    /// The `struct sched_ext_ops` in the object is missing or malformed.
    Ops {
        /// The object.
        path: PathBuf,
        /// What is wrong.
        msg: String,
    },
    #[error("unknown rodata `{name}`; the scheduler's const volatile globals are: {valid}")]
    /// A rodata setting names no `const volatile` global of the scheduler.
    UnknownRodata {
        /// The name given.
        name: String,
        /// The names the scheduler has.
        valid: String,
    },
    /// A rodata value does not fit its global.
    #[error("{0}")]
    BadRodata(String),
    #[error("unknown ops flag `{name}`; valid: {valid}")]
    /// An ops flag that sched_ext does not define.
    UnknownFlag {
        /// The name given.
        name: String,
        /// The flags sched_ext has.
        valid: String,
    },
    #[error("no SEC(\"syscall\") program `{name}`; the scheduler has: {valid}")]
    /// A syscall program the scheduler does not have.
    UnknownProgram {
        /// The name given.
        name: String,
        /// The SEC("syscall") programs it has.
        valid: String,
    },
    /// A SEC("syscall") program run by the loader faulted (fault.rs).
    #[error("{0}")]
    Fault(String),
    /// A map the loader creates or resizes cannot be, as the kernel
    /// would refuse it.
    #[error("map `{map}`: {msg}")]
    Map {
        /// The map.
        map: String,
        /// What is wrong and what the scheduler has.
        msg: String,
    },
}

/// The one-line summary of a failed compile: the first error (the
/// compiler's diagnostics went to stderr line by line as it printed them).
fn compile_failure(path: &Path, stderr: &str) -> String {
    let errors: Vec<&str> = stderr.lines().filter(|l| l.contains("error:") || l.contains("error ")).collect();
    match errors.first() {
        Some(first) if errors.len() > 1 => {
            format!("{}: compile error: {} (and {} more; the compiler's diagnostics are above)", path.display(), first.trim(), errors.len() - 1)
        }
        Some(first) => format!("{}: compile error: {}", path.display(), first.trim()),
        None => format!("{}: compile error:\n{stderr}", path.display()),
    }
}

/// How to load: what a scheduler's user space would set before attaching.
#[derive(Clone, Debug, Default)]
pub struct LoadConfig {
    /// Rodata by name (`name` or `name[i]`), value as text (`dsp_batch=8`).
    pub rodata: Vec<(String, String)>,
    /// Ops flags to add, by name (`ENQ_LAST` or `SCX_OPS_ENQ_LAST`).
    pub ops_flags: Vec<String>,
    /// Which `struct sched_ext_ops` to use when the source defines several.
    pub ops: Option<String>,
    /// Overrides the cache directory (default: [`compile::cache_dir`]).
    pub cache_dir: Option<PathBuf>,
    /// Include directories searched first (`--sched-include`, scenario
    /// `scheduler.include`).
    pub includes: Vec<PathBuf>,
    /// RESIZABLE_ARRAY()s to resize before anything runs, as libbpf's
    /// `bpf_map__set_value_size()` on their `.data.NAME` / `.bss.NAME` map:
    /// (array, elements).
    pub resize: Vec<(String, u64)>,
    /// The wall time one callback may take before it is taken for an
    /// endless loop and the scheduler is ejected (`scheduler.op_timeout`,
    /// `--op-timeout`); None: the default (5 s); Some(0): no limit.
    pub op_timeout_ns: Option<u64>,
    /// `bpf_map__set_max_entries()` before load: (map, max_entries).
    pub map_max_entries: Vec<(String, u32)>,
    /// C integer constant expressions the loader needs the values of
    /// (`sizeof(struct task_ctx)`, member offsets), read back with
    /// [`HostedScheduler::c_const`].
    pub c_consts: Vec<String>,
}


/// A loaded BPF C scheduler.
pub struct HostedScheduler {
    state: HostState,
    ops: *mut SchedExtOpsC,
    /// `Op` index -> callback address (0 = not defined).
    fns: [usize; Op::ALL.len()],
    name: String,
    extra_flags: u64,
    rodata: Vec<Rodata>,
    /// Writable scalar globals (.bss/.data).
    globals: Vec<Rodata>,
    /// SEC("syscall") programs by name.
    progs: BTreeMap<String, usize>,
    /// The SEC("tp_btf/sched_switch") program, 0 if none.
    tp_sched_switch: usize,
    /// The other SEC("tp_btf/NAME") programs by NAME (struct_ops.rs hosts
    /// cgroup_attach_task, task_rename and hw_pressure_update).
    tracepoints: BTreeMap<String, usize>,
    fpe_slots: Vec<usize>,
    source: PathBuf,
    /// The published crate (name, version) the sources come from.
    origin: Option<(String, String)>,
    cache_hit: bool,
    /// SEC("syscall") runs for right after the attach (a loader profile's
    /// `phase = "attach"`).
    after_attach: std::cell::RefCell<Vec<crate::profile::resolve::Run>>,
    /// The RESIZABLE_ARRAY()s (see [`resizable`]): each as a variable of
    /// its resized length, and the storage it lives in.
    arrays: Vec<(Rodata, Vec<u64>)>,
    /// The values of [`LoadConfig::c_consts`].
    consts: Vec<(String, i64)>,
    /// The template values of each shape of path written so far (paths.rs).
    path_consts: std::cell::RefCell<BTreeMap<String, Vec<i64>>>,
    /// Keeps the object mapped; dropped last.
    _loaded: Loaded,
}

/// Compiles (or takes from the cache), loads and configures `source`.
pub fn load(source: &Path, cfg: &LoadConfig) -> Result<Rc<HostedScheduler>, HostError> {
    load_owned(source, cfg).map(Rc::new)
}

/// [`load`], returning the scheduler by value (e.g. to wrap it).
pub fn load_owned(source: &Path, cfg: &LoadConfig) -> Result<HostedScheduler, HostError> {
    let cache = cfg.cache_dir.clone().unwrap_or_else(compile::cache_dir);
    let fetch_bpf_h = |v: &str| fetch::scx_cargo_headers(v, &cache);
    let mut spec = source::resolve(source, &cfg.includes, &cache, &fetch_bpf_h)?;
    spec.consts = cfg.c_consts.clone();
    let compiled = compile::compile_spec(&spec, &cache)?;
    let loaded = loader::open(&compiled.so, source)?;
    let consts = loader::c_consts(&loaded, &spec.consts, source)?;
    let ops_err = |msg: String| HostError::Ops { path: source.to_path_buf(), msg };
    // SAFETY: `module` is the object's descriptor, valid while `loaded` is.
    let m = unsafe { &*loaded.module };
    // SAFETY (for the table reads below): each table has the stated number
    // of entries, written by the generated descriptor unit.
    let table = |p: *const u8, n: u32, size: usize| (0..n as usize).map(move |i| p.wrapping_add(i * size));

    let mut inner = Inner::default();
    for d in table(m.maps.cast(), m.nr_maps, std::mem::size_of::<loader::MapDescC>()) {
        // SAFETY: see above.
        let d = unsafe { &*d.cast::<loader::MapDescC>() };
        // SAFETY: names are string literals of the object.
        let name = unsafe { c_str(d.name) };
        let kind = MapKind::from_type(d.type_).ok_or_else(|| {
            ops_err(format!("map `{name}`: BPF map type {} is not supported ({} are)", d.type_, maps::SUPPORTED))
        })?;
        let max_entries = cfg.map_max_entries.iter().rev().find(|(n, _)| *n == name).map_or(d.max_entries, |m| m.1);
        let def = MapDef {
            name,
            kind,
            key_size: d.key_size,
            value_size: d.value_size,
            max_entries,
            flags: d.map_flags,
            extra: 0,
        };
        maps::check_def(&def).map_err(ops_err)?;
        inner.map_addr.insert(d.map as usize, inner.maps.len());
        inner.maps.push(Map::new(def));
    }
    for (name, _) in &cfg.map_max_entries {
        if !inner.maps.iter().any(|m| m.def.name == *name) {
            let names: Vec<&str> = inner.maps.iter().map(|m| m.def.name.as_str()).collect();
            return Err(HostError::Map { map: name.clone(), msg: format!("no such map to resize; the scheduler's maps are: {}", names.join(", ")) });
        }
    }
    for s in table(m.map_slots.cast(), m.nr_map_slots, std::mem::size_of::<loader::MapSlotC>()) {
        // SAFETY: see above.
        let s = unsafe { &*s.cast::<loader::MapSlotC>() };
        let ok = inner.map_addr.contains_key(&(s.inner as usize))
            && inner.maps[s.outer as usize].set_inner(s.slot, s.inner as usize);
        if !ok {
            return Err(ops_err(format!(
                "map `{}`: bad initial slot {}",
                inner.maps[s.outer as usize].def.name, s.slot
            )));
        }
    }
    for f in table(m.map_fields.cast(), m.nr_map_fields, std::mem::size_of::<loader::MapFieldC>()) {
        // SAFETY: see above.
        let f = unsafe { &*f.cast::<loader::MapFieldC>() };
        let Some(map) = inner.maps.get_mut(f.map as usize) else {
            return Err(ops_err(format!("special field of map #{}: no such map", f.map)));
        };
        map.add_special(f.offset, f.size).map_err(ops_err)?;
    }
    let descs = |at: *const loader::RodataDescC, n: u32| -> Vec<Rodata> {
        table(at.cast(), n, std::mem::size_of::<loader::RodataDescC>())
            .map(|r| {
                // SAFETY: see above.
                let r = unsafe { &*r.cast::<loader::RodataDescC>() };
                Rodata {
                    // SAFETY: string literal of the object.
                    name: unsafe { c_str(r.name) },
                    ptr: r.ptr as usize,
                    size: r.size,
                    elem_size: r.elem_size,
                    kind: r.kind,
                    nr_elems: r.nr_elems,
                    row_elems: r.row_elems,
                }
            })
            .collect()
    };
    let rodata = descs(m.rodata, m.nr_rodata);
    let (arrays, globals): (Vec<Rodata>, Vec<Rodata>) =
        descs(m.globals, m.nr_globals).into_iter().partition(|g| g.kind == loader::ro_kind::RESIZABLE);
    let (arena_vars, globals): (Vec<Rodata>, Vec<Rodata>) = globals.into_iter().partition(|g| g.kind == loader::ro_kind::ARENA);
    let (masks, globals): (Vec<Rodata>, Vec<Rodata>) = globals.into_iter().partition(|g| g.kind == loader::ro_kind::BPF_CPUMASK);
    inner.global_cpumasks = masks.iter().map(|m| (m.ptr, m.ptr + m.size as usize, m.elem_size as usize)).collect();
    // Rodata pages the loader makes writable; sealed before any of the
    // scheduler's code runs (at the end of this load).
    let pages = loader::Pages::default();
    arena_lib::place_arena_globals(&mut inner, &pages, &arena_vars).map_err(ops_err)?;
    let arrays = resizable(&pages, &arrays, &cfg.resize).map_err(ops_err)?;
    let mut tables = Vec::new();
    for o in table(m.ops.cast(), m.nr_ops, std::mem::size_of::<loader::OpsDescC>()) {
        // SAFETY: see above.
        let o = unsafe { &*o.cast::<loader::OpsDescC>() };
        // SAFETY: string literal of the object.
        tables.push((unsafe { c_str(o.name) }, o.ops, o.cid != 0));
    }
    let mut progs = BTreeMap::new();
    for p in table(m.progs.cast(), m.nr_progs, std::mem::size_of::<loader::ProgDescC>()) {
        // SAFETY: see above.
        let p = unsafe { &*p.cast::<loader::ProgDescC>() };
        // SAFETY: string literal of the object.
        progs.insert(unsafe { c_str(p.name) }, p.fn_ as usize);
    }
    // The descriptor lists tracing programs beside the SEC("syscall") ones,
    // named by their attach point (scan.rs); they are attached, not run.
    let (tracing, progs): (BTreeMap<String, usize>, BTreeMap<String, usize>) =
        progs.into_iter().partition(|(n, _)| n.starts_with("tp_btf/"));
    let tp_sched_switch = tracing.get("tp_btf/sched_switch").copied().unwrap_or(0);
    let tracepoints: BTreeMap<String, usize> =
        tracing.iter().filter_map(|(n, &f)| n.strip_prefix("tp_btf/").filter(|t| *t != "sched_switch").map(|t| (t.to_string(), f))).collect();

    let names = || tables.iter().map(|(n, _, _)| n.as_str()).collect::<Vec<_>>().join(", ");
    let (ops, cid_form) = match (&cfg.ops, tables.len()) {
        (_, 0) => return Err(ops_err("no `struct sched_ext_ops` definition (SCX_OPS_DEFINE)".into())),
        (None, 1) => (tables[0].1, tables[0].2),
        (None, _) => return Err(ops_err(format!("several ops tables ({}); choose one", names()))),
        (Some(want), _) => match tables.iter().find(|(n, _, _)| n == want) {
            Some((_, p, c)) => (*p, *c),
            None => return Err(ops_err(format!("no ops table `{want}`; the source defines: {}", names()))),
        },
    };
    if cid_form {
        inner.cid = Some(cid_state(&inner, ops).map_err(ops_err)?);
    }
    // SAFETY: `ops` points at the scheduler's ops variable.
    let ops_ref = unsafe { &*ops };
    let name_len = ops_ref.name.iter().position(|&b| b == 0).unwrap_or(ops_ref.name.len());
    let name = String::from_utf8_lossy(&ops_ref.name[..name_len]).into_owned();
    if name.is_empty() {
        return Err(ops_err("ops.name is empty; sched_ext requires a name".into()));
    }
    let mut fns = [0usize; Op::ALL.len()];
    for op in Op::ALL {
        if let Some(i) = OPS_MEMBERS.iter().position(|m| *m == op.name()) {
            fns[op.index()] = ops_ref.fns[i] as usize;
        }
    }

    let extra_flags =
        ops_flags::parse(&cfg.ops_flags).map_err(|f| HostError::UnknownFlag { name: f.clone(), valid: ops_flags::valid() })?;

    let end_call = m.end_call.map(|f| state::EndCall { f, pending: m.end_call_pending });
    let fpe_slots = fpe::register(&loaded.text);
    let obj = fault::ObjInfo { so: compiled.so.clone(), base: loaded.base };
    let hosted = HostedScheduler {
        state: HostState::new(inner, end_call, obj, pages, &fns),
        ops,
        fns,
        name,
        extra_flags,
        rodata,
        globals,
        progs,
        tp_sched_switch,
        tracepoints,
        fpe_slots,
        source: source.to_path_buf(),
        origin: spec.origin.clone(),
        cache_hit: compiled.cache_hit,
        after_attach: Default::default(),
        arrays,
        consts,
        path_consts: Default::default(),
        _loaded: loaded,
    };
    // What scx_utils' enum init writes before load (see scx_enums.rs).
    let enums: Vec<(String, u64)> =
        hosted.rodata.iter().filter_map(|r| Some((r.name.clone(), scx_enums::value_of(&r.name)?))).collect();
    for (k, v) in enums {
        hosted.set_rodata(&k, &v.to_string())?;
    }
    for (k, v) in &cfg.rodata {
        hosted.set_rodata(k, v)?;
    }
    hosted.state.budget_ns.set(cfg.op_timeout_ns.unwrap_or(fault::DEFAULT_BUDGET_NS));
    // What the load wrote itself: the arena globals' and the resizable
    // arrays' pointers.
    hosted.state.pages.seal();
    Ok(hosted)
}

/// A cid-form scheduler's state: bpf_scx_reg_cid() requires exactly one
/// arena map (the kernel finds it through the struct_ops programs; here,
/// the object's), and the ops after `priv` (schedlab_cid.h).
fn cid_state(inner: &Inner, ops: *mut SchedExtOpsC) -> Result<cid::CidState, String> {
    let arenas: Vec<usize> = inner.maps.iter().enumerate().filter(|(_, m)| m.def.kind == MapKind::Arena).map(|(i, _)| i).collect();
    let arena = match arenas[..] {
        [a] => a,
        [] => return Err("cid-form scheduler must use a BPF arena map (sched_ext refuses it)".into()),
        _ => return Err("cid-form scheduler uses multiple arena maps (sched_ext refuses it)".into()),
    };
    // SAFETY: a struct sched_ext_ops_cid: its prefix is SchedExtOpsC and
    // the tail follows `priv` (8-aligned, as the C layout has it).
    let tail = unsafe { ops.cast::<u8>().add(std::mem::size_of::<SchedExtOpsC>()).cast::<cid::CidOpsTailC>().read() };
    Ok(cid::CidState::new(tail, arena))
}

/// Gives every RESIZABLE_ARRAY() its storage: `resize` elements where the
/// loader resized it, else the one element it is declared with.
///
/// `u64 RESIZABLE_ARRAY(data, arr);` is `arr[1]` in section `.data.arr`;
/// libbpf resizes such an array by resizing its map before load. A native
/// object cannot grow a global, so the descriptor unit (scan.rs) compiles
/// `arr` as `(*__schedlab_resizable_arr)`, a pointer to the array the host
/// allocates here (zeroed, 8-byte aligned), before any program runs.
fn resizable(pages: &loader::Pages, arrays: &[Rodata], resize: &[(String, u64)]) -> Result<Vec<(Rodata, Vec<u64>)>, String> {
    for (name, _) in resize {
        if !arrays.iter().any(|a| &a.name == name) {
            let have: Vec<&str> = arrays.iter().map(|a| a.name.as_str()).collect();
            return Err(format!(
                "resize `{name}`: no RESIZABLE_ARRAY() of that name; the scheduler's resizable arrays are: {}",
                if have.is_empty() { "(none)".to_string() } else { have.join(", ") }
            ));
        }
    }
    let mut out = Vec::new();
    for a in arrays {
        let n = resize.iter().rev().find(|(n, _)| n == &a.name).map_or(1, |r| r.1);
        let bytes = (a.elem_size as u64).checked_mul(n).filter(|b| *b <= 1 << 30).ok_or_else(|| {
            format!("resize `{}`: {n} elements of {} bytes is too large", a.name, a.elem_size)
        })?;
        let mut store = vec![0u64; (bytes as usize).div_ceil(8).max(1)];
        let p = store.as_mut_ptr() as usize;
        loader::write_rodata(pages, a, 0, &p.to_ne_bytes()[..a.size as usize])?;
        // The array as a loader writes it (`skel->rodata_NAME->NAME[i]`).
        let view = Rodata {
            name: a.name.clone(),
            ptr: p,
            size: bytes as u32,
            elem_size: a.elem_size,
            kind: a.row_elems,
            nr_elems: n as u32,
            row_elems: 0,
        };
        out.push((view, store));
    }
    Ok(out)
}

impl Drop for HostedScheduler {
    fn drop(&mut self) {
        self.state.pages.seal();
        fpe::unregister(&self.fpe_slots);
    }
}

impl HostedScheduler {
    /// The source this was built from.
    pub fn source(&self) -> &Path {
        &self.source
    }

    /// Whether the compile was a cache hit.
    /// The published crate (name, version) the scheduler was built from.
    pub fn origin(&self) -> Option<&(String, String)> {
        self.origin.as_ref()
    }

    /// The object came from the compile cache.
    pub fn cache_hit(&self) -> bool {
        self.cache_hit
    }

    fn ops(&self) -> &SchedExtOpsC {
        // SAFETY: the ops variable lives in the loaded object, which this
        // scheduler keeps mapped.
        unsafe { &*self.ops }
    }

    /// The names of the scheduler's rodata (`const volatile` globals).
    pub fn rodata_names(&self) -> Vec<String> {
        self.rodata.iter().chain(self.arrays.iter().map(|(a, _)| a)).map(|r| r.name.clone()).collect()
    }

    /// Rodata (or a resized array) named `base`, without its index.
    fn rodata_named(&self, base: &str) -> Option<&Rodata> {
        let resized = || self.arrays.iter().map(|(a, _)| a).find(|a| a.name == base);
        self.rodata.iter().find(|r| r.name == base).or_else(resized)
    }

    fn find_rodata(&self, name: &str) -> Result<(&Rodata, Option<usize>), HostError> {
        let (base, index) = split_index(name)?;
        match self.rodata_named(base) {
            Some(r) => Ok((r, flat_index(r, name, &index)?)),
            None => Err(HostError::UnknownRodata {
                name: base.to_string(),
                valid: if self.rodata.is_empty() { "(none)".into() } else { self.rodata_names().join(", ") },
            }),
        }
    }

    /// Sets rodata `name` (or `name[i]`) from text, as a loader does before
    /// attaching. Do this before the scheduler's `init`.
    pub fn set_rodata(&self, name: &str, value: &str) -> Result<(), HostError> {
        let (r, index) = self.find_rodata(name)?;
        self.write_text(r, index, value)
    }

    /// Writes `value`, parsed as `r`'s type, into `r` (element `index` of
    /// an array, or the whole variable), and seals the pages it opened:
    /// the scheduler's code runs with its rodata read-only, as in the
    /// kernel, and sealing here spares every call a test of the pages.
    fn write_text(&self, r: &Rodata, index: Option<usize>, value: &str) -> Result<(), HostError> {
        let (offset, bytes) = loader::parse_rodata(r, index, value).map_err(HostError::BadRodata)?;
        let written = loader::write_rodata(&self.state.pages, r, offset, &bytes).map_err(HostError::BadRodata);
        self.state.pages.seal();
        written
    }

    /// Sets `name` (or `name[i]`) from text: a rodata variable, or else a
    /// scalar .bss/.data global (as a loader writes `skel->bss->x`).
    pub fn set_value(&self, name: &str, value: &str) -> Result<(), HostError> {
        let (base, index) = split_index(name)?;
        // Rodata whose index fits is set as such; anything else is looked
        // up among the globals (and an error names both lists).
        if let Some(r) = self.rodata_named(base) {
            if let Ok(index) = flat_index(r, name, &index) {
                return self.write_text(r, index, value);
            }
        }
        let Some(g) = self.globals.iter().find(|g| g.name == base) else {
            let mut valid = self.rodata_names();
            valid.extend(self.globals.iter().map(|g| g.name.clone()));
            return Err(HostError::UnknownRodata {
                name: base.to_string(),
                valid: if valid.is_empty() { "(none)".into() } else { valid.join(", ") },
            });
        };
        let index = flat_index(g, name, &index)?;
        self.write_text(g, index, value)
    }

    /// Sets the struct_ops flags before attaching, as a loader assigns
    /// `skel->struct_ops.NAME->flags` (`replace`) or ORs into them.
    pub fn set_ops_flags(&self, bits: u64, replace: bool) {
        // SAFETY: `ops` points at the scheduler's ops variable, a writable
        // global of the loaded object; nothing else holds a reference to it
        // while the host is not inside a callback.
        unsafe {
            let f = std::ptr::addr_of_mut!((*self.ops).flags);
            f.write(if replace { bits } else { f.read() | bits });
        }
    }

    /// Keeps `runs` for right after the attach ([`ExtOps::attached`](schedlab::sched::ext::ops::ExtOps::attached)).
    pub fn run_after_attach(&self, runs: Vec<crate::profile::resolve::Run>) {
        self.after_attach.borrow_mut().extend(runs);
    }

    /// [`HostedScheduler::run_syscall`] on CPU `cpu`, as a loader pinned
    /// to that CPU runs it (`bpf_get_smp_processor_id()` answers `cpu`).
    pub fn run_syscall_on(&self, sim: &mut Sim, name: &str, ctx: &mut [u8], cpu: u32) -> Result<i32, HostError> {
        let saved = sim.this_cpu;
        sim.this_cpu = cpu as Cpu;
        let r = self.run_syscall(sim, name, ctx);
        sim.this_cpu = saved;
        r
    }

    /// The current bytes of a writable global (.bss/.data, including a
    /// RESIZABLE_ARRAY() at its resized length), as user space reads its
    /// data maps.
    pub fn global_bytes(&self, name: &str) -> Option<Vec<u8>> {
        if let Some(g) = self.globals.iter().find(|g| g.name == name) {
            return Some(loader::read_rodata(g));
        }
        let (view, _) = self.arrays.iter().find(|(a, _)| a.name == name)?;
        Some(loader::read_rodata(view))
    }

    /// The current bytes of rodata `name`.
    pub fn rodata_bytes(&self, name: &str) -> Result<Vec<u8>, HostError> {
        Ok(loader::read_rodata(self.find_rodata(name)?.0))
    }

    /// The names of the SEC("syscall") programs.
    pub fn programs(&self) -> Vec<String> {
        self.progs.keys().cloned().collect()
    }

    /// Runs SEC("syscall") program `name` with `ctx` as its context, as
    /// `bpf_prog_test_run_opts()` would; returns its return value.
    pub fn run_syscall(&self, sim: &mut Sim, name: &str, ctx: &mut [u8]) -> Result<i32, HostError> {
        let Some(&f) = self.progs.get(name) else {
            return Err(HostError::UnknownProgram { name: name.to_string(), valid: self.programs().join(", ") });
        };
        if self.state.dead() {
            return Err(HostError::Fault(format!("SEC(\"syscall\") {name}(): not run, the scheduler faulted before")));
        }
        // bpf_prog_test_run() runs in the calling task's context.
        sim.irq_ctx = schedlab::sched::sim::IrqCtx::Task;
        let p: *mut c_void = if ctx.is_empty() { std::ptr::null_mut() } else { ctx.as_mut_ptr().cast() };
        // A syscall program is `int prog(void *ctx)`; `ctx` outlives the
        // call and the program reads at most its declared context size,
        // which the caller provides.
        match self.state.call_c(sim, Callee::Syscall(name), f, [p as u64, 0, 0, 0]) {
            Some(r) => Ok(r as i32),
            None => Err(HostError::Fault(
                self.state.last_fault.borrow().clone().unwrap_or_else(|| format!("SEC(\"syscall\") {name}() faulted")),
            )),
        }
    }

    /// The names of the scheduler's maps.
    pub fn map_names(&self) -> Vec<String> {
        self.state.inner.borrow().maps.iter().map(|m| m.def.name.clone()).collect()
    }

    fn with_map<R>(&self, name: &str, f: impl FnOnce(&mut Map) -> R) -> Option<R> {
        let mut inner = self.state.inner.borrow_mut();
        inner.maps.iter_mut().find(|m| m.def.name == name).map(f)
    }

    /// A copy of the value under `key` (CPU `cpu`'s copy for a per-CPU
    /// map on an `nr_cpus` machine), as user space reads a map.
    pub fn map_lookup(&self, name: &str, key: &[u8], cpu: u32, nr_cpus: u32) -> Option<Vec<u8>> {
        self.with_map(name, |m| {
            let size = m.def.value_size as usize;
            let p = if m.def.kind == MapKind::PercpuArray {
                m.lookup_percpu(key, cpu, nr_cpus)
            } else {
                m.lookup(key, cpu, nr_cpus)
            };
            // SAFETY: a non-NULL lookup result points at `size` bytes of the map.
            (!p.is_null() && m.def.kind != MapKind::ArrayOfMaps)
                .then(|| unsafe { std::slice::from_raw_parts(p, size) }.to_vec())
        })
        .flatten()
    }

    /// `bpf_map_update_elem()` from user space: 0 or a negative errno.
    pub fn map_update(&self, name: &str, key: &[u8], value: &[u8], flags: u64) -> Option<i64> {
        self.with_map(name, |m| m.update(key, value, flags, 0, 1))
    }

    /// `bpf_map_create()` of a `map_type` map from user space, then
    /// `bpf_map_update_elem(outer, &slot, &fd)`: the new map becomes slot
    /// `slot` of the map-in-map `outer`, as scx_pair's loader gives each
    /// cgroup index its own queue.
    pub fn create_inner_map(&self, outer: &str, slot: u32, map_type: u32, key_size: u32, value_size: u32, max_entries: u32) -> Result<(), HostError> {
        let err = |msg: String| HostError::Map { map: outer.to_string(), msg };
        let kind = MapKind::from_type(map_type)
            .ok_or_else(|| err(format!("an inner map of BPF map type {map_type} is not supported ({} are)", maps::SUPPORTED)))?;
        if kind.is_map_in_map() || kind.is_storage() || matches!(kind, MapKind::Ringbuf | MapKind::UserRingbuf | MapKind::Arena | MapKind::PerfEventArray) {
            return Err(err(format!("a {kind:?} map cannot be an inner map (the kernel's bpf_map_meta_alloc refuses it)")));
        }
        let mut inner = self.state.inner.borrow_mut();
        let inner = &mut *inner;
        let Some(oi) = inner.maps.iter().position(|m| m.def.name == outer) else {
            let names: Vec<&str> = inner.maps.iter().map(|m| m.def.name.as_str()).collect();
            return Err(err(format!("no such map; the scheduler's maps are: {}", names.join(", "))));
        };
        if !inner.maps[oi].def.kind.is_map_in_map() {
            return Err(err(format!("a {:?} map holds no inner maps: name an ARRAY_OF_MAPS or HASH_OF_MAPS", inner.maps[oi].def.kind)));
        }
        let def = MapDef { name: format!("{outer}[{slot}]"), kind, key_size, value_size, max_entries, flags: 0, extra: 0 };
        maps::check_def(&def).map_err(err)?;
        // The new map's identity for BPF: an address that stays put.
        let anchor = Box::new(0u64);
        let addr = &*anchor as *const u64 as usize;
        let index = inner.maps.len();
        inner.maps.push(Map::new(def));
        inner.map_addr.insert(addr, index);
        inner.inner_maps.push(anchor);
        if !inner.maps[oi].set_inner(slot, addr) {
            let max = inner.maps[oi].def.max_entries;
            return Err(err(format!("slot {slot} is past its {max} entries (bpf_map_update_elem: E2BIG)")));
        }
        Ok(())
    }

    /// Elements in map `name`.
    pub fn map_len(&self, name: &str) -> Option<usize> {
        self.with_map(name, |m| m.len())
    }

    /// User space consumes ring buffer `name` (ring_buffer__consume()):
    /// every submitted record, in order, up to the first one still reserved.
    pub fn ringbuf_consume(&self, name: &str) -> Option<Vec<Vec<u8>>> {
        self.with_map(name, |m| (m.def.kind == MapKind::Ringbuf).then(|| m.ring().map(|r| r.consume(usize::MAX))))
            .flatten()
            .flatten()
    }

    /// User space writes a record into USER_RINGBUF `name`: 0, -E2BIG
    /// (larger than the buffer) or -ENOSPC (full now); None: no such map.
    pub fn user_ringbuf_push(&self, name: &str, data: &[u8]) -> Option<i64> {
        self.with_map(name, |m| {
            (m.def.kind == MapKind::UserRingbuf).then(|| m.ring().map(|r| r.user_push(data).err().unwrap_or(0)))
        })
        .flatten()
        .flatten()
    }

    /// Installs a perf event counting `config` of perf type `type_` on
    /// `cpu` in slot `slot` of PERF_EVENT_ARRAY `name`, as user space does
    /// with perf_event_open() and a map update; counting starts now.
    pub fn perf_event_install(&self, sim: &Sim, name: &str, slot: u32, cpu: u32, type_: u32, config: u64) -> bool {
        let busy0 = rtfns::cpu_busy_ns(sim, cpu.min(sim.nr_cpus() as u32 - 1));
        let ev = perf::PerfEvent { type_, config, cpu, busy0, t0: sim.now() };
        self.with_map(name, |m| {
            m.perf_slots().and_then(|s| s.get_mut(slot as usize)).map(|s| s.event = Some(ev)).is_some()
        })
        .unwrap_or(false)
    }

    /// bpf_printk() output so far.
    pub fn trace_log(&self) -> Vec<String> {
        self.state.inner.borrow().trace.clone()
    }

}

/// `name` or `name[i]`.
/// `name`, `name[i]` or `name[i][j]` -> (name, indices).
fn split_index(name: &str) -> Result<(&str, Vec<usize>), HostError> {
    let bad = || HostError::BadRodata(format!("`{name}`: bad index; write name[3] or name[3][0]"));
    let Some((b, mut rest)) = name.split_once('[') else { return Ok((name.trim(), Vec::new())) };
    let mut idx = Vec::new();
    loop {
        let (i, after) = rest.split_once(']').ok_or_else(bad)?;
        idx.push(i.trim().parse::<usize>().map_err(|_| bad())?);
        match after.trim().strip_prefix('[') {
            Some(r) => rest = r,
            None if after.trim().is_empty() => break,
            None => return Err(bad()),
        }
    }
    Ok((b.trim(), idx))
}

/// The element a list of indices names in `r`, counted over the whole
/// array: `a[i][j]` of `T a[R][C]` is element `i * C + j`.
fn flat_index(r: &Rodata, name: &str, idx: &[usize]) -> Result<Option<usize>, HostError> {
    let bad = |m: String| HostError::BadRodata(format!("`{name}`: {m}"));
    match (idx, r.row_elems) {
        ([], _) => Ok(None),
        ([i], 0) => Ok(Some(*i)),
        ([_], c) => Err(bad(format!("`{}` is two-dimensional ({c} per row): write {}[ROW][COLUMN]", r.name, r.name))),
        ([i, j], c) if c > 0 => {
            if *j >= c as usize {
                return Err(bad(format!("column {j} out of range 0..{c}")));
            }
            Ok(Some(i.saturating_mul(c as usize).saturating_add(*j)))
        }
        _ => Err(bad(format!("`{}` has {} dimension(s)", r.name, if r.row_elems > 0 { 2 } else { usize::from(r.nr_elems > 0) }))),
    }
}

