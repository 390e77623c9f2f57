//! Tests of the machine model, the presets and the importers.

use super::*;
use crate::sched::topology::DomainLevel;
use std::fs;

fn mask(nr: usize, cpus: &[usize]) -> CpuMask {
    CpuMask::from_cpus(nr, cpus.iter().copied())
}

fn levels(t: &Topology, cpu: usize) -> Vec<DomainLevel> {
    t.sched_domains(cpu).iter().map(|d| d.level).collect()
}

fn preset(name: &str) -> Topology {
    Topology::preset(name).unwrap()
}

/// Counts as (cpus, cores, llcs, nodes, packages, max SMT).
fn shape(t: &Topology) -> (usize, usize, usize, usize, usize, usize) {
    (
        t.nr_cpus(),
        t.nr_cores(),
        t.nr_llcs(),
        t.nr_nodes(),
        t.nr_packages(),
        t.max_smt(),
    )
}

#[test]
fn every_listed_preset_builds_and_validates() {
    for (name, description) in presets() {
        let t = preset(name);
        assert_eq!(t.name, *name);
        assert!(!description.is_empty());
        t.validate().unwrap();
    }
}

#[test]
fn preset_counts() {
    use DomainLevel::*;
    let expect = [
        ("1cpu", (1, 1, 1, 1, 1, 1), vec![]),
        ("2cpu", (2, 2, 1, 1, 1, 1), vec![Mc]),
        ("4cpu", (4, 4, 1, 1, 1, 1), vec![Mc]),
        ("guest-16", (16, 16, 1, 1, 1, 1), vec![Mc]),
        ("amd-16c", (32, 16, 2, 1, 1, 2), vec![Smt, Mc, Pkg]),
        ("ryzen-3900x", (24, 12, 4, 1, 1, 2), vec![Smt, Mc, Pkg]),
        (
            "epyc-2s-192",
            (192, 96, 12, 2, 2, 2),
            vec![Smt, Mc, Pkg, Numa],
        ),
        (
            "epyc-2s-384",
            (384, 192, 24, 2, 2, 2),
            vec![Smt, Mc, Pkg, Numa],
        ),
    ];
    for (name, counts, domain_levels) in expect {
        let t = preset(name);
        assert_eq!(shape(&t), counts, "{name}");
        for cpu in 0..t.nr_cpus() {
            assert_eq!(levels(&t, cpu), domain_levels, "{name} cpu {cpu}");
        }
    }
}

#[test]
fn describe_summaries() {
    assert_eq!(
        preset("epyc-2s-192").describe(),
        "epyc-2s-192: 192 CPUs, 2 nodes, 2 packages, 12 LLCs, 96 cores, SMT2"
    );
    assert_eq!(
        preset("1cpu").describe(),
        "1cpu: 1 CPU, 1 node, 1 package, 1 LLC, 1 core, no SMT"
    );
    assert_eq!(
        preset("ryzen-3900x").describe(),
        "ryzen-3900x: 24 CPUs, 1 node, 1 package, 4 LLCs, 12 cores, SMT2"
    );
}

#[test]
fn ryzen_3900x_layout() {
    let t = preset("ryzen-3900x");
    for cpu in 0..12 {
        assert_eq!(t.smt_siblings(cpu), &mask(24, &[cpu, cpu + 12]));
        assert_eq!(t.smt_siblings(cpu + 12), t.smt_siblings(cpu));
        assert_eq!(t.cpus[cpu].thread, 0);
        assert_eq!(t.cpus[cpu + 12].thread, 1);
        assert_eq!(t.llc_of(cpu), cpu / 3);
        assert_eq!(t.llc_of(cpu + 12), cpu / 3);
        assert_eq!(t.llc_size(cpu), 6);
    }
    assert_eq!(t.llc_span[1], mask(24, &[3, 4, 5, 15, 16, 17]));
    assert!(t.cpus_share_cache(3, 17));
    assert!(!t.cpus_share_cache(2, 3));
    assert!(!t.cpus_share_cache(0, 24));
    assert_eq!(t.node_distance, vec![vec![LOCAL_DISTANCE]]);
}

