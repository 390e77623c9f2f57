//! Import of a copy of `/sys/devices/system/cpu`; see [`Topology::from_sysfs`](super::Topology::from_sysfs).

use super::{
    build, check_distances, dense_ids, Placement, Topology, TopologyError, MAX_CPUS,
    MAX_NODE_ID,
};
use crate::machine::cpumask::{CpuListError, CpuMask};
use std::fs;
use std::path::{Path, PathBuf};
use std::str::FromStr;

/// What one CPU's directory says about it, with the file each group
/// mask came from for error messages.
struct CpuEntry {
    dir: PathBuf,
    package: i64,
    node: u64,
    siblings: (CpuMask, PathBuf),
    llc: Option<(CpuMask, PathBuf)>,
}

fn error(path: &Path, message: impl Into<String>) -> TopologyError {
    TopologyError::Sysfs {
        path: path.to_path_buf(),
        message: message.into(),
    }
}

pub(super) fn parse(root: &Path) -> Result<Topology, TopologyError> {
    let n = online_cpus(root)?;
    let entries = (0..n)
        .map(|cpu| read_cpu(root, cpu, n))
        .collect::<Result<Vec<_>, _>>()?;
    let cores = group_ids(&entries.iter().map(|e| &e.siblings).collect::<Vec<_>>())?;
    let llcs = llc_ids(&entries)?;
    let packages = dense_ids(&entries.iter().map(|e| e.package).collect::<Vec<_>>());
    let raw_nodes: Vec<u64> = entries.iter().map(|e| e.node).collect();
    let nodes = dense_ids(&raw_nodes);
    let placements: Vec<Placement> = (0..n)
        .map(|i| Placement {
            node: nodes[i],
            package: packages[i],
            llc: llcs[i],
            core: cores[i],
        })
        .collect();
    let mut topology = build("sysfs", &placements)?;
    let mut distinct_nodes = raw_nodes;
    distinct_nodes.sort_unstable();
    distinct_nodes.dedup();
    if let Some(table) = node_distances(root, &distinct_nodes)? {
        topology.node_distance = table;
        topology.validate()?;
    }
    Ok(topology)
}

fn list_error(path: &Path, err: CpuListError) -> TopologyError {
    let message = match err {
        CpuListError::OutOfRange { cpu, .. } => {
            format!("CPU {cpu} is beyond the {MAX_CPUS} CPUs schedlab supports")
        }
        other => format!("malformed CPU list: {other}"),
    };
    error(path, message)
}

fn read_text(path: &Path) -> Result<String, TopologyError> {
    fs::read_to_string(path).map_err(|e| error(path, format!("cannot read: {e}")))
}

fn read_number<T: FromStr>(path: &Path) -> Result<T, TopologyError> {
    let text = read_text(path)?;
    text.trim().parse().map_err(|_| {
        error(
            path,
            format!("expected a number, found \"{}\"", text.trim()),
        )
    })
}

/// Reads a cpulist file and keeps the CPUs below `nr_cpus`; lists may
/// mention CPUs that are not online.
fn read_cpulist(path: &Path, nr_cpus: usize) -> Result<CpuMask, TopologyError> {
    let text = read_text(path)?;
    let parsed =
        CpuMask::parse_cpulist(text.trim(), MAX_CPUS).map_err(|e| list_error(path, e))?;
    Ok(CpuMask::from_cpus(
        nr_cpus,
        parsed.iter().take_while(|&c| c < nr_cpus),
    ))
}

fn online_cpus(root: &Path) -> Result<usize, TopologyError> {
    let path = root.join("online");
    let online = CpuMask::parse_cpulist(read_text(&path)?.trim(), MAX_CPUS)
        .map_err(|e| list_error(&path, e))?;
    let n = online.weight();
    if n == 0 || online != CpuMask::from_cpus(MAX_CPUS, 0..n) {
        return Err(error(
            &path,
            format!(
                "expected the online CPUs to be numbered densely from 0 (like \"0-{}\"), found \"{online}\"",
                n.max(1) - 1
            ),
        ));
    }
    Ok(n)
}

fn read_cpu(root: &Path, cpu: usize, n: usize) -> Result<CpuEntry, TopologyError> {
    let dir = root.join(format!("cpu{cpu}"));
    let topo = dir.join("topology");
    let package = read_number(&topo.join("physical_package_id"))?;
    let siblings_path = ["core_cpus_list", "thread_siblings_list"]
        .iter()
        .map(|f| topo.join(f))
        .find(|p| p.exists())
        .ok_or_else(|| {
            error(
                &topo.join("thread_siblings_list"),
                "missing (neither core_cpus_list nor thread_siblings_list exists)",
            )
        })?;
    let siblings = read_cpulist(&siblings_path, n)?;
    let llc = match llc_list_path(&dir)? {
        Some(path) => Some((read_cpulist(&path, n)?, path)),
        None => None,
    };
    Ok(CpuEntry {
        package,
        node: node_of(&dir)?,
        siblings: (siblings, siblings_path),
        llc,
        dir,
    })
}

/// Numeric suffixes of the entries of `dir` named `prefix<digits>`,
/// ascending so the result does not depend on directory order.
fn numbered_entries(dir: &Path, prefix: &str) -> Result<Vec<u64>, TopologyError> {
    let listing =
        fs::read_dir(dir).map_err(|e| error(dir, format!("cannot list directory: {e}")))?;
    let mut ids = Vec::new();
    for entry in listing {
        let entry = entry.map_err(|e| error(dir, format!("cannot list directory: {e}")))?;
        let name = entry.file_name();
        let Some(suffix) = name.to_str().and_then(|n| n.strip_prefix(prefix)) else {
            continue;
        };
        if !suffix.is_empty() && suffix.bytes().all(|b| b.is_ascii_digit()) {
            if let Ok(id) = suffix.parse() {
                ids.push(id);
            }
        }
    }
    ids.sort_unstable();
    Ok(ids)
}

