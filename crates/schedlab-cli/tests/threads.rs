//! Determinism across thread counts (issue 13 §3): `compare` and `sweep`
//! run their variants and seeds on rayon's pool; the results must not
//! depend on how many threads it has.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn schedlab(args: &[&str], threads: usize) -> Output {
    Command::new(env!("CARGO_BIN_EXE_schedlab"))
        .args(args)
        .env("RAYON_NUM_THREADS", threads.to_string())
        .output()
        .expect("run schedlab")
}

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("schedlab-threads-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Every file under `dir`, by relative path, with its bytes.
fn files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    fn walk(root: &Path, d: &Path, out: &mut BTreeMap<String, Vec<u8>>) {
        for e in std::fs::read_dir(d).unwrap().map(Result::unwrap) {
            let p = e.path();
            if p.is_dir() {
                walk(root, &p, out);
            } else {
                out.insert(p.strip_prefix(root).unwrap().display().to_string(), std::fs::read(&p).unwrap());
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

/// Text outputs (JSON, CSV) of a directory; plots are left out (their
/// bytes depend on the font rasteriser, not on the simulation).
fn outputs(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    files(dir).into_iter().filter(|(k, _)| k.ends_with(".json") || k.ends_with(".csv")).collect()
}

const SCENARIO: &str = "seed = 7\nduration = \"150ms\"\n[machine]\npreset = \"4cpu\"\n\
[[workload]]\nkind = \"hog\"\nname = \"hogs\"\ncount = 6\nnice = 5\nrun = \"exp:2ms\"\nsleep = \"exp:1ms\"\n\
[[workload]]\nkind = \"cyclictest\"\nname = \"ct\"\nthreads = 2\ninterval = \"500us\"\n";

#[test]
fn compare_is_the_same_on_one_and_two_threads() {
    let dir = tmp("compare");
    let sc = dir.join("mix.toml");
    std::fs::write(&sc, SCENARIO).unwrap();
    let run = |threads: usize| {
        let out = dir.join(format!("out{threads}"));
        let o = schedlab(
            &["compare", sc.to_str().unwrap(), "--sched", "eevdf,simple,flow,qmap", "--feature", "RUN_TO_PARITY=on,off", "--out", out.to_str().unwrap()],
            threads,
        );
        assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
        (o.stdout, outputs(&out))
    };
    let (text1, files1) = run(1);
    let (text2, files2) = run(2);
    assert!(files1.keys().any(|k| k.ends_with(".json")), "compare wrote no JSON: {:?}", files1.keys());
    assert_eq!(files1, files2, "compare's files differ between 1 and 2 threads");
    assert_eq!(String::from_utf8_lossy(&text1), String::from_utf8_lossy(&text2));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn sweep_is_the_same_on_one_and_two_threads() {
    let dir = tmp("sweep");
    let sc = dir.join("mix.toml");
    std::fs::write(&sc, SCENARIO).unwrap();
    let run = |jobs: usize| {
        let out = dir.join(format!("out{jobs}"));
        let o = schedlab(
            &[
                "sweep",
                sc.to_str().unwrap(),
                "--sched",
                "simple",
                "--seeds",
                "1..4",
                "--param",
                "workload.0.count=2,6",
                "--jobs",
                &jobs.to_string(),
                "--out",
                out.to_str().unwrap(),
                "--quiet",
            ],
            jobs,
        );
        assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
        outputs(&out)
    };
    let (a, b) = (run(1), run(2));
    assert!(a.keys().filter(|k| k.starts_with("runs")).count() == 8, "8 run records: {:?}", a.keys());
    assert_eq!(a, b, "sweep's files differ between 1 and 2 threads");
    let _ = std::fs::remove_dir_all(&dir);
}