#[test]
fn amd_16c_layout() {
    let t = preset("amd-16c");
    assert_eq!(t.smt_siblings(5), &mask(32, &[5, 21]));
    let ccd0: Vec<usize> = (0..8).chain(16..24).collect();
    assert_eq!(t.llc_span[0], mask(32, &ccd0));
    assert_eq!(t.llc_of(8), 1);
    assert_eq!(t.llc_of(24), 1);
    assert_eq!(t.llc_size(0), 16);
}

#[test]
fn epyc_2s_192_layout() {
    let t = preset("epyc-2s-192");
    for (cpu, package, thread) in [
        (0, 0, 0),
        (47, 0, 0),
        (48, 1, 0),
        (95, 1, 0),
        (96, 0, 1),
        (143, 0, 1),
        (144, 1, 1),
        (191, 1, 1),
    ] {
        let info = t.cpus[cpu];
        assert_eq!(
            (info.package, info.node, info.thread),
            (package, package, thread),
            "cpu {cpu}"
        );
    }
    assert_eq!(t.smt_siblings(0), &mask(192, &[0, 96]));
    assert_eq!(t.smt_siblings(48), &mask(192, &[48, 144]));
    let ccx0: Vec<usize> = (0..8).chain(96..104).collect();
    assert_eq!(t.llc_span[0], mask(192, &ccx0));
    assert_eq!(t.llc_of(48), 6);
    assert_eq!(t.llc_of(191), 11);
    assert_eq!(t.llc_size(100), 16);
    let socket1: Vec<usize> = (48..96).chain(144..192).collect();
    assert_eq!(t.node_span[1], mask(192, &socket1));
    assert_eq!(t.package_span[1], t.node_span[1]);
    assert_eq!(t.node_distance, vec![vec![10, 32], vec![32, 10]]);
    assert_eq!(t.all_cpus().weight(), 192);
}

#[test]
fn flat_machines() {
    let t = Topology::flat(8).unwrap();
    assert_eq!(t.name, "flat-8");
    assert_eq!(shape(&t), (8, 8, 1, 1, 1, 1));
    assert_eq!(Topology::flat(4).unwrap().cpus, preset("4cpu").cpus);
    assert!(matches!(
        Topology::flat(0),
        Err(TopologyError::InvalidShape(_))
    ));
    assert!(matches!(
        Topology::flat(MAX_CPUS + 1),
        Err(TopologyError::InvalidShape(_))
    ));
    let big = Topology::flat(MAX_CPUS).unwrap();
    assert_eq!(big.nr_cpus(), MAX_CPUS);
    let domains = big.sched_domains(MAX_CPUS - 1);
    assert_eq!(domains.len(), 1);
    assert_eq!(domains[0].groups.len(), MAX_CPUS);
    assert_eq!(
        domains[0].groups[0],
        CpuMask::single(MAX_CPUS, MAX_CPUS - 1)
    );
}

#[test]
fn uniform_rejects_bad_shapes() {
    let err = Topology::uniform("x", 1, 1, 0, 4, 1).unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid machine shape: LLCs per node must be at least 1"
    );
    assert!(matches!(
        Topology::uniform("x", usize::MAX, 2, 1, 1, 1),
        Err(TopologyError::InvalidShape(_))
    ));
    assert!(matches!(
        Topology::uniform("x", 2, 1, 1, 4097, 1),
        Err(TopologyError::InvalidShape(_))
    ));
}

#[test]
fn unknown_preset_lists_known_names() {
    let err = Topology::preset("pdp-11").unwrap_err();
    let msg = err.to_string();
    assert!(msg.starts_with("unknown machine preset \"pdp-11\"; known presets: 1cpu, 2cpu"));
    for (name, _) in presets() {
        assert!(msg.contains(name), "{msg}");
    }
}

#[test]
fn validate_catches_hand_edits() {
    let base = preset("amd-16c");
    let mut t = base.clone();
    t.cpus[3].llc = 1;
    assert!(matches!(t.validate(), Err(TopologyError::Inconsistent(_))));
    let mut t = base.clone();
    t.cpus[20].thread = 0;
    assert!(t.validate().unwrap_err().to_string().contains("SMT index"));
    let mut t = base.clone();
    t.llc_span[0].set(8);
    assert!(t.validate().unwrap_err().to_string().contains("partition"));
    let mut t = preset("epyc-2s-192");
    t.node_distance[0][1] = 40;
    assert!(t.validate().unwrap_err().to_string().contains("symmetric"));
    t.node_distance[1][0] = 40;
    t.validate().unwrap();
    t.node_distance[0][0] = 11;
    assert!(t.validate().is_err());
}

