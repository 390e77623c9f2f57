//! Compiling a scheduler's `.bpf.c` into a shared object, with a
//! content-addressed cache.
//!
//! The shim (headers and runtime.c) is embedded in the binary and written
//! once per content hash under the cache directory, so compiling works from
//! any working directory. The cache key hashes the scheduler as the
//! preprocessor sees it (so its own headers count), the generated
//! descriptor unit, every shim file, the compiler's `--version` and the
//! flags. Objects are written to a temporary name and renamed into place,
//! so a concurrent or interrupted compile never leaves a torn file.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

use sha2::{Digest, Sha256};

use super::scan::{self, Scan};
use super::source::BuildSpec;
use super::HostError;

/// The shim, embedded: (path under the shim directory, contents).
pub const SHIM_FILES: &[(&str, &str)] = &[
    ("include/vmlinux.h", include_str!("../shim/include/vmlinux.h")),
    ("include/schedlab_kobj.h", include_str!("../shim/include/schedlab_kobj.h")),
    ("include/schedlab_cid.h", include_str!("../shim/include/schedlab_cid.h")),
    ("include/bpf/bpf_helpers.h", include_str!("../shim/include/bpf/bpf_helpers.h")),
    ("include/bpf/bpf_tracing.h", include_str!("../shim/include/bpf/bpf_tracing.h")),
    ("include/bpf/bpf_core_read.h", include_str!("../shim/include/bpf/bpf_core_read.h")),
    ("include/bpf/bpf_endian.h", include_str!("../shim/include/bpf/bpf_endian.h")),
    ("include/asm-generic/errno.h", include_str!("../shim/include/asm-generic/errno.h")),
    ("include/asm-generic/errno-base.h", include_str!("../shim/include/asm-generic/errno-base.h")),
    ("include/schedlab_native.h", include_str!("../shim/include/schedlab_native.h")),
    ("include/schedlab_native_post.h", include_str!("../shim/include/schedlab_native_post.h")),
    ("pre/bpf_experimental.h", include_str!("../shim/pre/bpf_experimental.h")),
    ("pre/bpf_atomic.h", include_str!("../shim/pre/bpf_atomic.h")),
    ("pre/bpf_arena_spin_lock.h", include_str!("../shim/pre/bpf_arena_spin_lock.h")),
    ("pre/bpf_arena_common.bpf.h", include_str!("../shim/pre/bpf_arena_common.bpf.h")),
    ("pre/scx/bpf_arena_common.bpf.h", include_str!("../shim/pre/scx/bpf_arena_common.bpf.h")),
    ("include/scx/common.bpf.h", include_str!("../shim/include/scx/common.bpf.h")),
    ("include/scx/compat.bpf.h", include_str!("../shim/include/scx/compat.bpf.h")),
    ("include/scx/user_exit_info.h", include_str!("../shim/include/scx/user_exit_info.h")),
    ("include/scx/user_exit_info.bpf.h", include_str!("../shim/include/scx/user_exit_info.bpf.h")),
    ("include/scx/user_exit_info_common.h", include_str!("../shim/include/scx/user_exit_info_common.h")),
    ("include/scx/percpu.bpf.h", include_str!("../shim/include/scx/percpu.bpf.h")),
    ("include/scx/enums.bpf.h", include_str!("../shim/include/scx/enums.bpf.h")),
    ("include/scx/enums.autogen.bpf.h", include_str!("../shim/include/scx/enums.autogen.bpf.h")),
    ("include/scx/enum_defs.autogen.h", include_str!("../shim/include/scx/enum_defs.autogen.h")),
    ("schedlab_abi.h", include_str!("../shim/schedlab_abi.h")),
    ("runtime.c", include_str!("../shim/runtime.c")),
    ("runtime_ds.c", include_str!("../shim/runtime_ds.c")),
    ("runtime_cid.c", include_str!("../shim/runtime_cid.c")),
];

