//! Published scx schedulers by name: `crate:scx_NAME[@VERSION]`.
//!
//! The scx schedulers are published on crates.io with their BPF sources
//! (`src/bpf/`), and scx_cargo with the headers they are built against
//! (`bpf_h/`). `cargo info NAME@VERSION` downloads and unpacks just that
//! crate into cargo's registry (no build, no dependency tree); schedlab
//! copies the parts its build needs into `CACHE/crates/NAME-VERSION/`,
//! once. After that, runs are offline: a bare `crate:NAME` takes the newest
//! version in the cache, `crate:NAME@VERSION` that version.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Why a published scheduler crate could not be fetched.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    /// The `crate:` spec is malformed.
    #[error("{spec:?}: expected crate:NAME or crate:NAME@VERSION, e.g. crate:scx_bpfland@1.1.4")]
    Spec {
        /// The spec as given.
        spec: String,
    },
    /// A cache directory could not be created or written.
    #[error("{}: {err}", path.display())]
    Io {
        /// The directory.
        path: PathBuf,
        /// The error.
        err: std::io::Error,
    },
    /// `cargo` could not be started.
    #[error("crate:{spec}: cannot run `{cargo} info` to fetch it ({err}); install cargo, or unpack the crate and pass its directory to --sched")]
    NoCargo {
        /// `NAME[@VERSION]`.
        spec: String,
        /// The cargo command.
        cargo: String,
        /// Why it could not run.
        err: std::io::Error,
    },
    /// crates.io does not have the crate or version, or could not be asked.
    #[error("crate:{spec}: no such crate or version on crates.io, or no network to ask (cargo: {why}); a crate fetched once is kept under {} and then runs offline", cache.display())]
    NotFound {
        /// `NAME[@VERSION]`.
        spec: String,
        /// cargo's error line.
        why: String,
        /// Where fetched crates are kept.
        cache: PathBuf,
    },
    /// `cargo info` failed otherwise.
    #[error("crate:{spec}: cargo info failed ({why}); it needs the network the first time, after which {} keeps the crate", cache.display())]
    Cargo {
        /// `NAME[@VERSION]`.
        spec: String,
        /// cargo's error line.
        why: String,
        /// Where fetched crates are kept.
        cache: PathBuf,
    },
    /// cargo reported success but left no unpacked crate.
    #[error("crate:{name}@{version}: cargo info ran but the crate is not unpacked under $CARGO_HOME/registry/src")]
    NotUnpacked {
        /// The crate.
        name: String,
        /// Its version.
        version: String,
    },
    /// Copying the crate into the cache failed.
    #[error("copying {} into {}: {err}", from.display(), dest.display())]
    Copy {
        /// The unpacked crate.
        from: PathBuf,
        /// The cache directory.
        dest: PathBuf,
        /// The error.
        err: std::io::Error,
    },
    /// The scx_cargo crate lacks the headers schedulers build against.
    #[error("{}: scx_cargo {version} has no bpf_h/scx/common.bpf.h", dir.display())]
    NoHeaders {
        /// The cached scx_cargo.
        dir: PathBuf,
        /// Its version.
        version: String,
    },
    /// The crate is not a BPF scheduler schedlab can host.
    #[error("crate:{name}@{version} has no src/bpf/main.bpf.c: {why}; refused")]
    NotBpf {
        /// The crate.
        name: String,
        /// Its version.
        version: String,
        /// What the crate is instead.
        why: &'static str,
    },
}

/// What a crate's cache directory holds when complete.
const MARKER: &str = ".schedlab-fetched";

/// `$CARGO_HOME/registry/src/*` (default `~/.cargo`), sorted.
pub fn registry_src_dirs() -> Vec<PathBuf> {
    let home = std::env::var_os("CARGO_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")));
    let Some(home) = home else { return Vec::new() };
    let mut out: Vec<PathBuf> = std::fs::read_dir(home.join("registry/src"))
        .map(|rd| rd.filter_map(|e| e.ok().map(|e| e.path())).filter(|p| p.is_dir()).collect())
        .unwrap_or_default();
    out.sort();
    out
}

/// `crate:NAME[@VERSION]` -> (NAME, VERSION).
pub fn parse_spec(spec: &str) -> Option<Result<(String, Option<String>), FetchError>> {
    let rest = spec.strip_prefix("crate:")?;
    let (name, version) = match rest.split_once('@') {
        Some((n, v)) => (n, Some(v)),
        None => (rest, None),
    };
    let ok_name = !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    let ok_version = version.is_none_or(|v| !v.is_empty() && v.chars().all(|c| c.is_ascii_alphanumeric() || ".-+".contains(c)));
    Some(if !ok_name || !ok_version {
        Err(FetchError::Spec { spec: spec.to_string() })
    } else {
        Ok((name.to_string(), version.map(str::to_string)))
    })
}