fn node_of(cpu_dir: &Path) -> Result<u64, TopologyError> {
    Ok(numbered_entries(cpu_dir, "node")?
        .first()
        .copied()
        .unwrap_or(0))
}

/// The `shared_cpu_list` of the highest-level data or unified cache.
fn llc_list_path(cpu_dir: &Path) -> Result<Option<PathBuf>, TopologyError> {
    let cache = cpu_dir.join("cache");
    if !cache.is_dir() {
        return Ok(None);
    }
    let mut best: Option<(u32, PathBuf)> = None;
    for index in numbered_entries(&cache, "index")? {
        let dir = cache.join(format!("index{index}"));
        let kind = read_text(&dir.join("type"))?;
        if !matches!(kind.trim(), "Unified" | "Data") {
            continue;
        }
        let level: u32 = read_number(&dir.join("level"))?;
        if best.as_ref().is_none_or(|(l, _)| level > *l) {
            best = Some((level, dir.join("shared_cpu_list")));
        }
    }
    Ok(best.map(|(_, path)| path))
}

/// Dense ids for groups given by per-CPU member lists (sibling or cache
/// sharing lists), numbered by lowest member. Every member must report
/// the same list, otherwise the groups would not partition the machine.
fn group_ids(lists: &[&(CpuMask, PathBuf)]) -> Result<Vec<usize>, TopologyError> {
    let mut ids: Vec<usize> = Vec::with_capacity(lists.len());
    let mut next = 0;
    for (cpu, (mask, path)) in lists.iter().enumerate() {
        if !mask.test(cpu) {
            return Err(error(
                path,
                format!("expected the list to include CPU {cpu} itself, found \"{mask}\""),
            ));
        }
        if let Some(other) = mask.iter().find(|&m| lists[m].0 != *mask) {
            return Err(error(
                path,
                format!(
                    "lists \"{mask}\" but {} lists \"{}\"; the lists of all members must agree",
                    lists[other].1.display(),
                    lists[other].0
                ),
            ));
        }
        match mask.first().filter(|&first| first < cpu) {
            Some(first) => ids.push(ids[first]),
            None => {
                ids.push(next);
                next += 1;
            }
        }
    }
    Ok(ids)
}

fn llc_ids(entries: &[CpuEntry]) -> Result<Vec<usize>, TopologyError> {
    let with_cache: Vec<&(CpuMask, PathBuf)> =
        entries.iter().filter_map(|e| e.llc.as_ref()).collect();
    if with_cache.is_empty() {
        return Ok(dense_ids(
            &entries.iter().map(|e| e.package).collect::<Vec<_>>(),
        ));
    }
    if let Some(bare) = entries.iter().find(|e| e.llc.is_none()) {
        return Err(error(
            &bare.dir.join("cache"),
            "expected a data or unified cache (index*/type), as other CPUs have",
        ));
    }
    group_ids(&with_cache)
}

/// Reads `../node/online` and `../node/nodeM/distance` if present.
/// Each distance file lists one value per online node (including nodes
/// without CPUs), in node order; only the nodes with CPUs are kept.
fn node_distances(
    root: &Path,
    raw_nodes: &[u64],
) -> Result<Option<Vec<Vec<u32>>>, TopologyError> {
    let Some(node_root) = root.parent().map(|p| p.join("node")) else {
        return Ok(None);
    };
    let online_path = node_root.join("online");
    if !online_path.exists() {
        return Ok(None);
    }
    let online = CpuMask::parse_cpulist(read_text(&online_path)?.trim(), MAX_NODE_ID)
        .map_err(|e| error(&online_path, format!("malformed node list: {e}")))?;
    let order: Vec<u64> = online.iter().map(|n| n as u64).collect();
    let rank = |node: u64| order.binary_search(&node).ok();
    let ranks = raw_nodes
        .iter()
        .map(|&node| {
            rank(node).ok_or_else(|| {
                error(
                    &online_path,
                    format!("node {node} has CPUs but is not listed as online"),
                )
            })
        })
        .collect::<Result<Vec<usize>, _>>()?;
    let mut table = Vec::with_capacity(raw_nodes.len());
    for &a in raw_nodes {
        let path = node_root.join(format!("node{a}")).join("distance");
        let row = read_distance_row(&path, order.len())?;
        table.push(ranks.iter().map(|&r| row[r]).collect());
    }
    check_distances(&table, raw_nodes.len())
        .map_err(|e| error(&node_root, format!("invalid node distances: {e}")))?;
    Ok(Some(table))
}

fn read_distance_row(path: &Path, nr_online: usize) -> Result<Vec<u32>, TopologyError> {
    let text = read_text(path)?;
    let row = text
        .split_whitespace()
        .map(str::parse)
        .collect::<Result<Vec<u32>, _>>()
        .map_err(|_| {
            error(
                path,
                format!(
                    "expected whitespace-separated numbers, found \"{}\"",
                    text.trim()
                ),
            )
        })?;
    if row.len() != nr_online {
        return Err(error(
            path,
            format!(
                "expected {nr_online} distances (one per online node), found {}",
                row.len()
            ),
        ));
    }
    Ok(row)
}
