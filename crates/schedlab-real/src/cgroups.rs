//! Real mode's cgroups: the scenario's cgroup tree made on this host for the
//! length of the run, under a scratch parent `schedlab-PID` beside this
//! process's own cgroup, and removed afterwards however the run ends.
//!
//! cgroup v2 is used when its `cpu` controller can be enabled for the
//! scratch parent (`cpu.weight`, `cpu.max`, `cpu.max.burst`, `cpu.idle`,
//! and `cpuset.cpus` through the `cpuset` controller). Otherwise the v1
//! `cpu` hierarchy (and `cpuset` when a cgroup restricts CPUs) stands in,
//! with the kernel's own conversions: `cpu.shares` = weight × 1024 / 100
//! (what `sched_group_set_shares()` gets for a v2 weight), quota and
//! period in `cpu.cfs_quota_us` / `cpu.cfs_period_us`. Each worker process
//! is moved in through `cgroup.procs` before its threads start work, and
//! the throttling counters are read back from `cpu.stat` at the end.
//!
//! A scenario may keep tasks in its root cgroup beside child cgroups, as
//! the kernel's root cgroup does. The scratch parent that stands for that
//! root is not the real root, so on v2 the no-internal-processes rule
//! would forbid it tasks once it enables `cpu` for its children (EBUSY).
//! Such a tree is made in v2's threaded mode instead: every scenario
//! cgroup is `threaded` (`cgroup.type`), the scratch parent becomes their
//! threaded domain, which may hold processes itself, and `cpu` and
//! `cpuset` are threaded controllers, so weights, quotas and cpusets act
//! exactly as in domain cgroups: the root's tasks compete with the child
//! groups' entities in the parent's runqueues, as they would at the top.

use std::path::{Path, PathBuf};

use super::RealError;
use schedlab::sched::sim::Sim;

/// Which cgroup interface the host offers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Version {
    V2,
    V1,
}

/// The scenario's cgroups as directories on this host.
pub(crate) struct HostCgroups {
    version: Version,
    /// Per hierarchy (v2: one; v1: cpu, then cpuset if used), the scratch
    /// parent.
    roots: Vec<PathBuf>,
    /// Per task group (index as in `sim.cg.groups`; the root group is the
    /// scratch parent itself), its directory in each hierarchy.
    dirs: Vec<Vec<PathBuf>>,
    /// v2 only: the scenario cgroups are made `threaded`, because the
    /// root holds tasks beside them (see the module doc).
    threaded: bool,
}

/// Why the host's cgroup files could not be set up.
#[derive(Debug, thiserror::Error)]
enum CgroupFsError {
    /// No hierarchy of the kind is mounted, or this process is not in it.
    #[error("{0}")]
    NoHierarchy(String),
    /// A controller the scenario needs is not available to delegate.
    #[error("the {controller} controller is not available in {} (cgroup.controllers: {have:?})", base.display())]
    NoController {
        /// "cpu" or "cpuset".
        controller: &'static str,
        /// The parent the scratch cgroup would go in.
        base: PathBuf,
        /// Its cgroup.controllers.
        have: String,
    },
    /// A directory or file could not be made or read.
    #[error("{}: {err}", path.display())]
    Io {
        /// The path.
        path: PathBuf,
        /// The error.
        err: std::io::Error,
    },
    /// A control file refused a value.
    #[error("writing {value:?} to {}: {err}", path.display())]
    Write {
        /// The control file.
        path: PathBuf,
        /// The value written.
        value: String,
        /// The error.
        err: std::io::Error,
    },
}

fn io(path: &Path, err: std::io::Error) -> CgroupFsError {
    CgroupFsError::Io { path: path.to_path_buf(), err }
}

fn write(path: &Path, value: &str) -> Result<(), CgroupFsError> {
    std::fs::write(path, value).map_err(|err| CgroupFsError::Write { path: path.to_path_buf(), value: value.to_string(), err })
}

/// Mount points from /proc/self/mounts: (type, mount point, options).
fn mounts() -> Vec<(String, PathBuf, String)> {
    let text = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
    text.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() >= 4).then(|| (f[2].to_string(), PathBuf::from(f[1]), f[3].to_string()))
        })
        .collect()
}

