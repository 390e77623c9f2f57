//! Loading a compiled scheduler: dlopen of the object (in place, or a
//! private copy when it is already resident), `schedlab_attach()`, and the
//! descriptor tables it returns (the Rust mirrors of
//! shim/schedlab_abi.h), plus rodata writes.
//!
//! Isolation: dlopen() of a path already loaded returns the same instance,
//! globals included. So the first load of a cached object opens it in
//! place, and a load of an object this process already has resident (two
//! worlds at once, or one the dynamic loader kept after dlclose) opens a
//! private copy: the cached object copied to a new unique file, unlinked
//! right after dlopen (the mapping stays), so nothing is left behind even
//! if the process dies. Cache entries are replaced by rename, never
//! rewritten, so an object open in place never changes under its mapping.

use std::cell::{Cell, RefCell};
use std::ffi::{c_char, c_void, CStr};
use std::path::{Path, PathBuf};

use super::compile::unique_suffix;
use super::{ffi, HostError};

/// Number of callback slots at the start of `struct sched_ext_ops`, in the
/// shim's member order.
pub(crate) const OPS_MEMBERS: [&str; 35] = [
    "select_cpu",
    "enqueue",
    "dequeue",
    "dispatch",
    "tick",
    "runnable",
    "running",
    "stopping",
    "quiescent",
    "yield",
    "core_sched_before",
    "set_weight",
    "set_cpumask",
    "update_idle",
    "cpu_acquire",
    "cpu_release",
    "init_task",
    "exit_task",
    "enable",
    "disable",
    "dump",
    "dump_cpu",
    "dump_task",
    "cgroup_init",
    "cgroup_exit",
    "cgroup_prep_move",
    "cgroup_move",
    "cgroup_cancel_move",
    "cgroup_set_weight",
    "cgroup_set_bandwidth",
    "cgroup_set_idle",
    "cpu_online",
    "cpu_offline",
    "init",
    "exit",
];

/// `struct sched_ext_ops` as the shim's vmlinux.h lays it out.
#[repr(C)]
pub(crate) struct SchedExtOpsC {
    /// Each callback is a BPF_PROG: `RET name(u64 *ctx)`.
    pub fns: [*const c_void; 35],
    pub dispatch_max_batch: u32,
    pub flags: u64,
    pub timeout_ms: u32,
    pub exit_dump_len: u32,
    pub hotplug_seq: u64,
    pub sub_cgroup_id: u64,
    pub name: [u8; 128],
    pub priv_: *mut c_void,
}

#[repr(C)]
pub(crate) struct MapDescC {
    pub name: *const c_char,
    pub map: *mut c_void,
    pub type_: u32,
    pub key_size: u32,
    pub value_size: u32,
    pub max_entries: u32,
    pub map_flags: u32,
    pub _pad: u32,
}

#[repr(C)]
pub(crate) struct MapSlotC {
    pub outer: u32,
    pub slot: u32,
    pub inner: *mut c_void,
}

/// `enum schedlab_rodata_kind`.
pub(crate) mod ro_kind {
    pub(crate) const BOOL: u32 = 1;
    pub(crate) const SIGNED: u32 = 2;
    pub(crate) const UNSIGNED: u32 = 3;
    pub(crate) const CHAR: u32 = 4;
    /// A RESIZABLE_ARRAY(): the entry is the pointer the array is compiled
    /// as, `elem_size` its element size and `row_elems` its element's kind
    /// (BOOL, SIGNED, UNSIGNED, CHAR; see host::resizable).
    pub(crate) const RESIZABLE: u32 = 6;
    /// An `__arena_global` object: the entry is the pointer it is compiled
    /// as, `elem_size` its size (see host::arena_globals).
    pub(crate) const ARENA: u32 = 7;
    /// A global `struct bpf_cpumask` (or an array of them): `elem_size`
    /// is sizeof(struct bpf_cpumask), `nr_elems` how many.
    pub(crate) const BPF_CPUMASK: u32 = 8;
}

#[repr(C)]
pub(crate) struct RodataDescC {
    pub name: *const c_char,
    pub ptr: *mut c_void,
    pub size: u32,
    pub elem_size: u32,
    pub kind: u32,
    pub nr_elems: u32,
    pub row_elems: u32,
}