// ---- lscpu ----

/// A 2-socket machine with 2 cores per socket, SMT2 and an L3 per
/// socket, numbered like x86 Linux.
fn two_socket_reference() -> Topology {
    Topology::uniform("reference", 2, 1, 1, 2, 2).unwrap()
}

fn renamed(mut t: Topology, name: &str) -> Topology {
    t.name = name.to_string();
    t
}

const LSCPU_2S: &str = "\
# The following is the parsable format, which can be fed to other
# programs. Each different item in every column has an unique ID
# starting usually from zero.
# CPU,Core,Socket,Node,,L1d,L1i,L2,L3
0,0,0,0,,0,0,0,0
1,1,0,0,,1,1,1,0
2,2,1,1,,2,2,2,1
3,3,1,1,,3,3,3,1
4,0,0,0,,0,0,0,0
5,1,0,0,,1,1,1,0
6,2,1,1,,2,2,2,1
7,3,1,1,,3,3,3,1
";

#[test]
fn lscpu_matches_uniform() {
    let t = Topology::from_lscpu(LSCPU_2S).unwrap();
    assert_eq!(t, renamed(two_socket_reference(), "lscpu"));
    assert_eq!(t.llc_span[0], mask(8, &[0, 1, 4, 5]));
    use DomainLevel::*;
    // PKG equals MC here (one L3 per node), so it folds away.
    assert_eq!(levels(&t, 0), vec![Smt, Mc, Numa]);
}

#[test]
fn lscpu_tolerates_sparse_ids_order_and_missing_node_column() {
    let text = "\
# CPU,Core,Socket,,L1d,L1i,L2
3,9,4,,9,9,9
0,2,0,,2,2,2
1,7,0,,7,7,7
2,8,4,,8,8,8
";
    let t = Topology::from_lscpu(text).unwrap();
    assert_eq!(shape(&t), (4, 4, 4, 1, 2, 1));
    assert_eq!(t.cpus[3].core, 3);
    assert_eq!(t.cpus[2].package, 1);
    assert_eq!(t.llc_of(1), 1, "L2 is the LLC when there is no L3");
}

#[test]
fn lscpu_without_cache_values_uses_sockets() {
    let text = "# CPU,Core,Socket,Node,,L1d,L1i,L2,L3\n0,0,0,0,,,,,\n1,1,1,0,,,,,\n";
    let t = Topology::from_lscpu(text).unwrap();
    assert_eq!(t.nr_llcs(), 2);
    assert_eq!(t.nr_nodes(), 1);
    assert_eq!(t.node_distance, vec![vec![10]]);
}

fn lscpu_error(text: &str) -> (usize, String) {
    match Topology::from_lscpu(text).unwrap_err() {
        TopologyError::Lscpu { line, message } => (line, message),
        other => panic!("unexpected error {other:?}"),
    }
}

#[test]
fn lscpu_errors_name_the_line() {
    let (line, msg) = lscpu_error("# CPU,Core,Socket,Node\n0,0,0,0\n1,x,0,0\n");
    assert_eq!(line, 3);
    assert!(
        msg.contains("expected a number in the Core column, found \"x\""),
        "{msg}"
    );

    let (line, msg) = lscpu_error("# CPU,Core,Socket\n0,0,0\n2,1,0\n");
    assert_eq!(line, 3);
    assert!(msg.contains("CPU 1 is missing"), "{msg}");

    let (line, msg) = lscpu_error("# comment\n0,0,0,0\n");
    assert_eq!(line, 2);
    assert!(msg.contains("header"), "{msg}");

    let (line, msg) = lscpu_error("# CPU,Socket,Node\n0,0,0\n");
    assert_eq!(line, 1);
    assert!(msg.contains("no Core column"), "{msg}");

    let (line, msg) = lscpu_error("# CPU,Core,Socket\n0,0,0\n0,1,0\n");
    assert_eq!(line, 3);
    assert!(msg.contains("listed twice (first on line 2)"), "{msg}");

    let (line, msg) = lscpu_error("# CPU,Core,Socket,Node\n0,0\n");
    assert_eq!(line, 2);
    assert!(msg.contains("expected 4 comma-separated fields"), "{msg}");

    let (line, _) = lscpu_error("");
    assert_eq!(line, 1);
    let err = Topology::from_lscpu("# CPU,Core,Socket\n0,0,-1\n").unwrap_err();
    assert!(
        err.to_string().starts_with("lscpu input, line 2: "),
        "{err}"
    );
}

