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
use super::HostError;

/// The shim, embedded: (path under the shim directory, contents).
pub const SHIM_FILES: &[(&str, &str)] = &[
    ("include/vmlinux.h", include_str!("../../../../shim/include/vmlinux.h")),
    ("include/schedlab_kobj.h", include_str!("../../../../shim/include/schedlab_kobj.h")),
    ("include/bpf/bpf_helpers.h", include_str!("../../../../shim/include/bpf/bpf_helpers.h")),
    ("include/bpf/bpf_tracing.h", include_str!("../../../../shim/include/bpf/bpf_tracing.h")),
    ("include/bpf/bpf_core_read.h", include_str!("../../../../shim/include/bpf/bpf_core_read.h")),
    ("include/bpf/bpf_endian.h", include_str!("../../../../shim/include/bpf/bpf_endian.h")),
    ("include/asm-generic/errno.h", include_str!("../../../../shim/include/asm-generic/errno.h")),
    ("include/asm-generic/errno-base.h", include_str!("../../../../shim/include/asm-generic/errno-base.h")),
    ("include/scx/common.bpf.h", include_str!("../../../../shim/include/scx/common.bpf.h")),
    ("include/scx/compat.bpf.h", include_str!("../../../../shim/include/scx/compat.bpf.h")),
    ("include/scx/user_exit_info.h", include_str!("../../../../shim/include/scx/user_exit_info.h")),
    ("include/scx/user_exit_info.bpf.h", include_str!("../../../../shim/include/scx/user_exit_info.bpf.h")),
    ("include/scx/user_exit_info_common.h", include_str!("../../../../shim/include/scx/user_exit_info_common.h")),
    ("include/scx/percpu.bpf.h", include_str!("../../../../shim/include/scx/percpu.bpf.h")),
    ("include/scx/enums.bpf.h", include_str!("../../../../shim/include/scx/enums.bpf.h")),
    ("include/scx/enums.autogen.bpf.h", include_str!("../../../../shim/include/scx/enums.autogen.bpf.h")),
    ("include/scx/enum_defs.autogen.h", include_str!("../../../../shim/include/scx/enum_defs.autogen.h")),
    ("schedlab_abi.h", include_str!("../../../../shim/schedlab_abi.h")),
    ("runtime.c", include_str!("../../../../shim/runtime.c")),
    ("runtime_ds.c", include_str!("../../../../shim/runtime_ds.c")),
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
const GCC_FLAGS: &[&str] = &[
    "-std=gnu11",
    "-O2",
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
    &["-std=gnu11", "-O2", "-fPIC", "-fvisibility=hidden", "-fno-strict-aliasing", "-fwrapv", "-fno-common", "-w"];

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

fn shim_hash() -> String {
    let mut h = Sha256::new();
    for (name, text) in SHIM_FILES {
        h.update(name.as_bytes());
        h.update([0]);
        h.update(text.as_bytes());
        h.update([0]);
    }
    hex(&h.finalize())
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
    /// What the scan found.
    pub scan: Scan,
    /// Whether the object came from the cache.
    pub cache_hit: bool,
    /// The content hash naming it.
    pub key: String,
}

fn run(cmd: &mut Command, cc: &str, path: &Path) -> Result<Vec<u8>, HostError> {
    let out = cmd.output().map_err(|err| HostError::NoCompiler { cc: cc.to_string(), err })?;
    if !out.status.success() {
        return Err(HostError::Compile {
            path: path.to_path_buf(),
            stderr: String::from_utf8_lossy(&out.stderr).trim_end().to_string(),
        });
    }
    Ok(out.stdout)
}

/// Compiles `source` (or finds it in the cache under `cache`).
pub fn compile(source: &Path, cache: &Path) -> Result<Compiled, HostError> {
    let source = std::fs::canonicalize(source).map_err(io_err(format!("reading {}", source.display())))?;
    std::fs::create_dir_all(cache.join("obj")).map_err(io_err(format!("creating {}", cache.display())))?;
    let shim = materialize_shim(cache)?;
    let cc = compiler();
    let version = compiler_version(&cc)?;
    let flags = if version.contains("clang") { CLANG_FLAGS } else { GCC_FLAGS };
    let include = shim.join("include");

    // Scan pass.
    let pre = run(
        Command::new(&cc).args(flags).arg("-E").arg("-D__SCHEDLAB_SCAN__").arg("-I").arg(&include).arg(&source),
        &cc,
        &source,
    )?;
    let pre = String::from_utf8_lossy(&pre).into_owned();
    let scan = scan::scan(&pre);
    let unit = scan::generate(&scan, &source.to_string_lossy(), &shim.join("schedlab_abi.h").to_string_lossy())
        .map_err(|msg| HostError::Scan { path: source.clone(), msg })?;

    let mut h = Sha256::new();
    for part in [CACHE_TAG, &version, &flags.join(" "), &shim_hash(), &unit, &strip_line_markers(&pre)] {
        h.update(part.as_bytes());
        h.update([0]);
    }
    let key = hex(&h.finalize());
    let so = cache.join("obj").join(format!("{}.so", &key[..32]));
    if so.exists() {
        return Ok(Compiled { so, scan, cache_hit: true, key });
    }

    let build = cache.join(format!("build-{}", unique_suffix()));
    std::fs::create_dir_all(&build).map_err(io_err(format!("creating {}", build.display())))?;
    let unit_path = build.join("unit.c");
    let result = (|| {
        std::fs::write(&unit_path, &unit).map_err(io_err(format!("writing {}", unit_path.display())))?;
        let out = build.join("sched.so");
        run(
            Command::new(&cc)
                .args(flags)
                .arg("-shared")
                .arg("-I")
                .arg(&include)
                .arg("-o")
                .arg(&out)
                .arg(&unit_path)
                .arg(shim.join("runtime.c"))
                .arg("-Wl,-z,defs"),
            &cc,
            &source,
        )?;
        let bytes = std::fs::read(&out).map_err(io_err(format!("reading {}", out.display())))?;
        write_atomic(&so, &bytes)
    })();
    let _ = std::fs::remove_dir_all(&build);
    result?;
    Ok(Compiled { so, scan, cache_hit: false, key })
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
    fn second_compile_hits_the_cache_and_edits_miss_it() {
        let dir = scratch("cache");
        let src = dir.join("t.bpf.c");
        std::fs::write(&src, "#include <scx/common.bpf.h>\nconst volatile u64 x = 1;\nu64 y;\n").unwrap();
        let a = compile(&src, &dir.join("cache")).unwrap_or_else(|e| panic!("{e}"));
        assert!(!a.cache_hit);
        let b = compile(&src, &dir.join("cache")).unwrap();
        assert!(b.cache_hit);
        assert_eq!(a.so, b.so);
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
