//! Import of `lscpu -p` output; see [`Topology::from_lscpu`](super::Topology::from_lscpu).

use super::{build, dense_ids, Placement, Topology, TopologyError, MAX_CPUS};
use std::collections::BTreeMap;

struct Columns {
    count: usize,
    cpu: usize,
    core: usize,
    socket: usize,
    node: Option<usize>,
    /// Cache column indices, most preferred LLC candidate first.
    caches: Vec<usize>,
}

struct Row {
    line: usize,
    core: u64,
    socket: u64,
    node: u64,
    caches: Vec<Option<u64>>,
}

fn error(line: usize, message: impl Into<String>) -> TopologyError {
    TopologyError::Lscpu {
        line,
        message: message.into(),
    }
}

pub(super) fn parse(text: &str) -> Result<Topology, TopologyError> {
    let mut columns: Option<Columns> = None;
    let mut header_line = 0;
    let mut rows: BTreeMap<u64, Row> = BTreeMap::new();
    let mut last_line = 0;
    for (idx, raw) in text.lines().enumerate() {
        let line = idx + 1;
        last_line = line;
        let trimmed = raw.trim();
        if trimmed.is_empty() {
            continue;
        }
        if let Some(comment) = trimmed.strip_prefix('#') {
            if is_header(comment) {
                if columns.is_some() {
                    // Rows under two headers would disagree on their columns.
                    return Err(error(line, format!("a second column header (the first is on line {header_line}): give one `lscpu -p` output per file")));
                }
                columns = Some(parse_header(comment, line)?);
                header_line = line;
            }
            continue;
        }
        let cols = columns.as_ref().ok_or_else(|| {
            error(
                line,
                "expected the column header comment (\"# CPU,Core,Socket,Node,,L1d,L1i,L2,L3\") before the first data line",
            )
        })?;
        let (cpu, row) = parse_row(trimmed, cols, line)?;
        if let Some(first) = rows.get(&cpu) {
            return Err(error(
                line,
                format!("CPU {cpu} is listed twice (first on line {})", first.line),
            ));
        }
        rows.insert(cpu, row);
    }
    if rows.is_empty() {
        return Err(error(
            last_line.max(1),
            "expected at least one CPU line such as \"0,0,0,0,,0,0,0,0\", found none",
        ));
    }
    let rows = dense_rows(rows)?;
    build("lscpu", &placements(&rows))
}

/// Whether a comment is the column header, whose first column is `CPU`.
fn is_header(comment: &str) -> bool {
    comment
        .split(',')
        .next()
        .is_some_and(|first| first.trim().eq_ignore_ascii_case("cpu"))
}

fn parse_header(comment: &str, line: usize) -> Result<Columns, TopologyError> {
    let names: Vec<String> = comment
        .split(',')
        .map(|n| n.trim().to_ascii_lowercase())
        .collect();
    let find = |name: &str| names.iter().position(|n| n == name);
    let require = |name: &str| {
        find(&name.to_ascii_lowercase()).ok_or_else(|| {
            error(
                line,
                format!("the header has no {name} column; expected e.g. \"# CPU,Core,Socket,Node,,L1d,L1i,L2,L3\""),
            )
        })
    };
    let mut caches: Vec<(u32, bool, usize)> = names
        .iter()
        .enumerate()
        .filter_map(|(i, n)| cache_rank(n).map(|(level, data)| (level, data, i)))
        .collect();
    // Highest level first; at equal level a data/unified cache beats an
    // instruction cache.
    caches.sort_by_key(|&(level, data, _)| std::cmp::Reverse((level, data)));
    Ok(Columns {
        count: names.len(),
        cpu: require("CPU")?,
        core: require("Core")?,
        socket: require("Socket")?,
        node: find("node"),
        caches: caches.into_iter().map(|(_, _, i)| i).collect(),
    })
}

/// Parses a cache column name such as `l3`, `l1d` or `l1i` into (level,
/// holds data).
fn cache_rank(name: &str) -> Option<(u32, bool)> {
    let rest = name.strip_prefix('l')?;
    let digits_end = rest
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(rest.len());
    let level = rest[..digits_end].parse().ok()?;
    match &rest[digits_end..] {
        "" | "d" | "u" => Some((level, true)),
        "i" => Some((level, false)),
        _ => None,
    }
}

fn parse_row(text: &str, cols: &Columns, line: usize) -> Result<(u64, Row), TopologyError> {
    let fields: Vec<&str> = text.split(',').map(str::trim).collect();
    if fields.len() < cols.count {
        return Err(error(
            line,
            format!(
                "expected {} comma-separated fields as in the header, found {}",
                cols.count,
                fields.len()
            ),
        ));
    }
    let number = |idx: usize, name: &str| -> Result<u64, TopologyError> {
        fields[idx].parse().map_err(|_| {
            error(
                line,
                format!(
                    "expected a number in the {name} column, found \"{}\"",
                    fields[idx]
                ),
            )
        })
    };
    let cpu = number(cols.cpu, "CPU")?;
    let node = match cols.node {
        Some(idx) if !fields[idx].is_empty() => number(idx, "Node")?,
        _ => 0,
    };
    let caches = cols
        .caches
        .iter()
        .map(|&idx| match fields[idx] {
            "" => Ok(None),
            _ => number(idx, "cache").map(Some),
        })
        .collect::<Result<_, _>>()?;
    let row = Row {
        line,
        core: number(cols.core, "Core")?,
        socket: number(cols.socket, "Socket")?,
        node,
        caches,
    };
    Ok((cpu, row))
}

/// Checks that CPU ids are exactly `0..n` and returns the rows in CPU
/// order.
fn dense_rows(rows: BTreeMap<u64, Row>) -> Result<Vec<Row>, TopologyError> {
    let mut out = Vec::with_capacity(rows.len());
    for (expected, (cpu, row)) in rows.into_iter().enumerate() {
        if cpu != expected as u64 {
            return Err(error(
                row.line,
                format!("found CPU {cpu} but CPU {expected} is missing; CPU ids must run densely from 0"),
            ));
        }
        if expected >= MAX_CPUS {
            return Err(error(
                row.line,
                format!("CPU {cpu}: schedlab supports at most {MAX_CPUS} CPUs"),
            ));
        }
        out.push(row);
    }
    Ok(out)
}

fn placements(rows: &[Row]) -> Vec<Placement> {
    let llc_column =
        (0..rows[0].caches.len()).find(|&c| rows.iter().all(|r| r.caches[c].is_some()));
    // Without cache information, treat each socket as one LLC.
    let llc_keys: Vec<(u64, u64)> = rows
        .iter()
        .map(|r| match llc_column {
            Some(c) => (0, r.caches[c].unwrap_or_default()),
            None => (1, r.socket),
        })
        .collect();
    let nodes = dense_ids(&rows.iter().map(|r| r.node).collect::<Vec<_>>());
    let packages = dense_ids(&rows.iter().map(|r| r.socket).collect::<Vec<_>>());
    let cores = dense_ids(&rows.iter().map(|r| (r.socket, r.core)).collect::<Vec<_>>());
    let llcs = dense_ids(&llc_keys);
    (0..rows.len())
        .map(|i| Placement {
            node: nodes[i],
            package: packages[i],
            llc: llcs[i],
            core: cores[i],
        })
        .collect()
}