// ---- sysfs ----

/// A scratch directory under the system temp dir, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        let path = std::env::temp_dir()
            .join(format!("schedlab-topology-{tag}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&path);
        fs::create_dir_all(&path).unwrap();
        TempDir(path)
    }

    fn write(&self, rel: &str, contents: &str) {
        let path = self.0.join(rel);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, contents).unwrap();
    }

    fn mkdir(&self, rel: &str) {
        fs::create_dir_all(self.0.join(rel)).unwrap();
    }

    fn cpu_root(&self) -> PathBuf {
        self.0.join("cpu")
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

fn write_cache(dir: &TempDir, cpu: usize, index: usize, level: u32, kind: &str, shared: &str) {
    let base = format!("cpu/cpu{cpu}/cache/index{index}");
    dir.write(&format!("{base}/level"), &format!("{level}\n"));
    dir.write(&format!("{base}/type"), &format!("{kind}\n"));
    dir.write(&format!("{base}/shared_cpu_list"), &format!("{shared}\n"));
}

/// Lays out the sysfs view of `two_socket_reference()`: like a real
/// system, core_id restarts in each package and the lists are
/// newline-terminated.
fn write_two_socket_sysfs(dir: &TempDir, sibling_file: &str) {
    dir.write("cpu/online", "0-7\n");
    for cpu in 0..8 {
        let core = cpu % 4;
        let package = core / 2;
        let base = format!("cpu/cpu{cpu}");
        dir.write(
            &format!("{base}/topology/core_id"),
            &format!("{}\n", core % 2),
        );
        dir.write(
            &format!("{base}/topology/physical_package_id"),
            &format!("{package}\n"),
        );
        dir.write(
            &format!("{base}/topology/{sibling_file}"),
            &format!("{},{}\n", core, core + 4),
        );
        dir.mkdir(&format!("{base}/node{package}"));
        let l3 = if package == 0 { "0-1,4-5" } else { "2-3,6-7" };
        let own = format!("{},{}", core, core + 4);
        write_cache(dir, cpu, 0, 1, "Data", &own);
        write_cache(dir, cpu, 1, 1, "Instruction", &own);
        write_cache(dir, cpu, 2, 2, "Unified", &own);
        write_cache(dir, cpu, 3, 3, "Unified", l3);
    }
}

#[test]
fn sysfs_matches_uniform() {
    for sibling_file in ["thread_siblings_list", "core_cpus_list"] {
        let dir = TempDir::new(&format!("match-{sibling_file}"));
        write_two_socket_sysfs(&dir, sibling_file);
        let t = Topology::from_sysfs(&dir.cpu_root()).unwrap();
        assert_eq!(
            t,
            renamed(two_socket_reference(), "sysfs"),
            "{sibling_file}"
        );
    }
}

#[test]
fn sysfs_reads_node_distances_when_present() {
    let dir = TempDir::new("distance");
    write_two_socket_sysfs(&dir, "thread_siblings_list");
    // Node 2 is a CPU-less memory node; its column must be skipped.
    dir.write("node/online", "0-2\n");
    dir.write("node/node0/distance", "10 21 30\n");
    dir.write("node/node1/distance", "21 10 30\n");
    let t = Topology::from_sysfs(&dir.cpu_root()).unwrap();
    assert_eq!(t.node_distance, vec![vec![10, 21], vec![21, 10]]);
    assert!(t.sched_domains(0).last().unwrap().flags.wake_affine);

    dir.write("node/node1/distance", "21 10\n");
    let err = Topology::from_sysfs(&dir.cpu_root())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("node1/distance: expected 3 distances"),
        "{err}"
    );
}