/// This process's cgroup path in the hierarchy that `matches` its
/// /proc/self/cgroup controller list ("" is v2's).
fn own_path(matches: &dyn Fn(&str) -> bool) -> Option<String> {
    let text = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    text.lines().find_map(|l| {
        let mut f = l.splitn(3, ':');
        let (_, ctrls, path) = (f.next()?, f.next()?, f.next()?);
        matches(ctrls).then(|| path.trim_start_matches('/').to_string())
    })
}

/// The v2 directory a scratch parent can go in, with `cpu` (and `cpuset`
/// when `need_cpuset`) enabled for it; Err: why not.
fn v2_base(need_cpuset: bool) -> Result<PathBuf, CgroupFsError> {
    let (_, mnt, _) = mounts().into_iter().find(|m| m.0 == "cgroup2").ok_or_else(|| CgroupFsError::NoHierarchy("no cgroup2 mount".into()))?;
    let own = own_path(&|c| c.is_empty()).ok_or_else(|| CgroupFsError::NoHierarchy("no cgroup v2 line in /proc/self/cgroup".into()))?;
    // Our own cgroup holds this process, so (the root excepted) controllers
    // cannot be enabled for its children: go up to the parent, where the
    // scratch cgroup becomes our sibling.
    let base = if own.is_empty() { mnt.clone() } else { mnt.join(&own).parent().map(Path::to_path_buf).unwrap_or(mnt.clone()) };
    let controllers = std::fs::read_to_string(base.join("cgroup.controllers")).map_err(|e| io(&base.join("cgroup.controllers"), e))?;
    let have: Vec<&str> = controllers.split_whitespace().collect();
    for c in ["cpu"].into_iter().chain(need_cpuset.then_some("cpuset")) {
        if !have.contains(&c) {
            return Err(CgroupFsError::NoController { controller: c, base, have: controllers.trim().to_string() });
        }
        let ctl = base.join("cgroup.subtree_control");
        let enabled = std::fs::read_to_string(&ctl).unwrap_or_default();
        if !enabled.split_whitespace().any(|x| x == c) {
            write(&ctl, &format!("+{c}"))?;
        }
    }
    Ok(base)
}

/// The v1 hierarchy of controller `name`: its directory holding this
/// process's cgroup.
fn v1_base(name: &str) -> Result<PathBuf, CgroupFsError> {
    let (_, mnt, _) = mounts()
        .into_iter()
        .find(|m| m.0 == "cgroup" && m.2.split(',').any(|o| o == name))
        .ok_or_else(|| CgroupFsError::NoHierarchy(format!("no cgroup v1 {name} hierarchy mounted")))?;
    let own = own_path(&|c| c.split(',').any(|x| x == name)).unwrap_or_default();
    Ok(mnt.join(own))
}

/// cgroup v2's cpu.weight as the v1 cpu.shares the kernel would derive
/// (`sched_weight_from_cgroup()` scaled to 1024 = weight 100).
fn shares(weight: u32) -> u64 {
    (weight as u64 * 1024 / 100).max(2)
}

impl HostCgroups {
    /// Makes the scenario's cgroups, or None when it has none. Err: the host
    /// cannot (no writable cpu controller), with what to do instead.
    pub(crate) fn create(sim: &Sim, cpu_map: &[usize]) -> Result<Option<HostCgroups>, RealError> {
        if !sim.cg.enabled() {
            return Ok(None);
        }
        let need_cpuset = sim.cg.groups.iter().any(|g| g.cpus.is_some());
        let scratch = format!("schedlab-{}", std::process::id());
        let v2 = v2_base(need_cpuset);
        let (version, bases) = match v2 {
            Ok(b) => (Version::V2, vec![b]),
            Err(why2) => {
                let mut bases = vec![v1_base("cpu")];
                if need_cpuset {
                    bases.push(v1_base("cpuset"));
                }
                match bases.into_iter().collect::<Result<Vec<_>, _>>() {
                    Ok(b) => (Version::V1, b),
                    Err(why1) => return Err(refused(&format!("cgroup v2: {why2}; cgroup v1: {why1}"))),
                }
            }
        };
        let threaded = version == Version::V2 && root_holds_tasks_beside_children(sim);
        let mut made = HostCgroups { version, roots: Vec::new(), dirs: Vec::new(), threaded };
        for b in &bases {
            let root = b.join(&scratch);
            std::fs::create_dir(&root).map_err(|e| refused(&io(&root, e).to_string()))?;
            made.roots.push(root);
        }
        made.fill(sim, cpu_map).map_err(|e| refused(&e.to_string()))?;
        Ok(Some(made))
    }

