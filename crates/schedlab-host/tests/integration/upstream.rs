//! Upstream schedulers that used to fail, run unmodified from the caches
//! schedlab fills: the kernel's tools/sched_ext (`scripts/kernel-src`) and
//! the published scx crates (`--sched crate:NAME@VER`, fetched once).
//!
//! Each test needs its source in the cache and no network: when it is not
//! there the test fails naming what is missing and the one command that
//! fetches it. The full acceptance matrix (every scheduler, machine and
//! scenario) lives elsewhere; these pin what each fix made work.

use std::path::PathBuf;

use schedlab::results::report::Results;
use schedlab_host::compile::cache_dir;

use crate::run;

/// The kernel release whose tools/sched_ext the tests run.
const KERNEL: &str = "7.3.4";

/// `$SCHEDLAB_CACHE_DIR/kernel-src/KERNEL/tools/sched_ext/NAME.bpf.c`.
fn kernel_example(name: &str) -> PathBuf {
    let dir = cache_dir().join("kernel-src").join(KERNEL).join("tools/sched_ext");
    let p = dir.join(format!("{name}.bpf.c"));
    assert!(
        p.is_file(),
        "{} is missing: the kernel's sched_ext examples are not in schedlab's cache; run `scripts/kernel-src 7.3` once (it needs the Debian archive)",
        p.display()
    );
    p
}

/// `crate:NAME@VER`, after checking the crate is cached (so the run does
/// not reach for the network).
fn cached_crate(name: &str, version: &str) -> String {
    let dir = format!("{name}-{version}");
    let in_cache = cache_dir().join("crates").join(&dir).join("src/bpf/main.bpf.c");
    let in_registry = schedlab_host::fetch::registry_src_dirs()
        .into_iter()
        .any(|d| d.join(&dir).join("src/bpf/main.bpf.c").is_file());
    assert!(
        in_cache.is_file() || in_registry,
        "crate {name} {version} is not cached ({} nor cargo's registry): run `cargo info {name}@{version}` or `schedlab run scenarios/mixed.toml --sched crate:{name}@{version}` once with network",
        in_cache.display()
    );
    format!("crate:{name}@{version}")
}

/// scenarios/mixed.toml's workload on `cpus` CPUs for `ms` under `sched`.
fn mixed(sched: &str, cpus: usize, ms: u64) -> String {
    format!(
        r#"
name = "mixed"
seed = 1
duration = "{ms}ms"
[machine]
cpus = {cpus}
cstates = false
[scheduler]
kind = "ext"
sched = {sched:?}
[[workload]]
kind = "mixed"
oversubscription = 2.0
"#
    )
}

/// Runs and checks the scheduler stayed enabled to the end.
fn enabled_to_the_end(sched: &str, cpus: usize, ms: u64) -> Results {
    let (_, r) = run(&mixed(sched, cpus, ms));
    let x = r.sched_ext.as_ref().expect("a sched_ext section");
    assert!(x.exit.is_none(), "{sched} on {cpus} CPUs was ejected: {:?}", x.exit);
    r
}

#[test]
fn kernel_central_runs_tasks_on_every_cpu() {
    // Its profile sets nr_cpu_ids and resizes cpu_gimme_task and
    // cpu_started_at; with nr_cpu_ids left at 1 only CPUs 0-4 ever ran
    // (the rest idled, served by nothing but the fallback DSQ).
    let src = kernel_example("scx_central");
    let r = enabled_to_the_end(&src.display().to_string(), 32, 200);
    for (c, cpu) in r.cpus.iter().enumerate() {
        assert!(cpu.util_ppm > 500_000, "CPU {c} ran tasks {}% of the time under scx_central", cpu.util_ppm / 10_000);
    }
}

#[test]
fn kernel_sdt_runs_its_arena_allocator() {
    // It includes <scx/bpf_arena_common.bpf.h>: unwrapped, can_loop put
    // BPF's may_goto bytes into native code (SIGSEGV).
    let src = kernel_example("scx_sdt");
    let r = enabled_to_the_end(&src.display().to_string(), 4, 200);
    assert!(r.cpus.iter().all(|c| c.util_ppm > 500_000), "{:?}", r.cpus.iter().map(|c| c.util_ppm).collect::<Vec<_>>());
}

#[test]
fn rusty_inits_its_domains_and_runs() {
    // ops.init() used to fail: dom_cpumasks / numa_cpumasks (2-D rodata)
    // were not filled, and lb_domain_alloc()'s map update copied stack
    // garbage over the kptr fields ("kptr already had cpumask").
    let sched = cached_crate("scx_rusty", "1.1.4");
    let r = enabled_to_the_end(&sched, 32, 200);
    assert!(r.cpus.iter().all(|c| c.util_ppm > 500_000), "{:?}", r.cpus.iter().map(|c| c.util_ppm).collect::<Vec<_>>());
}

/// A two-node machine small enough for a debug build: 2 sockets, one node
/// and one L3 each, 2 cores of 2 threads per node (node 0: CPUs 0, 1, 4,
/// 5; node 1: CPUs 2, 3, 6, 7), as `lscpu -p` prints it.
const TWO_NODES_LSCPU: &str = "# CPU,Core,Socket,Node,,L1d,L1i,L2,L3
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
fn numa_schedulers_run_tasks_on_both_nodes() {
    // Their profiles set SCX_OPS_BUILTIN_IDLE_PER_NODE on a NUMA machine.
    // scx_select_cpu_dfl() (behind scx_bpf_select_cpu_and()) searched the
    // global idle masks, which per-node tracking leaves empty, and
    // scx_bpf_pick_idle_cpu_node() never went on to the other node: every
    // task stayed on node 0's first core(s) (on epyc-2s-192, CPUs 0-47 and
    // 96-103 ran; node 1 idled and a hog never ran).
    let dir = std::env::temp_dir().join(format!("schedlab-two-nodes-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let lscpu = dir.join("two-nodes.lscpu");
    std::fs::write(&lscpu, TWO_NODES_LSCPU).unwrap();
    for (name, version) in [("scx_bpfland", "1.1.4"), ("scx_beerland", "1.1.4"), ("scx_cosmos", "1.1.7"), ("scx_flash", "1.1.4")] {
        let sched = cached_crate(name, version);
        let toml = mixed(&sched, 8, 200).replace("cpus = 8", &format!("lscpu = {:?}", lscpu.display().to_string()));
        let (sim, r) = run(&toml);
        assert_eq!(sim.topo.nr_nodes(), 2, "the test machine has two nodes");
        let x = r.sched_ext.as_ref().expect("a sched_ext section");
        assert!(x.exit.is_none(), "{sched} was ejected: {:?}", x.exit);
        for node in 0..2 {
            let cpus: Vec<usize> = (0..8).filter(|&c| sim.topo.node_of(c) == node).collect();
            assert_eq!(cpus.len(), 4);
            for c in cpus {
                let u = r.cpus[c].util_ppm;
                assert!(u > 500_000, "{sched}: CPU {c} (node {node}) ran tasks {}% of the time: {:?}", u / 10_000, r.cpus.iter().map(|c| c.util_ppm).collect::<Vec<_>>());
            }
        }
        let never: Vec<&str> = sim.tasks.iter().filter(|t| t.stats.runtime_ns == 0 && t.created_at + 100_000_000 <= sim.now()).map(|t| t.name.as_str()).collect();
        assert!(never.is_empty(), "{sched}: {} tasks never ran in their first 100 ms (first: {})", never.len(), never[0]);
    }
    let _ = std::fs::remove_dir_all(&dir);
}