/// Language and code generation flags for every scheduler.
///
/// - `-fwrapv`: BPF arithmetic wraps.
/// - `-fno-isolate-erroneous-paths-dereference`: GCC would otherwise turn a
///   division by a constant zero into a trap; BPF defines it (x/0 = 0), and
///   the host's SIGFPE handler does the same for the runtime case.
/// - `-fno-delete-null-pointer-checks`: NULL checks after a dereference stay.
/// - `-fvisibility=hidden`: only `schedlab_attach` is exported, so nothing a
///   scheduler defines can be interposed by another object.
/// - `-w`: schedulers written for clang draw GCC warnings nobody asked for;
///   errors still show.
/// - `-g`: line tables, so a fault names the source line (fault.rs).
const GCC_FLAGS: &[&str] = &[
    "-std=gnu11",
    "-O2",
    "-g",
    "-fPIC",
    "-fvisibility=hidden",
    "-fno-strict-aliasing",
    "-fwrapv",
    "-fno-common",
    "-fno-isolate-erroneous-paths-dereference",
    "-fno-delete-null-pointer-checks",
    "-w",
];
const CLANG_FLAGS: &[&str] =
    &["-std=gnu11", "-O2", "-g", "-fPIC", "-fvisibility=hidden", "-fno-strict-aliasing", "-fwrapv", "-fno-common", "-w"];

/// Bumped when the object layout the loader expects changes.
const CACHE_TAG: &str = "schedlab-host-v1";

/// The C compiler: `$SCHEDLAB_CC`, `$CC`, or `cc`.
pub fn compiler() -> String {
    std::env::var("SCHEDLAB_CC").or_else(|_| std::env::var("CC")).unwrap_or_else(|_| "cc".into())
}

/// `$SCHEDLAB_CACHE_DIR`, `$XDG_CACHE_HOME/schedlab` or `~/.cache/schedlab`.
pub fn cache_dir() -> PathBuf {
    let var = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty()).map(PathBuf::from);
    if let Some(d) = var("SCHEDLAB_CACHE_DIR") {
        return d;
    }
    if let Some(d) = var("XDG_CACHE_HOME") {
        return d.join("schedlab");
    }
    if let Some(h) = var("HOME") {
        return h.join(".cache").join("schedlab");
    }
    std::env::temp_dir().join("schedlab-cache")
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn io_err(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> HostError {
    let what = what.into();
    move |err| HostError::Io { what, err }
}

static UNIQUE: AtomicU64 = AtomicU64::new(0);

/// A name no other writer in this or another process uses.
pub fn unique_suffix() -> String {
    format!("{}-{}", std::process::id(), UNIQUE.fetch_add(1, Ordering::Relaxed))
}

/// Writes `data` to `path` through a temporary file and a rename.
fn write_atomic(path: &Path, data: &[u8]) -> Result<(), HostError> {
    let tmp = path.with_extension(format!("tmp-{}", unique_suffix()));
    std::fs::write(&tmp, data).map_err(io_err(format!("writing {}", tmp.display())))?;
    std::fs::rename(&tmp, path).map_err(io_err(format!("renaming into {}", path.display())))
}

/// The SHA-256 of the embedded shim (each file's name and contents, in
/// `SHIM_FILES` order), computed by build.rs from the same files.
fn shim_hash() -> String {
    env!("SCHEDLAB_SHIM_SHA256").to_string()
}

/// The shim directory under `cache`, written on first use.
pub fn materialize_shim(cache: &Path) -> Result<PathBuf, HostError> {
    let dir = cache.join(format!("shim-{}", &shim_hash()[..16]));
    if dir.join("runtime.c").exists() {
        return Ok(dir);
    }
    // Build it beside, then rename the whole directory into place.
    let tmp = cache.join(format!("shim-tmp-{}", unique_suffix()));
    for (name, text) in SHIM_FILES {
        let p = tmp.join(name);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent).map_err(io_err(format!("creating {}", parent.display())))?;
        }
        std::fs::write(&p, text).map_err(io_err(format!("writing {}", p.display())))?;
    }
    if std::fs::rename(&tmp, &dir).is_err() {
        // Another process won the race; its copy is identical.
        let _ = std::fs::remove_dir_all(&tmp);
        if !dir.join("runtime.c").exists() {
            return Err(HostError::Io {
                what: format!("creating {}", dir.display()),
                err: std::io::Error::other("rename failed"),
            });
        }
    }
    Ok(dir)
}

