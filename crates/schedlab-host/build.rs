//! Hashes the embedded shim at build time.
//!
//! The shim's SHA-256 names its directory in the compile cache and is part
//! of every cache key. Computed at run time it was a quarter megabyte of
//! hashing in every run, about a tenth of a small scenario's whole
//! process; here it is done once per build. The list of files and their
//! order are read from `SHIM_FILES` in src/compile.rs, so there is one
//! list; a unit test (compile::tests) holds this hash to one computed at
//! run time from `SHIM_FILES` itself.

use sha2::{Digest, Sha256};

fn main() {
    let list = "src/compile.rs";
    println!("cargo:rerun-if-changed={list}");
    println!("cargo:rerun-if-changed=build.rs");
    let text = std::fs::read_to_string(list).unwrap_or_else(|e| panic!("reading {list}: {e}"));
    let start = text.find("pub const SHIM_FILES").unwrap_or_else(|| panic!("{list}: no SHIM_FILES"));
    let end = start + text[start..].find("];").unwrap_or_else(|| panic!("{list}: SHIM_FILES has no end"));
    let mut h = Sha256::new();
    let mut n = 0;
    for line in text[start..end].lines() {
        // ("name", include_str!("../shim/name")),
        let Some(rest) = line.trim().strip_prefix("(\"") else { continue };
        let (name, rest) = rest.split_once('"').unwrap_or_else(|| panic!("{list}: unreadable SHIM_FILES entry {line:?}"));
        let path = rest
            .split_once("include_str!(\"")
            .and_then(|(_, r)| r.split_once('"'))
            .map(|(p, _)| p)
            .unwrap_or_else(|| panic!("{list}: SHIM_FILES entry {line:?} has no include_str!"));
        assert_eq!(path, format!("../shim/{name}"), "{list}: SHIM_FILES entry {name:?} embeds another file");
        let file = format!("shim/{name}");
        println!("cargo:rerun-if-changed={file}");
        let data = std::fs::read(&file).unwrap_or_else(|e| panic!("reading {file}: {e}"));
        h.update(name.as_bytes());
        h.update([0]);
        h.update(&data);
        h.update([0]);
        n += 1;
    }
    assert!(n > 0, "{list}: SHIM_FILES lists no files");
    let hex: String = h.finalize().iter().map(|b| format!("{b:02x}")).collect();
    println!("cargo:rustc-env=SCHEDLAB_SHIM_SHA256={hex}");
}