/// Numeric comparison of dotted versions (1.10.0 after 1.9.3).
fn version_key(v: &str) -> Vec<(u64, String)> {
    v.split(['.', '-', '+']).map(|p| (p.parse::<u64>().unwrap_or(0), p.to_string())).collect()
}

/// The newest version of `name` with a complete copy under `dir`.
fn newest_in(dir: &Path, name: &str, complete: impl Fn(&Path) -> bool) -> Option<String> {
    let prefix = format!("{name}-");
    let mut versions: Vec<String> = std::fs::read_dir(dir)
        .ok()?
        .filter_map(|e| e.ok())
        .filter(|e| complete(&e.path()))
        .filter_map(|e| e.file_name().to_str().and_then(|f| f.strip_prefix(&prefix)).map(str::to_string))
        .filter(|v| v.starts_with(|c: char| c.is_ascii_digit()))
        .collect();
    versions.sort_by_key(|v| version_key(v));
    versions.pop()
}

fn copy_tree(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    let mut entries: Vec<_> = std::fs::read_dir(from)?.filter_map(|e| e.ok()).collect();
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let (src, dst) = (e.path(), to.join(e.file_name()));
        let ty = e.file_type()?;
        if ty.is_dir() {
            copy_tree(&src, &dst)?;
        } else if ty.is_file() {
            std::fs::copy(&src, &dst)?;
        } else if ty.is_symlink() {
            // bpf_h has none today; follow one if it points at a file.
            if src.is_file() {
                std::fs::copy(&src, &dst)?;
            }
        }
    }
    Ok(())
}

/// Runs `cargo info NAME@VERSION` (or NAME: the newest), which downloads
/// and unpacks the crate into cargo's registry; returns the version.
fn cargo_info(name: &str, version: Option<&str>, cache: &Path) -> Result<String, FetchError> {
    let cargo = std::env::var("CARGO").ok().filter(|c| !c.is_empty()).unwrap_or_else(|| "cargo".into());
    let spec = match version {
        Some(v) => format!("{name}@{v}"),
        None => name.to_string(),
    };
    // Outside any workspace, so cargo does not answer with a locked version.
    std::fs::create_dir_all(cache).map_err(|err| FetchError::Io { path: cache.to_path_buf(), err })?;
    let out = Command::new(&cargo)
        .args(["info", &spec])
        .current_dir(cache)
        .env("CARGO_TERM_COLOR", "never")
        .output()
        .map_err(|err| FetchError::NoCargo { spec: spec.clone(), cargo: cargo.clone(), err })?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let found = stdout.lines().find_map(|l| l.strip_prefix("version:")).and_then(|v| v.split_whitespace().next());
    match found {
        Some(v) if out.status.success() => Ok(v.to_string()),
        _ => {
            let why = stderr.lines().rev().find(|l| l.starts_with("error")).unwrap_or("no version in its output").trim().to_string();
            let cache = cache.join("crates");
            if why.contains("could not find") {
                Err(FetchError::NotFound { spec, why, cache })
            } else {
                Err(FetchError::Cargo { spec, why, cache })
            }
        }
    }
}

/// `name-version` in cargo's registry, if unpacked there.
fn in_registry(name: &str, version: &str) -> Option<PathBuf> {
    registry_src_dirs().into_iter().map(|r| r.join(format!("{name}-{version}"))).find(|d| d.join("Cargo.toml").is_file())
}

/// Copies the files of `from` (a crate unpacked by cargo) that schedlab's
/// build reads into `CACHE/crates/NAME-VERSION`, through a temporary
/// directory and a rename.
fn store(from: &Path, dest: &Path, parts: &[&str]) -> Result<(), FetchError> {
    let parent = dest.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(parent).map_err(|err| FetchError::Io { path: parent.to_path_buf(), err })?;
    let tmp = parent.join(format!(".tmp-{}", super::compile::unique_suffix()));
    let result = (|| -> std::io::Result<()> {
        std::fs::create_dir_all(&tmp)?;
        for part in parts {
            let src = from.join(part);
            if src.is_dir() {
                copy_tree(&src, &tmp.join(part))?;
            } else if src.is_file() {
                if let Some(p) = tmp.join(part).parent() {
                    std::fs::create_dir_all(p)?;
                }
                std::fs::copy(&src, tmp.join(part))?;
            }
        }
        std::fs::write(tmp.join(MARKER), format!("copied from {}\n", from.display()))?;
        Ok(())
    })();
    if let Err(err) = result {
        let _ = std::fs::remove_dir_all(&tmp);
        return Err(FetchError::Copy { from: from.to_path_buf(), dest: dest.to_path_buf(), err });
    }
    if let Err(err) = std::fs::rename(&tmp, dest) {
        // Another process stored it first; its copy is the same crate.
        let _ = std::fs::remove_dir_all(&tmp);
        if !dest.join(MARKER).is_file() {
            return Err(FetchError::Io { path: dest.to_path_buf(), err });
        }
    }
    Ok(())
}

