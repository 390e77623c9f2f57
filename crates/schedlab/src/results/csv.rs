//! CSV output: the JSON results flattened into tables, so that the numbers
//! are the same as in the JSON and the summary (they come from the same
//! serialised values).
//!
//! Nested objects become dotted columns (`latency.p99_ns`); threshold lists
//! become one column per threshold (`over_100us`); other lists are joined
//! with `;`. Columns are the union over rows, in first-seen order.

use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::Value;

use crate::results::report::Results;

/// Quotes a field when it needs it (RFC 4180).
pub fn field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// A CSV document from a header and rows.
pub fn document(header: &[String], rows: &[Vec<String>]) -> String {
    let mut out = String::new();
    for r in std::iter::once(header).chain(rows.iter().map(|r| r.as_slice())) {
        out.push_str(&r.iter().map(|s| field(s)).collect::<Vec<_>>().join(","));
        out.push('\n');
    }
    out
}

fn scalar(v: &Value) -> String {
    match v {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn flatten_into(prefix: &str, v: &Value, out: &mut Vec<(String, String)>) {
    let name = |k: &str| if prefix.is_empty() { k.to_string() } else { format!("{prefix}.{k}") };
    match v {
        Value::Object(m) => {
            for (k, v) in m {
                flatten_into(&name(k), v, out);
            }
        }
        // An absent value contributes no column; other rows may have it.
        Value::Null => {}
        Value::Array(items) if items.iter().all(|i| i.get("above_ns").is_some() && i.get("count").is_some()) => {
            // Counts over thresholds: one column per threshold.
            let base = prefix.rsplit_once('.').map_or(String::new(), |(p, _)| format!("{p}."));
            for i in items {
                let above = i["above_ns"].as_u64().unwrap_or(0);
                out.push((format!("{base}over_{}", exact_duration(above)), scalar(&i["count"])));
            }
        }
        Value::Array(items) => out.push((prefix.to_string(), items.iter().map(scalar).collect::<Vec<_>>().join(";"))),
        other => out.push((prefix.to_string(), scalar(other))),
    }
}

/// A duration in the largest unit that divides it: 100us, 2ms, 1500ns.
pub fn exact_duration(ns: u64) -> String {
    match ns {
        0 => "0ns".into(),
        n if n % 1_000_000_000 == 0 => format!("{}s", n / 1_000_000_000),
        n if n % 1_000_000 == 0 => format!("{}ms", n / 1_000_000),
        n if n % 1_000 == 0 => format!("{}us", n / 1_000),
        n => format!("{n}ns"),
    }
}

/// Flattens one serialisable row into (column, value) pairs.
pub fn flatten<T: Serialize>(row: &T) -> Vec<(String, String)> {
    let v = serde_json::to_value(row).expect("results serialize");
    let mut out = Vec::new();
    flatten_into("", &v, &mut out);
    out
}

/// A table of serialisable rows: the union of their columns.
pub fn table<T: Serialize>(rows: &[T]) -> String {
    let flat: Vec<Vec<(String, String)>> = rows.iter().map(flatten).collect();
    let mut header: Vec<String> = Vec::new();
    for r in &flat {
        for (k, _) in r {
            if !header.contains(k) {
                header.push(k.clone());
            }
        }
    }
    // serde_json's maps are sorted: put the identifying columns first.
    for key in ["variant", "cpu", "id", "name", "workload"].iter().rev() {
        if let Some(i) = header.iter().position(|h| h == key) {
            let k = header.remove(i);
            header.insert(0, k);
        }
    }
    let body: Vec<Vec<String>> = flat
        .iter()
        .map(|r| header.iter().map(|h| r.iter().find(|(k, _)| k == h).map(|(_, v)| v.clone()).unwrap_or_default()).collect())
        .collect();
    document(&header, &body)
}

/// The three tables of a run: (file suffix, CSV text).
pub fn results_tables(r: &Results) -> Vec<(&'static str, String)> {
    let mut t = vec![("workloads", table(&r.workloads)), ("tasks", table(&r.tasks)), ("cpus", table(&r.cpus))];
    if !r.cgroups.is_empty() {
        t.push(("cgroups", table(&r.cgroups)));
    }
    t
}

/// Writes `<dir>/<stem>-{workloads,tasks,cpus}.csv` (and `-cgroups.csv`
/// when there are cgroups); returns the paths.
pub fn write_results(r: &Results, dir: &Path, stem: &str) -> std::io::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir)?;
    let mut paths = Vec::new();
    for (name, text) in results_tables(r) {
        let p = dir.join(format!("{stem}-{name}.csv"));
        write_atomic(&p, text.as_bytes())?;
        paths.push(p);
    }
    Ok(paths)
}

/// Writes a file through a temporary name in the same directory and a
/// rename, so a reader (or a restarted sweep) never sees half a file.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::sync::atomic::{AtomicU64, Ordering};
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let tmp = dir.join(format!(".{name}.tmp.{}.{}", std::process::id(), SEQ.fetch_add(1, Ordering::Relaxed)));
    let res = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if res.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    res
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Serialize)]
    struct Row {
        name: &'static str,
        lat: Option<Lat>,
        thresholds: Vec<Thr>,
        tags: Vec<u32>,
    }
    #[derive(Serialize)]
    struct Lat {
        p99_ns: u64,
    }
    #[derive(Serialize)]
    struct Thr {
        above_ns: u64,
        count: u64,
    }

    #[test]
    fn flattens_nested_rows_into_a_union_of_columns() {
        let rows = vec![
            Row { name: "a,b", lat: Some(Lat { p99_ns: 7 }), thresholds: vec![Thr { above_ns: 100_000, count: 3 }], tags: vec![1, 2] },
            Row { name: "c\"d", lat: None, thresholds: vec![], tags: vec![] },
        ];
        let t = table(&rows);
        assert_eq!(t, "name,lat.p99_ns,tags,over_100us\n\"a,b\",7,1;2,3\n\"c\"\"d\",,,\n");
    }
}
