//! Where a scheduler's sources and headers are, as its own build sees them.
//!
//! A scheduler is named by a `.bpf.c` file, a directory, or (see
//! [`super::fetch`]) a published crate. From the main source this module
//! works out what the scheduler's build would compile:
//!
//! - an scx crate (`ROOT/src/bpf/main.bpf.c` beside `ROOT/Cargo.toml`): the
//!   sources `build.rs` adds with `.add_source("...")`, the crate's
//!   `src/bpf`, and the `bpf_h` headers of the scx_cargo version its
//!   Cargo.lock (or Cargo.toml) builds it with, as scx_cargo's BpfBuilder
//!   passes them (`-I bpf_h -I bpf_h/bpf-compat`);
//! - a scheduler inside an sched-ext/scx checkout: the checkout's
//!   `scheds/include` (and `bpf-compat`) instead of bpf_h;
//! - a kernel `tools/sched_ext/` example: that tree's `include` directory;
//! - anything else: schedlab's own scx headers.
//!
//! In every case schedlab's shim comes last in the search path: it provides
//! only what the kernel and libbpf would (`vmlinux.h`, `bpf/*.h`), plus its
//! own `scx/*.h` for schedulers that bring none.

use std::path::{Path, PathBuf};

/// What to compile: the main source, the other objects the build links, and
/// the include directories searched before the shim's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BuildSpec {
    /// The scheduler's main source (`main.bpf.c`).
    pub main: PathBuf,
    /// Other sources compiled and linked with it (scx's multi-object builds, e.g. `lib/*.bpf.c`).
    pub extra: Vec<PathBuf>,
    /// Include directories, searched in order.
    pub includes: Vec<PathBuf>,
    /// The published crate the sources come from (name, version).
    pub origin: Option<(String, String)>,
    /// C integer constant expressions whose values the object records
    /// for the loader: what a skeleton's generated `types::` module and BTF
    /// give a libbpf loader (`sizeof(struct task_ctx)`, member offsets).
    pub consts: Vec<String>,
}

/// The value of `key = "..."` in the `[section]` of a Cargo.toml, read
/// line by line (the files cargo publishes are normalised to this form).
fn toml_value(text: &str, section: &str, key: &str) -> Option<String> {
    let mut in_section = false;
    for line in text.lines() {
        let l = line.trim();
        if l.starts_with('[') {
            in_section = l == format!("[{section}]");
            continue;
        }
        if in_section {
            if let Some((k, v)) = l.split_once('=') {
                if k.trim() == key {
                    return Some(v.trim().trim_matches('"').to_string());
                }
            }
        }
    }
    None
}

/// The version of `package` that a Cargo.lock pins.
fn lock_version(lock: &str, package: &str) -> Option<String> {
    let mut lines = lock.lines().map(str::trim);
    while let Some(l) = lines.next() {
        if l == format!("name = \"{package}\"") {
            let v = lines.next()?;
            return v.strip_prefix("version = \"").map(|v| v.trim_end_matches('"').to_string());
        }
    }
    None
}

/// The scx_cargo version a crate is built with: Cargo.lock's, else the
/// build-dependency requirement of Cargo.toml without its operator.
pub fn scx_cargo_version(root: &Path) -> Option<String> {
    if let Ok(lock) = std::fs::read_to_string(root.join("Cargo.lock")) {
        if let Some(v) = lock_version(&lock, "scx_cargo") {
            return Some(v);
        }
    }
    let toml = std::fs::read_to_string(root.join("Cargo.toml")).ok()?;
    let req = toml_value(&toml, "build-dependencies.scx_cargo", "version")?;
    Some(req.trim_start_matches(['^', '=', '~', ' ']).to_string())
}

/// `[package] name` and `version` of a crate root.
pub fn crate_identity(root: &Path) -> Option<(String, String)> {
    let toml = std::fs::read_to_string(root.join("Cargo.toml")).ok()?;
    Some((toml_value(&toml, "package", "name")?, toml_value(&toml, "package", "version")?))
}