#[repr(C)]
pub(crate) struct OpsDescC {
    pub name: *const c_char,
    pub ops: *mut SchedExtOpsC,
    /// 1: a `struct sched_ext_ops_cid` (its prefix is laid out as SchedExtOpsC).
    pub cid: u32,
}

#[repr(C)]
pub(crate) struct ProgDescC {
    pub name: *const c_char,
    pub fn_: *mut c_void,
}

#[repr(C)]
pub(crate) struct ModuleC {
    pub abi_version: u32,
    pub sizeof_ops: u32,
    pub sizeof_task: u32,
    pub nr_maps: u32,
    pub nr_map_slots: u32,
    pub nr_rodata: u32,
    pub nr_ops: u32,
    pub nr_progs: u32,
    pub maps: *const MapDescC,
    pub map_slots: *const MapSlotC,
    pub rodata: *const RodataDescC,
    pub ops: *const OpsDescC,
    pub progs: *const ProgDescC,
    pub end_call: Option<unsafe extern "C" fn() -> u32>,
    pub nr_globals: u32,
    pub globals: *const RodataDescC,
    pub nr_map_fields: u32,
    pub map_fields: *const MapFieldC,
    pub end_call_pending: *mut u32,
}

/// `struct schedlab_map_field`.
#[repr(C)]
pub(crate) struct MapFieldC {
    pub map: u32,
    pub offset: u32,
    pub size: u32,
}

pub(crate) const ABI_VERSION: u32 = 5;

/// A rodata variable as the loader sees it.
#[derive(Clone, Debug)]
pub(crate) struct Rodata {
    pub name: String,
    pub ptr: usize,
    pub size: u32,
    pub elem_size: u32,
    pub kind: u32,
    /// Elements (0 for a scalar; of a two-dimensional array, all of them).
    pub nr_elems: u32,
    /// Elements per row of a two-dimensional array (`T a[R][C]`: C), else 0.
    pub row_elems: u32,
}

/// A loaded object.
pub(crate) struct Loaded {
    pub lib: libloading::Library,
    pub module: *mut ModuleC,
    /// Executable ranges, for the SIGFPE and fault handlers.
    pub text: Vec<(usize, usize)>,
    /// The load bias (an address in the object's debug information plus
    /// this is where it is in memory).
    pub base: usize,
}

thread_local! {
    static MISSING: RefCell<Vec<String>> = const { RefCell::new(Vec::new()) };
}

extern "C" fn resolve(name: *const c_char) -> *mut c_void {
    // SAFETY: the runtime passes string literals.
    let name = unsafe { CStr::from_ptr(name) }.to_string_lossy();
    match ffi::lookup(&name).or_else(|| super::cid::lookup(&name)) {
        Some(f) => f,
        None => {
            MISSING.with(|m| m.borrow_mut().push(name.into_owned()));
            std::ptr::null_mut()
        }
    }
}

