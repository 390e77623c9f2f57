//! Where a sched_ext scheduler comes from: published crates (crate:NAME),
//! directories, extra include directories, multi-object builds, compile
//! diagnostics and load refusals.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("schedlab-src-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// schedlab with its own cache directory (and extra environment).
fn schedlab(cache: &Path, env: &[(&str, &str)], args: &[&str]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_schedlab"));
    c.args(args).env("SCHEDLAB_CACHE_DIR", cache);
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().expect("run schedlab")
}

const SCENARIO: &str = "seed = 1\nduration = \"30ms\"\n[machine]\npreset = \"4cpu\"\n[[workload]]\nkind = \"hog\"\ncount = 6\n";

fn scenario(dir: &Path) -> String {
    let p = dir.join("s.toml");
    std::fs::write(&p, SCENARIO).unwrap();
    p.display().to_string()
}

fn simple_src() -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../schedulers/simple.bpf.c")).unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A published crate, fetched with cargo into the cache (from cargo's
/// registry without the network when it is already unpacked there), then
/// used offline: a bare crate:NAME takes the cached version with no cargo.
#[test]
fn crate_is_fetched_once_and_recorded() {
    let d = scratch("crate");
    let s = scenario(&d);
    let cache = d.join("cache");
    let a = schedlab(&cache, &[], &["run", &s, "--sched", "crate:scx_bpfland@1.1.4", "--json", "-", "-q"]);
    assert_eq!(a.status.code(), Some(0), "{}", stderr(&a));
    let j: serde_json::Value = serde_json::from_slice(&a.stdout).unwrap();
    assert_eq!(j["sched_ext"]["crate"], "scx_bpfland@1.1.4", "{j}");
    assert!(j["sched_ext"]["op_calls"]["enqueue"].as_u64().unwrap() > 0, "{j}");
    assert!(cache.join("crates/scx_bpfland-1.1.4/src/bpf/main.bpf.c").is_file());
    assert!(cache.join("crates/scx_cargo-1.1.4/bpf_h/scx/common.bpf.h").is_file(), "its scx_cargo's headers are cached too");
    // Offline: no cargo at all, the bare name takes the cached version.
    let b = schedlab(&cache, &[("CARGO", "/nonexistent/cargo")], &["run", &s, "--sched", "crate:scx_bpfland", "--json", "-", "-q"]);
    assert_eq!(b.status.code(), Some(0), "{}", stderr(&b));
    let k: serde_json::Value = serde_json::from_slice(&b.stdout).unwrap();
    assert_eq!(k["sched_ext"]["crate"], "scx_bpfland@1.1.4");
    assert!(k["event_hash"] == j["event_hash"] && k["sched_ext"] == j["sched_ext"], "same crate, same run");
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn crate_errors_are_one_clear_line() {
    let d = scratch("crate-err");
    let s = scenario(&d);
    let cache = d.join("cache");
    // cargo's own answer for a name the registry does not have.
    let fake = d.join("fake-cargo");
    std::fs::write(&fake, "#!/bin/sh\necho \"error: could not find \\`$2\\` in registry \\`crates-io\\`\" >&2\nexit 101\n").unwrap();
    std::process::Command::new("chmod").arg("+x").arg(&fake).status().unwrap();
    let o = schedlab(&cache, &[("CARGO", fake.to_str().unwrap())], &["run", &s, "--sched", "crate:scx_nosuch"]);
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert_eq!(e.trim_end().lines().count(), 1, "{e}");
    assert!(e.contains("crate:scx_nosuch") && e.contains("no such crate") && e.contains("network"), "{e}");
    // A crate whose policy is in user space has no BPF main to build.
    let root = cache.join("crates/scx_userspace-1.0.0");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join("Cargo.toml"), "[package]\nname = \"scx_userspace\"\nversion = \"1.0.0\"\n[dependencies.scx_rustland_core]\nversion = \"2\"\n").unwrap();
    std::fs::write(root.join(".schedlab-fetched"), "").unwrap();
    let o = schedlab(&cache, &[], &["run", &s, "--sched", "crate:scx_userspace"]);
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(e.contains("no src/bpf/main.bpf.c") && e.contains("user-space") && e.contains("refused"), "{e}");
    let o = schedlab(&cache, &[], &["run", &s, "--sched", "crate:bad name"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("crate:NAME@VERSION"), "{}", stderr(&o));
    let _ = std::fs::remove_dir_all(&d);
}

/// A directory names its scheduler; a crate-shaped one links every source
/// its build.rs adds, sharing maps and globals across the objects.
#[test]
fn directory_and_multi_object_build() {
    let d = scratch("dir");
    let s = scenario(&d);
    let cache = d.join("cache");
    let plain = d.join("plain");
    std::fs::create_dir_all(&plain).unwrap();
    std::fs::write(plain.join("main.bpf.c"), simple_src()).unwrap();
    let o = schedlab(&cache, &[], &["run", &s, "--sched", plain.to_str().unwrap(), "-q", "--json", "-"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));

    let root = d.join("scx_two-0.1.0");
    std::fs::create_dir_all(root.join("src/bpf/lib")).unwrap();
    std::fs::write(root.join("Cargo.toml"), "[package]\nname = \"scx_two\"\nversion = \"0.1.0\"\n").unwrap();
    std::fs::write(root.join("build.rs"), "fn main() { scx_cargo::BpfBuilder::new().unwrap().add_source(\"src/bpf/lib/count.bpf.c\"); }\n").unwrap();
    // The second object: its own license, a static of the same name as
    // one in main, a map and a global main uses.
    std::fs::write(
        root.join("src/bpf/lib/count.bpf.c"),
        "#include <scx/common.bpf.h>\nchar _license[] SEC(\"license\") = \"GPL\";\nstatic u64 vtime_now;\n\
         struct { __uint(type, BPF_MAP_TYPE_ARRAY); __uint(max_entries, 1); __type(key, u32); __type(value, u64); } lib_counts SEC(\".maps\");\n\
         u64 lib_calls;\nvoid count_enqueue(void)\n{\n\tu32 k = 0;\n\tu64 *v = bpf_map_lookup_elem(&lib_counts, &k);\n\tif (v)\n\t\t(*v)++;\n\tlib_calls += 1 + vtime_now;\n}\n",
    )
    .unwrap();
    let main = simple_src()
        .replace("#include <scx/common.bpf.h>", "#include <scx/common.bpf.h>\nvoid count_enqueue(void);")
        .replacen("void BPF_STRUCT_OPS(simple_enqueue, struct task_struct *p, u64 enq_flags)\n{", "void BPF_STRUCT_OPS(simple_enqueue, struct task_struct *p, u64 enq_flags)\n{\n\tcount_enqueue();", 1);
    assert!(main.contains("\tcount_enqueue();"), "simple.bpf.c's enqueue moved; update this test");
    std::fs::write(root.join("src/bpf/main.bpf.c"), main).unwrap();
    let o = schedlab(&cache, &[], &["run", &s, "--sched", root.to_str().unwrap(), "-q", "--json", "-"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let x = &j["sched_ext"];
    assert_eq!(x["crate"], "scx_two@0.1.0");
    let enq = x["op_calls"]["enqueue"].as_u64().unwrap();
    assert!(enq > 0);
    assert_eq!(x["counters"]["lib_calls"].as_u64(), Some(enq), "the other object's global: {x}");
    let _ = std::fs::remove_dir_all(&d);
}

/// --sched-include (and the scenario's scheduler.include) adds a header
/// directory; without it the compiler's diagnostics come through line by
/// line and the run fails with exit 2.
#[test]
fn include_dirs_and_compile_diagnostics() {
    let d = scratch("inc");
    let s = scenario(&d);
    let cache = d.join("cache");
    let inc = d.join("myinc");
    std::fs::create_dir_all(&inc).unwrap();
    std::fs::write(inc.join("my_slice.h"), "#define MY_SLICE 3000000ULL\n").unwrap();
    let src = d.join("inc.bpf.c");
    let text = simple_src().replace("#include <scx/common.bpf.h>", "#include <scx/common.bpf.h>\n#include <my_slice.h>\nconst volatile u64 my_slice = MY_SLICE;");
    let line = text.lines().position(|l| l.contains("<my_slice.h>")).unwrap() + 1;
    std::fs::write(&src, text).unwrap();
    let o = schedlab(&cache, &[], &["run", &s, "--sched", src.to_str().unwrap()]);
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(e.lines().any(|l| l.contains(&format!("inc.bpf.c:{line}:")) && l.contains("my_slice.h")), "the compiler's own line: {e}");
    assert!(e.lines().last().unwrap().starts_with("error: ") && e.lines().last().unwrap().contains("compile error"), "{e}");
    let o = schedlab(&cache, &[], &["run", &s, "--sched", src.to_str().unwrap(), "--sched-include", inc.to_str().unwrap(), "-q"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let sc = d.join("inc.toml");
    std::fs::write(&sc, format!("{SCENARIO}[scheduler]\nkind = \"ext\"\nsched = \"inc.bpf.c\"\ninclude = [\"myinc\"]\n")).unwrap();
    let o = schedlab(&cache, &[], &["run", sc.to_str().unwrap(), "-q"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let o = schedlab(&cache, &[], &["run", &s, "--sched", src.to_str().unwrap(), "--sched-include", "/nonexistent/dir"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--sched-include /nonexistent/dir"), "{}", stderr(&o));
    let _ = std::fs::remove_dir_all(&d);
}

/// What the runtime lacks is refused at load with exit 2 and one line
/// naming the symbol and the source line: a kfunc it does not define, and
/// a weak one called without a bpf_ksym_exists() test (natively a call
/// through NULL, where the verifier would refuse the program).
#[test]
fn missing_symbols_are_refused_at_load() {
    let d = scratch("refuse");
    let s = scenario(&d);
    let cache = d.join("cache");
    for (name, decl) in [("strong", "void scx_bpf_nope(s32 cpu) __ksym;"), ("weak", "void scx_bpf_nope(s32 cpu) __ksym __weak;")] {
        let src = d.join(format!("{name}.bpf.c"));
        let text = simple_src().replace("#include <scx/common.bpf.h>", &format!("#include <scx/common.bpf.h>\n{decl}")).replacen(
            "void BPF_STRUCT_OPS(simple_enqueue, struct task_struct *p, u64 enq_flags)\n{",
            "void BPF_STRUCT_OPS(simple_enqueue, struct task_struct *p, u64 enq_flags)\n{\n\tscx_bpf_nope(0);",
            1,
        );
        let line = text.lines().position(|l| l.contains("scx_bpf_nope(0)")).unwrap() + 1;
        std::fs::write(&src, text).unwrap();
        let o = schedlab(&cache, &[], &["run", &s, "--sched", src.to_str().unwrap()]);
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{name}: {e}");
        assert_eq!(e.trim_end().lines().count(), 1, "{name}: {e}");
        assert!(e.contains("lacks `scx_bpf_nope`") && e.contains(&format!("{name}.bpf.c:{line}")), "{name}: {e}");
    }
    // Tested with bpf_ksym_exists(), the missing weak kfunc is fine.
    let src = d.join("tested.bpf.c");
    std::fs::write(
        &src,
        simple_src().replace("#include <scx/common.bpf.h>", "#include <scx/common.bpf.h>\nvoid scx_bpf_nope(s32 cpu) __ksym __weak;").replacen(
            "void BPF_STRUCT_OPS(simple_enqueue, struct task_struct *p, u64 enq_flags)\n{",
            "void BPF_STRUCT_OPS(simple_enqueue, struct task_struct *p, u64 enq_flags)\n{\n\tif (bpf_ksym_exists(scx_bpf_nope))\n\t\tscx_bpf_nope(0);",
            1,
        ),
    )
    .unwrap();
    let o = schedlab(&cache, &[], &["run", &s, "--sched", src.to_str().unwrap(), "-q"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let _ = std::fs::remove_dir_all(&d);
}