/// The arguments of every `.add_source("...")` call in a build.rs.
pub fn build_rs_sources(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find(".add_source(") {
        rest = &rest[i + ".add_source(".len()..];
        let arg = rest.trim_start();
        if let Some(s) = arg.strip_prefix('"') {
            if let Some(end) = s.find('"') {
                out.push(s[..end].to_string());
            }
        }
    }
    out
}

/// Why a scheduler's build could not be worked out.
#[derive(Debug, thiserror::Error)]
pub enum ResolveError {
    /// The directory holds no scheduler source.
    #[error("{}: no scheduler here: expected src/bpf/main.bpf.c (a scheduler crate), main.bpf.c or a single .bpf.c", dir.display())]
    NoScheduler {
        /// The directory.
        dir: PathBuf,
    },
    /// The directory holds several `.bpf.c` files and no `main.bpf.c`.
    #[error("{}: several .bpf.c files and no main.bpf.c; name one: {}", dir.display(), names.join(", "))]
    Ambiguous {
        /// The directory.
        dir: PathBuf,
        /// The candidates' file names.
        names: Vec<String>,
    },
    /// A file or directory could not be read.
    #[error("{}: {err}", path.display())]
    Io {
        /// The path.
        path: PathBuf,
        /// The error.
        err: std::io::Error,
    },
    /// The crate's build.rs adds a source that cannot be read.
    #[error("{}: build.rs adds source {source_name:?}, which cannot be read: {err}", root.display())]
    BuildRs {
        /// The crate's root.
        root: PathBuf,
        /// The source as build.rs names it.
        source_name: String,
        /// The error.
        err: std::io::Error,
    },
    /// An include directory given by the user is not a directory.
    #[error("include directory {}: not a directory", dir.display())]
    NotADirectory {
        /// The path given.
        dir: PathBuf,
    },
    /// The scx_cargo headers the crate needs could not be fetched.
    #[error(transparent)]
    Fetch(#[from] super::fetch::FetchError),
}

/// The main source a directory names: `src/bpf/main.bpf.c`, `main.bpf.c`,
/// or its only `.bpf.c`.
pub fn main_of_dir(dir: &Path) -> Result<PathBuf, ResolveError> {
    for cand in [dir.join("src/bpf/main.bpf.c"), dir.join("main.bpf.c")] {
        if cand.is_file() {
            return Ok(cand);
        }
    }
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|err| ResolveError::Io { path: dir.to_path_buf(), err })?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.to_string_lossy().ends_with(".bpf.c"))
        .collect();
    found.sort();
    match found.len() {
        1 => Ok(found.remove(0)),
        0 => Err(ResolveError::NoScheduler { dir: dir.to_path_buf() }),
        _ => Err(ResolveError::Ambiguous {
            dir: dir.to_path_buf(),
            names: found.iter().filter_map(|p| p.file_name()).map(|f| f.to_string_lossy().into_owned()).collect(),
        }),
    }
}

/// Where scx_cargo `version`'s `bpf_h` is: beside the crate (cargo's
/// registry and schedlab's cache keep crates side by side), in schedlab's
/// crate cache, or in cargo's registry.
pub fn find_bpf_h(root: &Path, version: &str, cache: &Path) -> Option<PathBuf> {
    let name = format!("scx_cargo-{version}");
    let mut cands = vec![];
    if let Some(parent) = root.parent() {
        cands.push(parent.join(&name));
    }
    cands.push(cache.join("crates").join(&name));
    for reg in super::fetch::registry_src_dirs() {
        cands.push(reg.join(&name));
    }
    cands.into_iter().map(|c| c.join("bpf_h")).find(|d| d.join("scx/common.bpf.h").is_file())
}

/// The nearest ancestor of `from` (itself included) for which `test` holds.
fn ancestor(from: &Path, test: impl Fn(&Path) -> bool) -> Option<PathBuf> {
    from.ancestors().find(|a| test(a)).map(Path::to_path_buf)
}