#[test]
fn sysfs_without_cache_or_nodes_uses_packages_and_node_0() {
    let dir = TempDir::new("bare");
    dir.write("cpu/online", "0-1\n");
    for cpu in 0..2 {
        dir.write(
            &format!("cpu/cpu{cpu}/topology/physical_package_id"),
            &format!("{cpu}\n"),
        );
        dir.write(
            &format!("cpu/cpu{cpu}/topology/thread_siblings_list"),
            &format!("{cpu}\n"),
        );
    }
    let t = Topology::from_sysfs(&dir.cpu_root()).unwrap();
    assert_eq!(shape(&t), (2, 2, 2, 1, 2, 1));
}

fn sysfs_error(dir: &TempDir) -> (PathBuf, String) {
    match Topology::from_sysfs(&dir.cpu_root()).unwrap_err() {
        TopologyError::Sysfs { path, message } => (path, message),
        other => panic!("unexpected error {other:?}"),
    }
}

#[test]
fn sysfs_errors_name_the_file() {
    let dir = TempDir::new("errors");
    write_two_socket_sysfs(&dir, "thread_siblings_list");

    fs::remove_file(dir.0.join("cpu/cpu5/topology/physical_package_id")).unwrap();
    let (path, msg) = sysfs_error(&dir);
    assert!(
        path.ends_with("cpu5/topology/physical_package_id"),
        "{path:?}"
    );
    assert!(msg.starts_with("cannot read"), "{msg}");

    dir.write("cpu/cpu5/topology/physical_package_id", "zero\n");
    let (path, msg) = sysfs_error(&dir);
    assert!(path.ends_with("cpu5/topology/physical_package_id"));
    assert_eq!(msg, "expected a number, found \"zero\"");
    dir.write("cpu/cpu5/topology/physical_package_id", "0\n");

    dir.write("cpu/cpu3/topology/thread_siblings_list", "3,9999\n");
    let (path, msg) = sysfs_error(&dir);
    assert!(path.ends_with("cpu3/topology/thread_siblings_list"));
    assert_eq!(msg, "CPU 9999 is beyond the 8192 CPUs schedlab supports");

    dir.write("cpu/cpu3/topology/thread_siblings_list", "3\n");
    let (path, msg) = sysfs_error(&dir);
    // CPU 7 still claims CPU 3 as its sibling; both files are named.
    assert!(
        path.ends_with("cpu7/topology/thread_siblings_list"),
        "{path:?}"
    );
    assert!(
        msg.contains("cpu3/topology/thread_siblings_list lists \"3\""),
        "{msg}"
    );
    assert!(msg.contains("must agree"), "{msg}");
    dir.write("cpu/cpu3/topology/thread_siblings_list", "3,7\n");

    dir.write("cpu/online", "0-3,5-7\n");
    let (path, msg) = sysfs_error(&dir);
    assert!(path.ends_with("cpu/online"));
    assert!(msg.contains("densely"), "{msg}");
    dir.write("cpu/online", "0-7\n");

    fs::remove_dir_all(dir.0.join("cpu/cpu6/cache")).unwrap();
    let (path, msg) = sysfs_error(&dir);
    assert!(path.ends_with("cpu6/cache"), "{path:?}");
    assert!(msg.contains("data or unified cache"), "{msg}");

    let empty = TempDir::new("empty");
    let (path, msg) = sysfs_error(&empty);
    assert!(path.ends_with("cpu/online"));
    assert!(msg.starts_with("cannot read"), "{msg}");
}

#[test]
fn sysfs_error_message_includes_path() {
    let err = TopologyError::Sysfs {
        path: PathBuf::from("/x/cpu/online"),
        message: "cannot read".into(),
    };
    assert_eq!(err.to_string(), "/x/cpu/online: cannot read");
}

#[test]
fn dense_ids_keep_order() {
    assert_eq!(dense_ids(&[7, 3, 7, 100, 3]), vec![1, 0, 1, 2, 0]);
    assert_eq!(dense_ids::<u8>(&[]), Vec::<usize>::new());
}


#[test]
fn lscpu_with_a_second_header_is_refused() {
    // Found by fuzzing: rows under two headers with different cache columns
    // indexed past the shorter row.
    let text = "# CPU,Core,Socket,Node,,L1,4\n0,0,0,0,,0,0\n# CPU,Core,Socket\n1,1,0\n";
    let e = Topology::from_lscpu(text).unwrap_err().to_string();
    assert!(e.contains("line 3") && e.contains("second column header") && e.contains("line 1"), "{e}");
}