    /// Creates every group's directory and writes its files.
    fn fill(&mut self, sim: &Sim, cpu_map: &[usize]) -> Result<(), CgroupFsError> {
        let host_cpus = |m: &schedlab::machine::cpumask::CpuMask| m.iter().map(|c| cpu_map[c].to_string()).collect::<Vec<_>>().join(",");
        for (i, g) in sim.cg.groups.iter().enumerate() {
            let dirs: Vec<PathBuf> = self.roots.iter().map(|r| if i == 0 { r.clone() } else { r.join(g.path.trim_start_matches('/')) }).collect();
            for (h, d) in dirs.iter().enumerate() {
                if i != 0 {
                    std::fs::create_dir(d).map_err(|e| io(d, e))?;
                    // Before anything else is written in it: a cgroup turns
                    // threaded only while it has no domain controllers
                    // enabled and no populated children.
                    if self.threaded {
                        write(&d.join("cgroup.type"), "threaded")?;
                    }
                }
                let is_cpuset = self.version == Version::V1 && h == 1;
                match self.version {
                    Version::V2 => {
                        // Children need the controllers enabled here.
                        let parent_of_others = sim.cg.groups.iter().any(|c| c.parent == Some(i as u32));
                        if parent_of_others {
                            let want = if self.roots.len() == 1 && sim.cg.groups.iter().any(|g| g.cpus.is_some()) { "+cpu +cpuset" } else { "+cpu" };
                            write(&d.join("cgroup.subtree_control"), want)?;
                        }
                        if i != 0 {
                            write(&d.join("cpu.weight"), &g.weight.to_string())?;
                            let period_us = g.max.period_ns / 1000;
                            let quota = g.max.quota_ns.map_or("max".to_string(), |q| (q / 1000).to_string());
                            write(&d.join("cpu.max"), &format!("{quota} {period_us}"))?;
                            if g.max.burst_ns > 0 {
                                write(&d.join("cpu.max.burst"), &(g.max.burst_ns / 1000).to_string())?;
                            }
                            if g.idle {
                                write(&d.join("cpu.idle"), "1")?;
                            }
                            if let Some(c) = &g.cpus {
                                write(&d.join("cpuset.cpus"), &host_cpus(c))?;
                            }
                        }
                    }
                    Version::V1 if is_cpuset => {
                        // v1 cpusets start empty: a group takes its own CPUs
                        // or its parent's, and the parent's memory nodes.
                        let parent = d.parent().ok_or_else(|| CgroupFsError::NoHierarchy(format!("{}: a cpuset directory has no parent", d.display())))?;
                        let mems = std::fs::read_to_string(parent.join("cpuset.mems")).map_err(|e| io(parent, e))?;
                        let cpus = if i == 0 { std::fs::read_to_string(parent.join("cpuset.cpus")).map_err(|e| io(parent, e))? } else { host_cpus(&g.effective_cpus) };
                        write(&d.join("cpuset.cpus"), cpus.trim())?;
                        write(&d.join("cpuset.mems"), mems.trim())?;
                    }
                    Version::V1 => {
                        if i != 0 {
                            write(&d.join("cpu.shares"), &shares(g.weight).to_string())?;
                            write(&d.join("cpu.cfs_period_us"), &(g.max.period_ns / 1000).to_string())?;
                            write(&d.join("cpu.cfs_quota_us"), &g.max.quota_ns.map_or("-1".to_string(), |q| (q / 1000).to_string()))?;
                            if g.max.burst_ns > 0 {
                                write(&d.join("cpu.cfs_burst_us"), &(g.max.burst_ns / 1000).to_string())?;
                            }
                            if g.idle {
                                write(&d.join("cpu.idle"), "1")?;
                            }
                        }
                    }
                }
            }
            self.dirs.push(dirs);
        }
        Ok(())
    }

    /// Moves process `pid` (all its threads) into task group `group`.
    pub(crate) fn attach(&self, group: u32, pid: i32) -> Result<(), RealError> {
        for d in &self.dirs[group as usize] {
            write(&d.join("cgroup.procs"), &pid.to_string()).map_err(|e| RealError::Io(e.to_string()))?;
        }
        Ok(())
    }