/// Reads a C string the module owns.
///
/// # Safety
/// `p` is NULL or a NUL-terminated string that outlives the call.
pub(crate) unsafe fn c_str(p: *const c_char) -> String {
    if p.is_null() {
        return String::new();
    }
    // SAFETY: per the contract.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

/// Serialises "is it resident? then open it in place", so two threads never
/// both open one object in place.
static OPENING: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Opens `so` (in place, or a private copy when this process already has
/// it resident) and attaches the runtime.
pub(crate) fn open(so: &Path, source: &Path) -> Result<Loaded, HostError> {
    let load_err = |msg: String| HostError::Load { path: source.to_path_buf(), msg };
    let opening = OPENING.lock().unwrap_or_else(|e| e.into_inner());
    // SAFETY: RTLD_NOLOAD only looks the object up among the loaded ones; a
    // handle it returns is closed at once (the object stays as it was).
    let resident = unsafe { libloading::os::unix::Library::open(Some(so), libc::RTLD_NOW | libc::RTLD_NOLOAD) }.is_ok();
    let copy: Option<PathBuf> = if resident {
        let copy = std::env::temp_dir().join(format!("schedlab-{}.so", unique_suffix()));
        std::fs::copy(so, &copy)
            .map_err(|err| HostError::Io { what: format!("copying {} to {}", so.display(), copy.display()), err })?;
        Some(copy)
    } else {
        None
    };
    let path = copy.as_deref().unwrap_or(so);
    // SAFETY: the object is one we compiled from the shim; its only
    // initialisers are the C runtime's (no constructors of ours run).
    // RTLD_LOCAL keeps its symbols out of the global scope.
    let lib = unsafe { libloading::os::unix::Library::open(Some(path), libc::RTLD_NOW | libc::RTLD_LOCAL) };
    drop(opening);
    if let Some(copy) = &copy {
        let _ = std::fs::remove_file(copy);
    }
    let lib: libloading::Library = lib.map_err(|e| load_err(e.to_string()))?.into();

    type Attach = unsafe extern "C" fn(extern "C" fn(*const c_char) -> *mut c_void) -> *mut ModuleC;
    // SAFETY: schedlab_attach has this signature in runtime.c.
    let attach = unsafe { lib.get::<Attach>(b"schedlab_attach\0") }.map_err(|e| load_err(e.to_string()))?;
    MISSING.with(|m| m.borrow_mut().clear());
    // SAFETY: calling the runtime's attach with our resolver; it only stores
    // the returned pointers.
    let module = unsafe { attach(resolve) };
    let missing = MISSING.with(|m| std::mem::take(&mut *m.borrow_mut()));
    if module.is_null() {
        return Err(load_err(format!("the runtime needs host functions this build lacks: {}", missing.join(", "))));
    }
    // SAFETY: non-NULL module pointer into the object's data.
    let m = unsafe { &*module };
    if m.abi_version != ABI_VERSION
        || m.sizeof_ops as usize != std::mem::size_of::<SchedExtOpsC>()
        || m.sizeof_task as usize != std::mem::size_of::<schedlab::sched::ext::abi::TaskStructC>()
    {
        return Err(load_err("object built for a different shim ABI".into()));
    }
    let (text, base) = text_ranges(*attach as usize);
    Ok(Loaded { lib, module, text, base })
}

/// The value of each C constant expression of `exprs`, as the object
/// recorded it (see `compile::const_symbol`).
pub(crate) fn c_consts(loaded: &Loaded, exprs: &[String], source: &Path) -> Result<Vec<(String, i64)>, HostError> {
    let mut out = Vec::new();
    for (i, t) in exprs.iter().enumerate() {
        let sym = format!("{}\0", super::compile::const_symbol(i));
        // SAFETY: the symbol is a `const long long` the generated
        // unit defines; the Symbol's value is its address.
        let v = unsafe { loaded.lib.get::<*const i64>(sym.as_bytes()).map(|p| **p) }
            .map_err(|e| HostError::Load { path: source.to_path_buf(), msg: format!("`{t}` is not in the object: {e}") })?;
        out.push((t.clone(), v));
    }
    Ok(out)
}

struct PhdrSearch {
    base: usize,
    ranges: Vec<(usize, usize)>,
}

unsafe extern "C" fn phdr_cb(info: *mut libc::dl_phdr_info, _size: libc::size_t, data: *mut c_void) -> libc::c_int {
    // SAFETY: dl_iterate_phdr passes a valid info and our PhdrSearch.
    let (info, s) = unsafe { (&*info, &mut *data.cast::<PhdrSearch>()) };
    if info.dlpi_addr as usize != s.base {
        return 0;
    }
    for i in 0..info.dlpi_phnum as usize {
        // SAFETY: dlpi_phdr has dlpi_phnum entries.
        let ph = unsafe { &*info.dlpi_phdr.add(i) };
        if ph.p_type == libc::PT_LOAD && ph.p_flags & libc::PF_X != 0 {
            let start = info.dlpi_addr as usize + ph.p_vaddr as usize;
            s.ranges.push((start, start + ph.p_memsz as usize));
        }
    }
    1
}

/// The executable segments of the object containing `addr`, and its load bias.
fn text_ranges(addr: usize) -> (Vec<(usize, usize)>, usize) {
    // SAFETY: zeroed Dl_info is a valid out-parameter.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: dladdr only reads the address.
    if unsafe { libc::dladdr(addr as *const c_void, &mut info) } == 0 {
        return (Vec::new(), 0);
    }
    let mut s = PhdrSearch { base: info.dli_fbase as usize, ranges: Vec::new() };
    // SAFETY: the callback matches dl_iterate_phdr's contract and `s` lives
    // across the call.
    unsafe { libc::dl_iterate_phdr(Some(phdr_cb), (&mut s as *mut PhdrSearch).cast()) };
    (s.ranges, s.base)
}

/// Whether the page holding `addr` is writable now (from /proc/self/maps).
fn writable(addr: usize) -> Option<bool> {
    let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
    for line in maps.lines() {
        let mut f = line.split_whitespace();
        let (range, perms) = (f.next()?, f.next()?);
        let (a, b) = range.split_once('-')?;
        let (a, b) = (usize::from_str_radix(a, 16).ok()?, usize::from_str_radix(b, 16).ok()?);
        if addr >= a && addr < b {
            return Some(perms.as_bytes().get(1) == Some(&b'w'));
        }
    }
    None
}

/// The protection of the object's pages that rodata and global writes
/// touch. A write makes a read-only page writable and leaves it so until
/// [`Pages::seal`] makes it read-only again, which every writer does when
/// its writes are done (the load after its own, a setting after its
/// write), before any call into C: a write to such rodata from the
/// scheduler faults as it would in the kernel, and no call has to test
/// for open pages first. Rodata that shares a page with writable
/// data (as in small objects, e.g. the tests' badarg) is written as it is,
/// and a write to it from the scheduler does not fault, as before.
///
/// Only this code changes the protection of the object's pages, so each
/// page's original protection is read once (from /proc/self/maps) and
/// remembered.
#[derive(Default)]
pub(crate) struct Pages {
    /// Each page a write touched, and whether it was writable before.
    known: RefCell<Vec<(usize, bool)>>,
    /// Read-only pages made writable and not yet sealed.
    open: RefCell<Vec<usize>>,
    /// `open` is not empty.
    any_open: Cell<bool>,
}

impl Pages {
    /// Makes the page at `page` (page aligned, of size `size`) writable if
    /// it is not.
    fn unprotect(&self, page: usize, size: usize) -> std::io::Result<()> {
        let was_writable = {
            let mut known = self.known.borrow_mut();
            match known.iter().find(|(p, _)| *p == page) {
                Some(&(_, w)) => w,
                None => {
                    let w = writable(page).unwrap_or(false);
                    known.push((page, w));
                    w
                }
            }
        };
        if was_writable || self.open.borrow().contains(&page) {
            return Ok(());
        }
        // SAFETY: the page is mapped (it holds this object's rodata) and
        // page aligned; only the protection changes.
        if unsafe { libc::mprotect(page as *mut c_void, size, libc::PROT_READ | libc::PROT_WRITE) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        self.open.borrow_mut().push(page);
        self.any_open.set(true);
        Ok(())
    }

    /// Whether some page is writable that was read-only before.
    pub(crate) fn any_open(&self) -> bool {
        self.any_open.get()
    }

    /// Makes every page [`write_rodata`] made writable read-only again.
    pub(crate) fn seal(&self) {
        if !self.any_open() {
            return;
        }
        let size = page_size();
        for page in self.open.borrow_mut().drain(..) {
            // SAFETY: as in `unprotect`; restores read-only.
            unsafe { libc::mprotect(page as *mut c_void, size, libc::PROT_READ) };
        }
        self.any_open.set(false);
    }
}

fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    unsafe { libc::sysconf(libc::_SC_PAGESIZE) as usize }
}

/// Writes `bytes` at `r.ptr + offset`, making read-only pages writable
/// first (they stay so until `pages` is sealed).
pub(crate) fn write_rodata(pages: &Pages, r: &Rodata, offset: usize, bytes: &[u8]) -> Result<(), String> {
    if offset + bytes.len() > r.size as usize {
        return Err(format!("rodata `{}`: write past its {} bytes", r.name, r.size));
    }
    let addr = r.ptr + offset;
    let size = page_size();
    let start = addr & !(size - 1);
    let end = (addr + bytes.len()).div_ceil(size) * size;
    for page in (start..end).step_by(size) {
        pages.unprotect(page, size).map_err(|e| format!("rodata `{}`: mprotect: {e}", r.name))?;
    }
    // SAFETY: the destination lies inside the variable (checked above) and
    // is writable now; no Rust reference to it exists.
    unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), addr as *mut u8, bytes.len()) };
    Ok(())
}