/// The compiler's identity (`cc --version`), memoised per compiler name.
fn compiler_version(cc: &str) -> Result<String, HostError> {
    static SEEN: OnceLock<Mutex<Vec<(String, String)>>> = OnceLock::new();
    let seen = SEEN.get_or_init(|| Mutex::new(Vec::new()));
    if let Some((_, v)) = seen.lock().unwrap_or_else(|e| e.into_inner()).iter().find(|(c, _)| c == cc) {
        return Ok(v.clone());
    }
    let out =
        Command::new(cc).arg("--version").output().map_err(|err| HostError::NoCompiler { cc: cc.to_string(), err })?;
    let v = String::from_utf8_lossy(&out.stdout).into_owned();
    seen.lock().unwrap_or_else(|e| e.into_inner()).push((cc.to_string(), v.clone()));
    Ok(v)
}

/// A compiled scheduler in the cache.
#[derive(Clone, Debug)]
pub struct Compiled {
    /// The cached shared object.
    pub so: PathBuf,
    /// Whether the object came from the cache.
    pub cache_hit: bool,
    /// The content hash naming it.
    pub key: String,
}

/// Runs the compiler, forwarding each diagnostic line to stderr as the
/// compiler prints it (a long build shows its warnings and errors as they
/// come) and keeping them for the error.
fn run(cmd: &mut Command, cc: &str, path: &Path, echo: bool) -> Result<Vec<u8>, HostError> {
    use std::io::{BufRead, Read};
    let mut child = cmd
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|err| HostError::NoCompiler { cc: cc.to_string(), err })?;
    let mut stdout = child.stdout.take().expect("piped stdout");
    let reader = std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = stdout.read_to_end(&mut buf);
        buf
    });
    let mut lines = Vec::new();
    if let Some(err) = child.stderr.take() {
        for line in std::io::BufReader::new(err).lines().map_while(Result::ok) {
            if echo {
                eprintln!("{line}");
            }
            lines.push(line);
        }
    }
    let out = reader.join().unwrap_or_default();
    let status = child.wait().map_err(|err| HostError::NoCompiler { cc: cc.to_string(), err })?;
    if !status.success() {
        return Err(HostError::Compile { path: path.to_path_buf(), stderr: lines.join("\n") });
    }
    Ok(out)
}

/// Whether compiler diagnostics go to stderr as they come
/// (`SCHEDLAB_QUIET_CC=1` keeps them in the error only).
fn echo_diagnostics() -> bool {
    std::env::var_os("SCHEDLAB_QUIET_CC").is_none_or(|v| v.is_empty() || v == "0")
}

/// What every scheduler object is compiled with besides the flags: BPF
/// C (`__BPF__`, which scx's headers test to declare their BPF side),
/// natively (`__SCHEDLAB_NATIVE__`, which keeps the shim's headers from
/// deferring to libbpf's as they do for `clang -target bpf`), and scx's
/// target-architecture define.
fn unit_defines() -> [&'static str; 3] {
    ["-D__BPF__", "-D__SCHEDLAB_NATIVE__", arch_define()]
}

/// The target-architecture define scx's build passes (`-D__SCX_TARGET_ARCH_x86`).
fn arch_define() -> &'static str {
    if cfg!(target_arch = "aarch64") {
        "-D__SCX_TARGET_ARCH_arm64"
    } else if cfg!(target_arch = "riscv64") {
        "-D__SCX_TARGET_ARCH_riscv"
    } else if cfg!(target_arch = "powerpc64") {
        "-D__SCX_TARGET_ARCH_powerpc"
    } else if cfg!(target_arch = "s390x") {
        "-D__SCX_TARGET_ARCH_s390"
    } else {
        "-D__SCX_TARGET_ARCH_x86"
    }
}

/// The files a preprocessed text came from (its line markers).
fn included_files(pre: &str) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    for l in pre.lines() {
        let Some(rest) = l.strip_prefix("# ") else { continue };
        let Some(q) = rest.find('"') else { continue };
        let name = &rest[q + 1..];
        let Some(end) = name.find('"') else { continue };
        let name = &name[..end];
        // <built-in> and <command-line>; and GCC's -fworking-directory
        // marker (`# 1 "/cwd//"`, emitted with -g), a directory, which
        // could never be hashed and so kept the quick record from being
        // written at all.
        if name.starts_with('<') || name.ends_with('/') {
            continue;
        }
        let p = PathBuf::from(name);
        if !out.contains(&p) {
            out.push(p);
        }
    }
    out.sort();
    out
}