/// Works out the build of the scheduler `path` names (a file or a
/// directory). `user` include directories go first, as scx_cargo's
/// `add_include_path()` and `--sched-include` put them. `fetch_bpf_h` is
/// called for a crate whose scx_cargo headers are nowhere on this machine.
pub fn resolve(
    path: &Path,
    user: &[PathBuf],
    cache: &Path,
    fetch_bpf_h: &dyn Fn(&str) -> Result<PathBuf, super::fetch::FetchError>,
) -> Result<BuildSpec, ResolveError> {
    let main = if path.is_dir() { main_of_dir(path)? } else { path.to_path_buf() };
    let main = std::fs::canonicalize(&main).map_err(|err| ResolveError::Io { path: main.clone(), err })?;
    for d in user {
        if !d.is_dir() {
            return Err(ResolveError::NotADirectory { dir: d.clone() });
        }
    }
    let mut includes: Vec<PathBuf> = user.iter().map(|d| std::fs::canonicalize(d).unwrap_or_else(|_| d.clone())).collect();
    let mut extra = Vec::new();
    let mut origin = None;
    let dir = main.parent().unwrap_or(Path::new("/")).to_path_buf();

    // An scx crate (published, unpacked, or a checkout's scheds/rust/X).
    let crate_root = dir
        .parent()
        .filter(|src| dir.file_name().is_some_and(|n| n == "bpf") && src.file_name().is_some_and(|n| n == "src"))
        .and_then(Path::parent)
        .filter(|root| root.join("Cargo.toml").is_file())
        .map(Path::to_path_buf);
    let checkout = ancestor(&dir, |a| a.join("scheds/include/scx/common.bpf.h").is_file());
    let kernel_tree = ancestor(&dir, |a| a.file_name().is_some_and(|n| n == "sched_ext") && a.join("include/scx/common.bpf.h").is_file());

    if let Some(root) = &crate_root {
        if let Ok(text) = std::fs::read_to_string(root.join("build.rs")) {
            for s in build_rs_sources(&text) {
                let p = root.join(&s);
                let p = std::fs::canonicalize(&p)
                    .map_err(|err| ResolveError::BuildRs { root: root.clone(), source_name: s.clone(), err })?;
                if p != main && !extra.contains(&p) {
                    extra.push(p);
                }
            }
        }
        origin = crate_identity(root);
        includes.push(dir.clone());
    }
    if let Some(co) = &checkout {
        includes.push(co.join("scheds/include"));
        includes.push(co.join("scheds/include/bpf-compat"));
    } else if let Some(v) = crate_root.as_deref().and_then(scx_cargo_version) {
        // (A crate without scx_cargo gets schedlab's own scx headers.)
        let root = crate_root.as_deref().unwrap_or(&dir);
        let bpf_h = match find_bpf_h(root, &v, cache) {
            Some(d) => d,
            None => fetch_bpf_h(&v)?,
        };
        includes.push(bpf_h.clone());
        includes.push(bpf_h.join("bpf-compat"));
    } else if let Some(k) = &kernel_tree {
        includes.push(k.join("include"));
        includes.push(k.join("include/bpf-compat"));
    }
    includes.retain(|d| d.is_dir());
    let mut seen = Vec::new();
    includes.retain(|d| {
        let new = !seen.contains(d);
        seen.push(d.clone());
        new
    });
    Ok(BuildSpec { main, extra, includes, origin, consts: Vec::new() })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_build_rs_cargo_lock_and_toml() {
        let b = r#"scx_cargo::BpfBuilder::new().unwrap()
            .enable_skel("src/bpf/main.bpf.c", "bpf")
            .add_source("src/bpf/lib/pmu.bpf.c")
            .add_source( "src/bpf/timer.bpf.c" )
            .compile_link_gen()"#;
        assert_eq!(build_rs_sources(b), ["src/bpf/lib/pmu.bpf.c", "src/bpf/timer.bpf.c"]);
        let lock = "[[package]]\nname = \"scx_bpfland\"\nversion = \"1.1.4\"\n\n[[package]]\nname = \"scx_cargo\"\nversion = \"1.1.1\"\n";
        assert_eq!(lock_version(lock, "scx_cargo").as_deref(), Some("1.1.1"));
        assert_eq!(lock_version(lock, "nope"), None);
        let toml = "[package]\nname = \"scx_x\"\nversion = \"2.0.0\"\n\n[build-dependencies.scx_cargo]\nversion = \"^1.1.4\"\n";
        assert_eq!(toml_value(toml, "package", "version").as_deref(), Some("2.0.0"));
        assert_eq!(toml_value(toml, "build-dependencies.scx_cargo", "version").as_deref(), Some("^1.1.4"));
    }

    #[test]
    fn resolves_a_crate_layout_with_its_headers_and_sources() {
        let d = std::env::temp_dir().join(format!("schedlab-src-{}", super::super::compile::unique_suffix()));
        let root = d.join("scx_demo-0.1.0");
        std::fs::create_dir_all(root.join("src/bpf/lib")).unwrap();
        std::fs::create_dir_all(d.join("scx_cargo-9.9.9/bpf_h/scx")).unwrap();
        std::fs::create_dir_all(d.join("scx_cargo-9.9.9/bpf_h/bpf-compat")).unwrap();
        std::fs::write(d.join("scx_cargo-9.9.9/bpf_h/scx/common.bpf.h"), "").unwrap();
        std::fs::write(root.join("Cargo.toml"), "[package]\nname = \"scx_demo\"\nversion = \"0.1.0\"\n[build-dependencies.scx_cargo]\nversion = \"9.9.9\"\n").unwrap();
        std::fs::write(root.join("build.rs"), ".add_source(\"src/bpf/lib/x.bpf.c\")").unwrap();
        std::fs::write(root.join("src/bpf/main.bpf.c"), "").unwrap();
        std::fs::write(root.join("src/bpf/lib/x.bpf.c"), "").unwrap();
        let no_fetch = |v: &str| -> Result<PathBuf, super::super::fetch::FetchError> { Err(super::super::fetch::FetchError::NoHeaders { dir: PathBuf::from("nowhere"), version: v.to_string() }) };
        let s = resolve(&root, &[], &d, &no_fetch).unwrap();
        assert!(s.main.ends_with("scx_demo-0.1.0/src/bpf/main.bpf.c"), "{s:?}");
        assert_eq!(s.extra.len(), 1);
        assert!(s.extra[0].ends_with("lib/x.bpf.c"));
        assert_eq!(s.origin, Some(("scx_demo".into(), "0.1.0".into())));
        let tails: Vec<String> = s.includes.iter().map(|p| p.strip_prefix(&d).unwrap().display().to_string()).collect();
        assert_eq!(tails, ["scx_demo-0.1.0/src/bpf", "scx_cargo-9.9.9/bpf_h", "scx_cargo-9.9.9/bpf_h/bpf-compat"]);
        // Without the headers anywhere, the fetcher is asked for that version.
        std::fs::remove_dir_all(d.join("scx_cargo-9.9.9")).unwrap();
        let e = resolve(&root, &[], &d, &no_fetch).unwrap_err();
        assert!(matches!(&e, ResolveError::Fetch(super::super::fetch::FetchError::NoHeaders { version, .. }) if version == "9.9.9"), "{e:?}");
        // A missing add_source file is named.
        std::fs::remove_file(root.join("src/bpf/lib/x.bpf.c")).unwrap();
        let e = resolve(&root, &[], &d, &no_fetch).unwrap_err().to_string();
        assert!(e.contains("build.rs adds source \"src/bpf/lib/x.bpf.c\""), "{e}");
        let e = main_of_dir(&d).unwrap_err().to_string();
        assert!(e.contains("no scheduler here"), "{e}");
        let _ = std::fs::remove_dir_all(&d);
    }
}