/// Reads rodata bytes.
pub(crate) fn read_rodata(r: &Rodata) -> Vec<u8> {
    // SAFETY: the variable spans `size` readable bytes of the loaded object.
    unsafe { std::slice::from_raw_parts(r.ptr as *const u8, r.size as usize) }.to_vec()
}

/// Parses a value for rodata `r` (optionally element `index` of an array).
pub(crate) fn parse_rodata(r: &Rodata, index: Option<usize>, value: &str) -> Result<(usize, Vec<u8>), String> {
    let v = value.trim();
    let bad = |why: &str| format!("rodata `{}`: {why} (got `{value}`)", r.name);
    if r.kind == ro_kind::CHAR && r.nr_elems > 0 && index.is_none() {
        let b = v.as_bytes();
        if b.len() >= r.size as usize {
            return Err(bad(&format!("string longer than {} bytes", r.size - 1)));
        }
        let mut out = b.to_vec();
        out.resize(r.size as usize, 0);
        return Ok((0, out));
    }
    let (offset, width) = match (r.nr_elems, index) {
        (0, None) => (0, r.size as usize),
        (0, Some(_)) => return Err(bad("not an array")),
        (n, Some(i)) if i < n as usize => (i * r.elem_size as usize, r.elem_size as usize),
        (n, Some(i)) => return Err(bad(&format!("index {i} out of range 0..{n}"))),
        (n, None) => {
            // A comma-separated list fills the array from the start.
            let parts: Vec<&str> = v.split(',').collect();
            if parts.len() > n as usize {
                return Err(bad(&format!("{} values for {n} elements", parts.len())));
            }
            let mut out = Vec::new();
            for (i, p) in parts.iter().enumerate() {
                out.extend(parse_rodata(r, Some(i), p)?.1);
            }
            return Ok((0, out));
        }
    };
    let int = |s: &str| -> Option<i128> {
        let s = s.replace('_', "");
        let (neg, s) = s.strip_prefix('-').map_or((false, s.as_str()), |t| (true, t));
        let n = if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
            i128::from_str_radix(h, 16).ok()?
        } else if let Some(b) = s.strip_prefix("0b") {
            i128::from_str_radix(b, 2).ok()?
        } else {
            s.parse::<i128>().ok()?
        };
        Some(if neg { -n } else { n })
    };
    let bits = width as u32 * 8;
    let n: i128 = match r.kind {
        ro_kind::BOOL => match v.to_ascii_lowercase().as_str() {
            "1" | "true" | "yes" | "on" => 1,
            "0" | "false" | "no" | "off" => 0,
            _ => return Err(bad("expected true or false")),
        },
        ro_kind::SIGNED | ro_kind::CHAR => {
            let n = int(v).ok_or_else(|| bad("expected an integer"))?;
            let (lo, hi) = (-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1);
            if n < lo || n > hi {
                return Err(bad(&format!("out of range {lo}..={hi}")));
            }
            n
        }
        ro_kind::UNSIGNED => {
            let n = int(v).ok_or_else(|| bad("expected an unsigned integer"))?;
            let hi = (1i128 << bits) - 1;
            if n < 0 || n > hi {
                return Err(bad(&format!("out of range 0..={hi}")));
            }
            n
        }
        _ => return Err(bad("only booleans, integers and strings can be set by name")),
    };
    Ok((offset, n.to_le_bytes()[..width].to_vec()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ro(kind: u32, size: u32, elem: u32, n: u32) -> Rodata {
        Rodata { name: "x".into(), ptr: 0, size, elem_size: elem, kind, nr_elems: n, row_elems: 0 }
    }

    #[test]
    fn rodata_values_parse_per_type() {
        let b = ro(ro_kind::BOOL, 1, 1, 0);
        assert_eq!(parse_rodata(&b, None, "true").unwrap(), (0, vec![1]));
        assert_eq!(parse_rodata(&b, None, "off").unwrap(), (0, vec![0]));
        assert!(parse_rodata(&b, None, "maybe").is_err());
        let u64_ = ro(ro_kind::UNSIGNED, 8, 8, 0);
        assert_eq!(parse_rodata(&u64_, None, "0x10").unwrap().1, 16u64.to_le_bytes());
        assert_eq!(parse_rodata(&u64_, None, "20_000_000").unwrap().1, 20_000_000u64.to_le_bytes());
        assert_eq!(parse_rodata(&u64_, None, "18446744073709551615").unwrap().1, u64::MAX.to_le_bytes());
        assert!(parse_rodata(&u64_, None, "-1").unwrap_err().contains("out of range"));
        let s32 = ro(ro_kind::SIGNED, 4, 4, 0);
        assert_eq!(parse_rodata(&s32, None, "-5").unwrap().1, (-5i32).to_le_bytes());
        assert!(parse_rodata(&s32, None, "2147483648").is_err());
        assert!(parse_rodata(&s32, None, "12abc").unwrap_err().contains("expected an integer"));
        let u8_ = ro(ro_kind::UNSIGNED, 1, 1, 0);
        assert!(parse_rodata(&u8_, None, "256").is_err());
    }

    #[test]
    fn rodata_arrays_and_strings() {
        let arr = ro(ro_kind::UNSIGNED, 16, 4, 4);
        assert_eq!(parse_rodata(&arr, Some(2), "7").unwrap(), (8, 7u32.to_le_bytes().to_vec()));
        assert!(parse_rodata(&arr, Some(4), "7").is_err());
        let (off, bytes) = parse_rodata(&arr, None, "1,2").unwrap();
        assert_eq!((off, bytes.len()), (0, 8));
        assert!(parse_rodata(&arr, None, "1,2,3,4,5").is_err());
        let s = ro(ro_kind::CHAR, 8, 1, 8);
        assert_eq!(parse_rodata(&s, None, "abc").unwrap().1, b"abc\0\0\0\0\0");
        assert!(parse_rodata(&s, None, "12345678").is_err());
        assert!(parse_rodata(&ro(5, 16, 16, 0), None, "1").unwrap_err().contains("only booleans"));
    }

    #[test]
    fn rodata_pages_stay_writable_until_sealed() {
        let size = page_size();
        let map = |prot| {
            // SAFETY: a fresh private anonymous mapping of two pages.
            let p = unsafe { libc::mmap(std::ptr::null_mut(), 2 * size, prot, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1, 0) };
            assert_ne!(p, libc::MAP_FAILED);
            p as usize
        };
        let base = map(libc::PROT_READ);
        // A variable across the two pages.
        let r = Rodata { ptr: base + size - 4, ..ro(ro_kind::UNSIGNED, 8, 8, 0) };
        let pages = Pages::default();
        write_rodata(&pages, &r, 0, &7u64.to_ne_bytes()).unwrap();
        assert!(pages.any_open());
        assert_eq!((writable(base), writable(base + size)), (Some(true), Some(true)));
        write_rodata(&pages, &r, 4, &[9]).unwrap();
        assert_eq!(read_rodata(&r), [7, 0, 0, 0, 9, 0, 0, 0]);
        pages.seal();
        assert!(!pages.any_open());
        assert_eq!((writable(base), writable(base + size)), (Some(false), Some(false)));
        // A later write opens only the page it touches.
        write_rodata(&pages, &r, 6, &[1]).unwrap();
        assert_eq!((writable(base), writable(base + size)), (Some(false), Some(true)));
        pages.seal();
        assert_eq!(writable(base + size), Some(false));
        assert!(write_rodata(&pages, &r, 6, &[1, 2, 3]).unwrap_err().contains("write past"));
        // A writable page is written as it is and never sealed.
        let rw = map(libc::PROT_READ | libc::PROT_WRITE);
        let g = Rodata { ptr: rw, ..ro(ro_kind::UNSIGNED, 8, 8, 0) };
        write_rodata(&pages, &g, 0, &3u64.to_ne_bytes()).unwrap();
        assert!(!pages.any_open());
        pages.seal();
        assert_eq!(writable(rw), Some(true));
        for p in [base, rw] {
            // SAFETY: the mappings made above, no longer used.
            unsafe { libc::munmap(p as *mut c_void, 2 * size) };
        }
    }
}