fn file_hash(p: &Path) -> Option<String> {
    let data = std::fs::read(p).ok()?;
    Some(hex(&Sha256::digest(&data)))
}

/// The compiler's executable, found on PATH, and its size and mtime: what
/// the quick key uses instead of running `cc --version`.
fn compiler_identity(cc: &str) -> String {
    let path = if cc.contains('/') {
        Some(PathBuf::from(cc))
    } else {
        std::env::var_os("PATH")
            .map(|p| std::env::split_paths(&p).map(|d| d.join(cc)).find(|c| c.is_file()))
            .unwrap_or(None)
    };
    let Some(path) = path.and_then(|p| std::fs::canonicalize(p).ok()) else { return format!("{cc}:?") };
    match std::fs::metadata(&path) {
        Ok(m) => format!(
            "{}:{}:{:?}",
            path.display(),
            m.len(),
            m.modified().ok().and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        ),
        Err(_) => format!("{}:?", path.display()),
    }
}

/// The record that lets a later run skip the compiler entirely: the object
/// and every file the preprocessor read, with its content hash.
const QUICK_VERSION: &str = "schedlab-quick-v1";

fn quick_key(cc: &str, spec: &BuildSpec, shim: &str) -> String {
    let mut h = Sha256::new();
    let mut part = |s: &str| {
        h.update(s.as_bytes());
        h.update([0]);
    };
    part(QUICK_VERSION);
    part(CACHE_TAG);
    part(&compiler_identity(cc));
    part(&unit_defines().join(" "));
    part(shim);
    part(&spec.main.to_string_lossy());
    for p in spec.extra.iter().chain(spec.includes.iter()) {
        part(&p.to_string_lossy());
    }
    for t in &spec.consts {
        part(t);
    }
    for v in ["SCHEDLAB_CC", "CC"] {
        part(&std::env::var(v).unwrap_or_default());
    }
    hex(&h.finalize())
}

/// The object a quick record names, if every file it lists is unchanged.
fn quick_lookup(record: &Path, cache: &Path) -> Option<(PathBuf, String)> {
    let text = std::fs::read_to_string(record).ok()?;
    let mut lines = text.lines();
    if lines.next()? != QUICK_VERSION {
        return None;
    }
    let key = lines.next()?.to_string();
    let so = cache.join("obj").join(format!("{}.so", key.get(..32)?));
    if !so.is_file() {
        return None;
    }
    for l in lines {
        let (hash, path) = l.split_once(' ')?;
        if file_hash(Path::new(path))? != hash {
            return None;
        }
    }
    Some((so, key))
}

/// Files under `shim` are left out: the shim directory is named by the
/// hash of its content, which is part of the quick key, so they cannot
/// change under the record (and hashing them was most of a cached start-up).
fn quick_store(record: &Path, key: &str, files: &[PathBuf], shim: &Path) {
    let mut text = format!("{QUICK_VERSION}\n{key}\n");
    for f in files.iter().filter(|f| !f.starts_with(shim)) {
        let Some(h) = file_hash(f) else { return };
        text.push_str(&format!("{h} {}\n", f.display()));
    }
    if let Some(d) = record.parent() {
        let _ = std::fs::create_dir_all(d);
    }
    // Best effort: without the record the next run takes the full path.
    let _ = write_atomic(record, text.as_bytes());
}

/// Compiles a single `.bpf.c` with schedlab's own headers (or finds it in
/// the cache under `cache`).
pub fn compile(source: &Path, cache: &Path) -> Result<Compiled, HostError> {
    let main = std::fs::canonicalize(source).map_err(io_err(format!("reading {}", source.display())))?;
    compile_spec(&BuildSpec { main, extra: Vec::new(), includes: Vec::new(), origin: None, consts: Vec::new() }, cache)
}