    /// A [[cgroup_write]] now: its files written as the simulator applies
    /// them, then each of `pids` (the workload's processes) moved in.
    pub(crate) fn apply(&self, w: &schedlab::sched::cgroup::CgroupWrite, pids: &[i32]) -> Result<(), RealError> {
        let d = &self.dirs[w.group as usize];
        let cpu = &d[0];
        let mut files: Vec<(&str, String)> = Vec::new();
        match self.version {
            Version::V2 => {
                files.extend(w.weight.map(|x| ("cpu.weight", x.to_string())));
                files.extend(w.max.map(|m| ("cpu.max", format!("{} {}", m.quota_ns.map_or("max".to_string(), |q| (q / 1000).to_string()), m.period_ns / 1000))));
            }
            Version::V1 => {
                files.extend(w.weight.map(|x| ("cpu.shares", shares(x).to_string())));
                if let Some(m) = w.max {
                    files.push(("cpu.cfs_period_us", (m.period_ns / 1000).to_string()));
                    files.push(("cpu.cfs_quota_us", m.quota_ns.map_or("-1".to_string(), |q| (q / 1000).to_string())));
                }
            }
        }
        files.extend(w.idle.map(|i| ("cpu.idle", if i { "1" } else { "0" }.to_string())));
        for (f, v) in files {
            write(&cpu.join(f), &v).map_err(|e| RealError::Io(e.to_string()))?;
        }
        for &pid in pids {
            self.attach(w.group, pid)?;
        }
        Ok(())
    }

    /// The kernel's throttling counters, into the groups' stats.
    pub(crate) fn read_stats(&self, sim: &mut Sim) {
        for (i, dirs) in self.dirs.iter().enumerate().skip(1) {
            let text = std::fs::read_to_string(dirs[0].join("cpu.stat")).unwrap_or_default();
            let get = |k: &str| text.lines().find_map(|l| l.strip_prefix(k).and_then(|v| v.trim().parse::<u64>().ok())).unwrap_or(0);
            let s = &mut sim.cg.groups[i].stats;
            s.nr_periods = get("nr_periods ");
            s.nr_throttled = get("nr_throttled ");
            s.throttled_ns = match self.version {
                Version::V2 => get("throttled_usec ") * 1000,
                Version::V1 => get("throttled_time "),
            };
        }
    }
}

/// rmdir deepest first; a cgroup whose last task is still exiting is busy
/// for a moment, so each removal is retried briefly.
impl Drop for HostCgroups {
    fn drop(&mut self) {
        let mut all: Vec<&PathBuf> = self.dirs.iter().skip(1).flatten().collect();
        all.sort_by_key(|p| std::cmp::Reverse(p.components().count()));
        for d in all.into_iter().chain(self.roots.iter()) {
            for _ in 0..200 {
                match std::fs::remove_dir(d) {
                    Err(e) if e.kind() != std::io::ErrorKind::NotFound => std::thread::sleep(std::time::Duration::from_millis(10)),
                    _ => break,
                }
            }
        }
    }
}

/// Whether the scenario's root cgroup holds tasks beside child cgroups (a
/// [[cgroup_write]] cannot move tasks into the root, so the start decides).
/// On v2 that needs threaded mode (module doc).
fn root_holds_tasks_beside_children(sim: &Sim) -> bool {
    sim.cg.groups.iter().any(|g| g.parent == Some(0)) && sim.tasks.iter().any(|t| t.cgrp == 0)
}

fn refused(why: &str) -> RealError {
    RealError::Privilege(format!(
        "the scenario has cgroups, but this host cannot make them ({why}): run as root on a host whose cgroup cpu controller is writable, or pass --no-cgroups to run the workloads without their cgroups"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sim(toml: &str) -> Sim {
        let s = schedlab::workload::scenario::Scenario::parse(toml, "t.toml", &[]).unwrap();
        schedlab::workload::world::build(&s, "t.toml").unwrap()
    }

    #[test]
    fn root_tasks_beside_child_cgroups_make_the_tree_threaded() {
        let base = "duration = \"1s\"\n[machine]\ncpus = 2\n[[cgroup]]\npath = \"/a\"\n[[workload]]\nkind = \"hog\"\nname = \"in-a\"\ncgroup = \"/a\"\n";
        assert!(!root_holds_tasks_beside_children(&sim(base)));
        assert!(root_holds_tasks_beside_children(&sim(&format!("{base}[[workload]]\nkind = \"hog\"\nname = \"loose\"\n"))));
        let flat = "duration = \"1s\"\n[machine]\ncpus = 2\n[[workload]]\nkind = \"hog\"\nname = \"loose\"\n";
        assert!(!root_holds_tasks_beside_children(&sim(flat)));
    }
}
