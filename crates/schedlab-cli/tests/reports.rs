//! Results and reports from the command line: CSV, plots, Perfetto traces,
//! `compare` and resumable `sweep`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn schedlab(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_schedlab")).args(args).output().expect("run schedlab")
}

fn ok(args: &[&str]) -> Output {
    let out = schedlab(args);
    assert!(out.status.success(), "schedlab {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    out
}

/// A fresh directory for one test.
fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("schedlab-reports-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A small latency scenario: cyclictest beside hogs on 2 CPUs.
const SCENARIO: &str = r#"seed = 1
duration = "40ms"
[machine]
preset = "2cpu"
[[workload]]
kind = "cyclictest"
name = "cyclictest"
threads = 2
interval = "1ms"
spikes_above = ["50us"]
[[workload]]
kind = "hog"
name = "hogs"
count = 3
run = "exp:2ms"
sleep = "exp:1ms"
"#;

fn scenario(dir: &Path) -> PathBuf {
    let p = dir.join("lat.toml");
    std::fs::write(&p, SCENARIO).unwrap();
    p
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn check_svg(p: &Path, title_part: &str) {
    let text = std::fs::read_to_string(p).unwrap();
    let doc = roxmltree::Document::parse(&text).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    assert_eq!(doc.root_element().tag_name().name(), "svg");
    let texts: Vec<&str> = doc.descendants().filter(|n| n.has_tag_name("text")).filter_map(|n| n.text()).collect();
    assert!(texts.iter().any(|t| t.contains(title_part)), "{}: no title with {title_part:?} in {texts:?}", p.display());
    assert!(doc.descendants().filter(|n| n.has_tag_name("polyline") || n.has_tag_name("rect") || n.has_tag_name("path")).count() > 5);
}

fn check_png(p: &Path) {
    let f = std::fs::File::open(p).unwrap();
    let mut reader = png::Decoder::new(f).read_info().unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    let info = reader.info();
    assert_eq!((info.width, info.height), (1024, 640), "{}", p.display());
    let mut buf = vec![0; reader.output_buffer_size()];
    reader.next_frame(&mut buf).unwrap();
    // Non-trivial: not a blank canvas.
    let distinct: std::collections::BTreeSet<&[u8]> = buf.chunks(3).collect();
    assert!(distinct.len() > 20, "{}: only {} colours", p.display(), distinct.len());
}

fn column(csv: &str, name: &str) -> Vec<String> {
    let mut lines = csv.lines();
    let head: Vec<&str> = lines.next().unwrap().split(',').collect();
    let i = head.iter().position(|h| *h == name).unwrap_or_else(|| panic!("no column {name} in {head:?}"));
    lines.map(|l| l.split(',').nth(i).unwrap_or("").to_string()).collect()
}

#[test]
fn run_writes_csv_plots_and_a_trace() {
    let d = tmp("run");
    let sc = scenario(&d);
    let (csv, plots, trace) = (d.join("csv"), d.join("plots"), d.join("t.pftrace"));
    let out = ok(&["run", s(&sc), "--json", "-", "--csv", s(&csv), "--plot", s(&plots), "--trace", s(&trace), "--trace-window", "10ms..30ms", "-q"]);
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    // CSV numbers are the JSON's.
    let w = std::fs::read_to_string(csv.join("lat-workloads.csv")).unwrap();
    assert_eq!(column(&w, "name"), ["cyclictest", "hogs"]);
    assert_eq!(column(&w, "latency.p99_ns")[0], json["workloads"][0]["latency"]["p99_ns"].to_string());
    assert_eq!(column(&w, "over_50us")[0], json["workloads"][0]["thresholds"][0]["count"].to_string());
    let t = std::fs::read_to_string(csv.join("lat-tasks.csv")).unwrap();
    assert_eq!(column(&t, "runtime_ns").len(), json["tasks"].as_array().unwrap().len());
    let c = std::fs::read_to_string(csv.join("lat-cpus.csv")).unwrap();
    assert_eq!(column(&c, "busy_ns"), json["cpus"].as_array().unwrap().iter().map(|c| c["busy_ns"].to_string()).collect::<Vec<_>>());
    for stem in ["lat-cyclictest-latency-hist", "lat-cyclictest-latency-cdf", "lat-cpu-util"] {
        check_svg(&plots.join(format!("{stem}.svg")), "lat");
        check_png(&plots.join(format!("{stem}.png")));
    }
    assert!(std::fs::metadata(&trace).unwrap().len() > 1000);
}

#[test]
fn compare_prints_a_row_per_variant_and_writes_csv_json_and_plots() {
    let d = tmp("compare");
    let sc = scenario(&d);
    let out = ok(&["compare", s(&sc), "--sched", "eevdf", "--feature", "RUN_TO_PARITY=on,off", "--out", s(&d.join("out")), "--plot", s(&d.join("plots"))]);
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(table.contains("eevdf RUN_TO_PARITY=on") && table.contains("eevdf RUN_TO_PARITY=off"), "{table}");
    assert!(table.contains("spikes >50.0us") || table.contains("spikes >50us"), "{table}");
    let json: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(d.join("out/lat-compare.json")).unwrap()).unwrap();
    let v = json["variants"].as_array().unwrap();
    assert_eq!(v.len(), 2);
    assert_eq!(v[1]["features_changed"][0], "NO_RUN_TO_PARITY");
    let csv = std::fs::read_to_string(d.join("out/lat-compare.csv")).unwrap();
    assert_eq!(column(&csv, "variant").len(), 4, "2 variants x 2 workloads");
    assert_eq!(column(&csv, "max_ns")[0], v[0]["workloads"][0]["max_ns"].to_string());
    check_svg(&d.join("plots/lat-compare-cyclictest-latency-bars.svg"), "by variant");
    check_png(&d.join("plots/lat-compare-cyclictest-latency-bars.png"));
    check_png(&d.join("plots/lat-compare-cyclictest-latency-cdf.png"));
}

fn sweep(sc: &Path, dir: &Path, seeds: &str) -> String {
    let out = ok(&["sweep", s(sc), "--seeds", seeds, "--param", "workload.1.count=1,3", "--out", s(dir), "-j", "2"]);
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn an_interrupted_sweep_resumes_to_the_same_aggregate() {
    let d = tmp("sweep");
    let sc = scenario(&d);
    let (resumed, fresh) = (d.join("resumed"), d.join("fresh"));
    // "Killed" half-way: only some runs finished, plus a torn temporary file
    // and a damaged record such as a crash could leave.
    let first = sweep(&sc, &resumed, "1..2");
    assert!(first.contains("4 runs (4 ran, 0 reused)"), "{first}");
    std::fs::write(resumed.join("runs/.abc.json.tmp.1.0"), "{\"key\": ").unwrap();
    let mut recs: Vec<PathBuf> = std::fs::read_dir(resumed.join("runs")).unwrap().map(|e| e.unwrap().path()).filter(|p| p.extension().is_some_and(|e| e == "json")).collect();
    recs.sort();
    assert_eq!(recs.len(), 4);
    std::fs::write(&recs[0], "{\"truncated").unwrap();
    let second = sweep(&sc, &resumed, "1..4");
    assert!(second.contains("8 runs (5 ran, 3 reused)"), "{second}");
    sweep(&sc, &fresh, "1..4");
    for f in ["lat-sweep.csv", "lat-sweep.json"] {
        let a = std::fs::read(resumed.join(f)).unwrap();
        let b = std::fs::read(fresh.join(f)).unwrap();
        assert!(a == b, "{f} differs between the resumed and the fresh sweep");
    }
    // Aggregates: median and spread per grid point.
    let csv = std::fs::read_to_string(fresh.join("lat-sweep.csv")).unwrap();
    assert!(csv.starts_with("workload.1.count,workload,metric,unit,n,median,q1,q3,min,max\n"), "{csv}");
    assert!(csv.contains("\n1,cyclictest,p99,ns,4,") && csv.contains("\n3,cyclictest,p99,ns,4,"), "{csv}");
}

#[test]
fn the_sweep_process_killed_mid_way_resumes() {
    let d = tmp("kill");
    let sc = scenario(&d);
    let dir = d.join("out");
    let mut child = Command::new(env!("CARGO_BIN_EXE_schedlab"))
        .args(["sweep", s(&sc), "--seeds", "1..12", "--param", "workload.1.count=1,3", "--out", s(&dir), "-j", "1", "-q"])
        .spawn()
        .unwrap();
    // Kill it once some runs are stored (or let it finish if it is quick).
    let start = std::time::Instant::now();
    loop {
        let n = std::fs::read_dir(dir.join("runs")).map(|r| r.count()).unwrap_or(0);
        if n >= 3 || start.elapsed().as_secs() > 60 || child.try_wait().unwrap().is_some() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let _ = child.kill();
    let _ = child.wait();
    ok(&["sweep", s(&sc), "--seeds", "1..12", "--param", "workload.1.count=1,3", "--out", s(&dir), "-q"]);
    ok(&["sweep", s(&sc), "--seeds", "1..12", "--param", "workload.1.count=1,3", "--out", s(&d.join("fresh")), "-q"]);
    assert_eq!(std::fs::read(dir.join("lat-sweep.json")).unwrap(), std::fs::read(d.join("fresh/lat-sweep.json")).unwrap());
}

#[test]
fn bad_report_options_exit_2() {
    let d = tmp("bad");
    let sc = scenario(&d);
    for args in [
        vec!["sweep", s(&sc), "--seeds", "5..1"],
        vec!["sweep", s(&sc), "--param", "nothing"],
        vec!["sweep", s(&sc), "--param", "workload.0.nosuch=1,2", "--out", s(&d)],
        vec!["run", s(&sc), "--trace", s(&d.join("t")), "--trace-window", "3s..1s"],
        vec!["compare", s(&sc), "--feature", "NO_SUCH=on,off", "--out", s(&d)],
    ] {
        let out = schedlab(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.starts_with("error: ") && !err.contains("panicked"), "{err}");
    }
}