/// Compiles the build `spec` describes: each object as its own translation
/// unit with its descriptor, linked with the runtime into one shared object.
pub fn compile_spec(spec: &BuildSpec, cache: &Path) -> Result<Compiled, HostError> {
    let source = &spec.main;
    std::fs::create_dir_all(cache.join("obj")).map_err(io_err(format!("creating {}", cache.display())))?;
    let shim = materialize_shim(cache)?;
    let cc = compiler();
    let shim_h = shim_hash();
    let record = cache.join("quick").join(format!("{}.txt", &quick_key(&cc, spec, &shim_h)[..32]));
    if let Some((so, key)) = quick_lookup(&record, cache) {
        return Ok(Compiled { so, cache_hit: true, key });
    }

    let version = compiler_version(&cc)?;
    let flags = if version.contains("clang") { CLANG_FLAGS } else { GCC_FLAGS };
    let mut include_args: Vec<std::ffi::OsString> = Vec::new();
    // The shim's wrappers first (they #include_next the scheduler's own
    // header), then the scheduler's directories, then the shim's kernel
    // and libbpf headers.
    let (pre, inc) = (shim.join("pre"), shim.join("include"));
    for d in std::iter::once(&pre).chain(spec.includes.iter()).chain(std::iter::once(&inc)) {
        include_args.push("-I".into());
        include_args.push(d.into());
    }
    let sources: Vec<&PathBuf> = std::iter::once(&spec.main).chain(spec.extra.iter()).collect();

    // Scan pass, one preprocessor run per object, in parallel.
    let pres: Vec<Result<String, HostError>> = std::thread::scope(|s| {
        let handles: Vec<_> = sources
            .iter()
            .map(|src| {
                let (cc, include_args) = (&cc, &include_args);
                s.spawn(move || {
                    run(
                        Command::new(cc).args(flags).args(unit_defines()).arg("-E").arg("-D__SCHEDLAB_SCAN__").args(include_args).arg(src),
                        cc,
                        src,
                        echo_diagnostics(),
                    )
                    .map(|b| String::from_utf8_lossy(&b).into_owned())
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap_or_else(|_| Err(HostError::Scan { path: source.clone(), msg: "scan thread panicked".into() }))).collect()
    });
    let pres = pres.into_iter().collect::<Result<Vec<_>, _>>()?;
    let scans: Vec<Scan> = pres.iter().map(|p| scan::scan(p)).collect();
    let abi = shim.join("schedlab_abi.h").to_string_lossy().into_owned();
    let linked: Vec<String> = scans.iter().flat_map(|s| s.resizable.iter().chain(&s.arena_globals).cloned()).collect();
    let mut units = Vec::new();
    for (i, src) in sources.iter().enumerate() {
        let part = if i == 0 { scan::Part::Main { others: &scans[1..] } } else { scan::Part::Other(i) };
        let unit = scan::generate(&scans[i], &src.to_string_lossy(), &abi, part, &linked)
            .map_err(|msg| HostError::Scan { path: (*src).clone(), msg })?;
        units.push(unit);
    }
    if let Some(main) = units.first_mut() {
        main.push_str(&const_symbols(&spec.consts));
    }

    let mut h = Sha256::new();
    for part in [CACHE_TAG, &version, &flags.join(" "), &unit_defines().join(" "), &shim_h] {
        h.update(part.as_bytes());
        h.update([0]);
    }
    for (unit, pre) in units.iter().zip(&pres) {
        h.update(unit.as_bytes());
        h.update([0]);
        h.update(strip_line_markers(pre).as_bytes());
        h.update([0]);
    }
    let key = hex(&h.finalize());
    let deps: Vec<PathBuf> = {
        let mut d: Vec<PathBuf> = pres.iter().flat_map(|p| included_files(p)).collect();
        d.sort();
        d.dedup();
        d
    };
    let so = cache.join("obj").join(format!("{}.so", &key[..32]));
    if so.exists() {
        quick_store(&record, &key, &deps, &shim);
        return Ok(Compiled { so, cache_hit: true, key });
    }

    let build = cache.join(format!("build-{}", unique_suffix()));
    std::fs::create_dir_all(&build).map_err(io_err(format!("creating {}", build.display())))?;
    let tested: Vec<String> = scans.iter().flat_map(|s| s.ksym_tested.iter().cloned()).collect();
    let ctx = BuildCtx { cc: &cc, flags, include_args: &include_args, shim: &shim, dir: &build };
    let result = build_objects(&ctx, &sources, &units, &pres, &tested)
        .and_then(|out| {
            let bytes = std::fs::read(&out).map_err(io_err(format!("reading {}", out.display())))?;
            write_atomic(&so, &bytes)
        });
    let _ = std::fs::remove_dir_all(&build);
    result?;
    quick_store(&record, &key, &deps, &shim);
    Ok(Compiled { so, cache_hit: false, key })
}

/// The symbol under which the object records the value of the `i`th
/// expression of [`BuildSpec::consts`].
pub(super) fn const_symbol(i: usize) -> String {
    format!("__schedlab_const_{i}")
}

/// Definitions recording each C constant expression of `exprs`, exported
/// so the loader finds them by name.
fn const_symbols(exprs: &[String]) -> String {
    exprs
        .iter()
        .enumerate()
        .map(|(i, t)| format!("__attribute__((visibility(\"default\"))) const long long {} = (long long)({t});\n", const_symbol(i)))
        .collect()
}

struct BuildCtx<'a> {
    cc: &'a str,
    flags: &'a [&'a str],
    include_args: &'a [std::ffi::OsString],
    shim: &'a Path,
    dir: &'a Path,
}

impl BuildCtx<'_> {
    /// `cc -c` of one unit (`-g` adds line tables, for naming the source
    /// line of an undefined symbol).
    fn object(&self, i: usize, unit: &Path, src: &Path, debug: bool) -> Result<PathBuf, HostError> {
        let obj = self.dir.join(format!("unit{i}{}.o", if debug { "-g" } else { "" }));
        let mut cmd = Command::new(self.cc);
        cmd.args(self.flags).args(unit_defines()).args(self.include_args).arg("-c").arg("-o").arg(&obj).arg(unit);
        if debug {
            cmd.arg("-g");
        }
        run(&mut cmd, self.cc, src, !debug && echo_diagnostics())?;
        Ok(obj)
    }

    fn link(&self, objs: &[PathBuf], src: &Path, echo: bool) -> Result<PathBuf, HostError> {
        let out = self.dir.join("sched.so");
        run(
            Command::new(self.cc)
                .args(self.flags)
                .arg("-shared")
                .arg("-I")
                .arg(self.shim.join("include"))
                .arg("-o")
                .arg(&out)
                .args(objs)
                .arg(self.shim.join("runtime.c"))
                .arg("-Wl,-z,defs"),
            self.cc,
            src,
            echo,
        )?;
        Ok(out)
    }
}