/// The cached copy of `name` (`version`, or the newest cached, or the
/// newest published), fetched with cargo if it is not cached yet.
fn cached_crate(name: &str, version: Option<&str>, cache: &Path, parts: &[&str]) -> Result<(PathBuf, String), FetchError> {
    let crates = cache.join("crates");
    let complete = |p: &Path| p.join(MARKER).is_file();
    let version = match version {
        Some(v) => v.to_string(),
        None => match newest_in(&crates, name, complete) {
            Some(v) => v,
            None => cargo_info(name, None, cache)?,
        },
    };
    let dest = crates.join(format!("{name}-{version}"));
    if complete(&dest) {
        return Ok((dest, version));
    }
    let unpacked = match in_registry(name, &version) {
        Some(d) => d,
        None => {
            let got = cargo_info(name, Some(&version), cache)?;
            in_registry(name, &got).ok_or_else(|| FetchError::NotUnpacked { name: name.to_string(), version: version.clone() })?
        }
    };
    store(&unpacked, &dest, parts)?;
    Ok((dest, version))
}

/// scx_cargo `version`'s `bpf_h`, from the cache or fetched.
pub fn scx_cargo_headers(version: &str, cache: &Path) -> Result<PathBuf, FetchError> {
    let (dir, _) = cached_crate("scx_cargo", Some(version), cache, &["bpf_h", "Cargo.toml"])?;
    let h = dir.join("bpf_h");
    if !h.join("scx/common.bpf.h").is_file() {
        return Err(FetchError::NoHeaders { dir, version: version.to_string() });
    }
    Ok(h)
}

/// Fetches (once) the scheduler crate `spec` and the scx_cargo headers it
/// is built with; returns the crate's cached root.
pub fn fetch(spec: &str, cache: &Path) -> Result<PathBuf, FetchError> {
    let (name, version) = match parse_spec(spec) {
        Some(r) => r?,
        None => return Err(FetchError::Spec { spec: spec.to_string() }),
    };
    let parts = ["src/bpf", "build.rs", "Cargo.toml", "Cargo.lock", "LICENSE", "README.md"];
    let (root, version) = cached_crate(&name, version.as_deref(), cache, &parts)?;
    if !root.join("src/bpf/main.bpf.c").is_file() {
        let toml = std::fs::read_to_string(root.join("Cargo.toml")).unwrap_or_default();
        let why = if toml.contains("scx_rustland_core") {
            "its scheduling policy runs in a user-space process (scx_rustland_core), and schedlab hosts only the BPF side of a scheduler"
        } else {
            "it is not a BPF scheduler built with scx_cargo"
        };
        return Err(FetchError::NotBpf { name, version, why });
    }
    // Its headers go into the cache too, so later runs need nothing else.
    if let Some(v) = super::source::scx_cargo_version(&root) {
        scx_cargo_headers(&v, cache)?;
    }
    Ok(root)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_and_versions() {
        assert_eq!(parse_spec("crate:scx_flow@2.2.5").unwrap().unwrap(), ("scx_flow".into(), Some("2.2.5".into())));
        assert_eq!(parse_spec("crate:scx_bpfland").unwrap().unwrap(), ("scx_bpfland".into(), None));
        assert!(parse_spec("crate:").unwrap().is_err());
        assert!(parse_spec("crate:a b").unwrap().is_err());
        assert!(parse_spec("crate:x@").unwrap().is_err());
        assert!(parse_spec("simple").is_none());
        let mut v = vec!["1.10.0", "1.9.3", "1.2.0"];
        v.sort_by_key(|x| version_key(x));
        assert_eq!(v, ["1.2.0", "1.9.3", "1.10.0"]);
    }

    #[test]
    fn a_cached_crate_is_used_without_cargo() {
        let d = std::env::temp_dir().join(format!("schedlab-fetch-{}", super::super::compile::unique_suffix()));
        let root = d.join("crates/scx_demo-1.2.0");
        std::fs::create_dir_all(root.join("src/bpf")).unwrap();
        std::fs::write(root.join("src/bpf/main.bpf.c"), "").unwrap();
        std::fs::write(root.join("Cargo.toml"), "[package]\nname = \"scx_demo\"\nversion = \"1.2.0\"\n").unwrap();
        std::fs::write(root.join(MARKER), "").unwrap();
        // An incomplete newer copy is ignored.
        std::fs::create_dir_all(d.join("crates/scx_demo-1.10.0")).unwrap();
        assert_eq!(fetch("crate:scx_demo", &d).unwrap(), root);
        assert_eq!(fetch("crate:scx_demo@1.2.0", &d).unwrap(), root);
        std::fs::remove_file(root.join("src/bpf/main.bpf.c")).unwrap();
        let e = fetch("crate:scx_demo", &d).unwrap_err();
        assert!(matches!(e, FetchError::NotBpf { .. }), "{e:?}");
        let e = e.to_string();
        assert!(e.contains("has no src/bpf/main.bpf.c") && e.contains("refused"), "{e}");
        let _ = std::fs::remove_dir_all(&d);
    }
}