/// Compiles every unit (in parallel) and links them with the runtime. A
/// symbol nothing defines (a kfunc or helper the runtime lacks) is refused
/// the way the kernel's loader refuses it: one line naming the symbol and
/// where the scheduler first uses it.
fn build_objects(
    ctx: &BuildCtx,
    sources: &[&PathBuf],
    units: &[String],
    pres: &[String],
    tested: &[String],
) -> Result<PathBuf, HostError> {
    let mut unit_paths = Vec::new();
    for (i, u) in units.iter().enumerate() {
        let p = ctx.dir.join(format!("unit{i}.c"));
        std::fs::write(&p, u).map_err(io_err(format!("writing {}", p.display())))?;
        unit_paths.push(p);
    }
    let width = std::thread::available_parallelism().map_or(1, |n| n.get()).max(1);
    let mut objs = Vec::new();
    let unit_paths = &unit_paths;
    for chunk in (0..units.len()).collect::<Vec<_>>().chunks(width) {
        let done: Vec<Result<PathBuf, HostError>> = std::thread::scope(|s| {
            let hs: Vec<_> = chunk.iter().map(|&i| s.spawn(move || ctx.object(i, &unit_paths[i], sources[i], false))).collect();
            hs.into_iter()
                .map(|h| h.join().unwrap_or_else(|_| Err(HostError::Scan { path: sources[0].clone(), msg: "compile thread panicked".into() })))
                .collect()
        });
        for r in done {
            objs.push(r?);
        }
    }
    match ctx.link(&objs, sources[0], false) {
        Ok(out) => {
            if let Some(sym) = untested_weak_call(&out, &objs, tested) {
                let at = pres.iter().find_map(|p| first_call_in(p, &sym));
                return Err(HostError::Unsupported { path: sources[0].clone(), symbol: sym, at });
            }
            Ok(out)
        }
        Err(HostError::Compile { stderr, .. }) => {
            let Some(sym) = undefined_symbol(&stderr) else {
                if echo_diagnostics() {
                    for l in stderr.lines() {
                        eprintln!("{l}");
                    }
                }
                return Err(HostError::Compile { path: sources[0].clone(), stderr });
            };
            // Again with line tables, to say where it is used.
            let dbg: Result<Vec<PathBuf>, HostError> =
                (0..units.len()).map(|i| ctx.object(i, &unit_paths[i], sources[i], true)).collect();
            let at = dbg
                .ok()
                .and_then(|objs| match ctx.link(&objs, sources[0], false) {
                    Err(HostError::Compile { stderr, .. }) => first_use(&stderr, &sym),
                    _ => None,
                });
            Err(HostError::Unsupported { path: sources[0].clone(), symbol: sym, at })
        }
        Err(e) => Err(e),
    }
}

/// A weak function the object calls, that nothing defines and the source
/// never tests with bpf_ksym_exists(): natively a call through NULL. The
/// kernel's verifier refuses a reachable call to a kfunc libbpf could not
/// resolve; this is the same refusal, made from the object's dynamic
/// symbols (`nm -D`) and call relocations (`objdump -r`). Without binutils
/// the check is skipped.
fn untested_weak_call(so: &Path, objs: &[PathBuf], tested: &[String]) -> Option<String> {
    let nm = Command::new("nm").arg("-D").arg("--undefined-only").arg(so).output().ok()?;
    let weak: Vec<String> = String::from_utf8_lossy(&nm.stdout)
        .lines()
        .filter_map(|l| {
            let mut it = l.split_whitespace();
            (it.next()? == "w").then(|| it.next().map(str::to_string)).flatten()
        })
        .filter(|s| !s.starts_with("__") && !s.starts_with("_ITM"))
        .collect();
    if weak.is_empty() {
        return None;
    }
    let mut called = Vec::new();
    for o in objs {
        let out = Command::new("objdump").arg("-r").arg(o).output().ok()?;
        for l in String::from_utf8_lossy(&out.stdout).lines() {
            let mut it = l.split_whitespace();
            let (Some(_), Some(ty), Some(target)) = (it.next(), it.next(), it.next()) else { continue };
            if ty.ends_with("PLT32") || ty.ends_with("_CALL26") || ty.ends_with("_JUMP26") {
                let name = target.split(['-', '+']).next().unwrap_or(target);
                if !called.iter().any(|c: &String| c == name) {
                    called.push(name.to_string());
                }
            }
        }
    }
    weak.into_iter().find(|w| called.contains(w) && !tested.contains(w))
}

/// `file:line` of the first call of `sym` inside a function body of a
/// preprocessed text (its line markers name the file and line).
fn first_call_in(pre: &str, sym: &str) -> Option<String> {
    let (mut file, mut line, mut depth) = (String::new(), 0u32, 0i32);
    for l in pre.lines() {
        if let Some(rest) = l.strip_prefix("# ") {
            let mut it = rest.splitn(2, ' ');
            if let (Some(n), Some(f)) = (it.next().and_then(|n| n.parse::<u32>().ok()), it.next()) {
                line = n;
                file = f.split('"').nth(1).unwrap_or("").to_string();
                continue;
            }
        }
        let b = l.as_bytes();
        let mut i = 0;
        while i < b.len() {
            match b[i] {
                b'{' => depth += 1,
                b'}' => depth -= 1,
                _ => {}
            }
            if depth > 0 && l[i..].starts_with(sym) {
                let before_ok = i == 0 || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_');
                let after = l[i + sym.len()..].trim_start();
                if before_ok && after.starts_with('(') {
                    return Some(format!("{file}:{line}"));
                }
            }
            i += 1;
        }
        line += 1;
    }
    None
}

/// The first symbol a linker's "undefined reference to `x'" names.
fn undefined_symbol(stderr: &str) -> Option<String> {
    stderr.lines().find_map(|l| {
        let i = l.find("undefined reference to ")? + "undefined reference to ".len();
        let s = l[i..].trim_matches(|c| c == '`' || c == '\'' || c == '"' || c == '‘' || c == '’');
        Some(s.to_string())
    })
}

/// `file:line` of the first "undefined reference" to `sym` in a link of
/// objects with line tables (`/path/x.bpf.c:123: undefined reference ...`).
fn first_use(stderr: &str, sym: &str) -> Option<String> {
    stderr.lines().filter(|l| l.contains("undefined reference to") && l.contains(sym)).find_map(|l| {
        let cut = l.find(": undefined reference")?;
        let loc = &l[..cut];
        // "obj.o:file.c:123" or "file.c:123"; drop the object part.
        let loc = loc.rsplit_once(".o:").map_or(loc, |(_, r)| r);
        let (file, line) = loc.rsplit_once(':')?;
        line.trim().parse::<u32>().ok()?;
        Some(format!("{file}:{}", line.trim()))
    })
}

/// Line markers name absolute paths; the cache key should not.
fn strip_line_markers(pre: &str) -> String {
    pre.lines().filter(|l| !l.starts_with('#')).collect::<Vec<_>>().join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn scratch(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("schedlab-test-{name}-{}", unique_suffix()));
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn the_build_time_shim_hash_is_the_hash_of_shim_files() {
        // build.rs reads SHIM_FILES' entries from this file's text; a list
        // it misread (or files it read elsewhere) would name the shim's
        // cache directory after other contents.
        let mut h = Sha256::new();
        for (name, text) in SHIM_FILES {
            h.update(name.as_bytes());
            h.update([0]);
            h.update(text.as_bytes());
            h.update([0]);
        }
        assert_eq!(shim_hash(), hex(&h.finalize()));
    }

    #[test]
    fn second_compile_hits_the_cache_and_edits_miss_it() {
        let dir = scratch("cache");
        let src = dir.join("t.bpf.c");
        std::fs::write(&src, "#include <scx/common.bpf.h>\nconst volatile u64 x = 1;\nu64 y;\n").unwrap();
        let a = compile(&src, &dir.join("cache")).unwrap_or_else(|e| panic!("{e}"));
        assert!(!a.cache_hit);
        let b = compile(&src, &dir.join("cache")).unwrap();
        assert!(b.cache_hit);
        assert_eq!(a.so, b.so);
        // The quick record that lets later runs skip the compiler is there
        // (gcc's working-directory line marker once kept it from being written).
        let records = std::fs::read_dir(dir.join("cache").join("quick")).map(|d| d.count()).unwrap_or(0);
        assert_eq!(records, 1, "no quick record written");
        // A header the source includes is part of the key.
        std::fs::write(dir.join("h.h"), "#define V 1\n").unwrap();
        std::fs::write(&src, "#include <scx/common.bpf.h>\n#include \"h.h\"\nconst volatile u64 x = V;\n").unwrap();
        let c = compile(&src, &dir.join("cache")).unwrap();
        assert!(!c.cache_hit);
        std::fs::write(dir.join("h.h"), "#define V 2\n").unwrap();
        let d = compile(&src, &dir.join("cache")).unwrap();
        assert!(!d.cache_hit && d.so != c.so);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn included_files_are_the_files_the_line_markers_name() {
        let pre = "# 1 \"/src/a.bpf.c\"\n# 1 \"/cwd//\"\n# 1 \"<built-in>\"\n# 1 \"<command-line>\"\n# 3 \"/inc/b.h\" 1\nint x;\n# 5 \"/src/a.bpf.c\" 2\n";
        assert_eq!(included_files(pre), [PathBuf::from("/inc/b.h"), PathBuf::from("/src/a.bpf.c")]);
    }

    #[test]
    fn compile_error_carries_the_compilers_message() {
        let dir = scratch("err");
        let src = dir.join("bad.bpf.c");
        std::fs::write(&src, "#include <scx/common.bpf.h>\nint f(void) { return undeclared_thing; }\n").unwrap();
        let e = compile(&src, &dir.join("cache")).unwrap_err();
        let HostError::Compile { stderr, .. } = &e else { panic!("{e}") };
        assert!(stderr.contains("undeclared_thing"), "{stderr}");
        assert!(e.to_string().contains("bad.bpf.c"));
        // An unknown kfunc is a link error naming it.
        std::fs::write(
            &src,
            "#include <scx/common.bpf.h>\nvoid scx_bpf_nope(void) __ksym;\nint f(void) { scx_bpf_nope(); return 0; }\n",
        )
        .unwrap();
        let e = compile(&src, &dir.join("cache")).unwrap_err();
        assert!(e.to_string().contains("scx_bpf_nope"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
