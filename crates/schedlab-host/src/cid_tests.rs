//! The cid layout and cmask translation against hand-worked machines.

use schedlab::machine::topology::Topology;

use super::{cmask_bytes, CidTables, Cmask};

fn uniform(nodes: usize, llcs: usize, cores: usize, threads: usize) -> Topology {
    Topology::uniform("t", 1, nodes, llcs, cores, threads).expect("topology")
}

/// cid_to_cpu and cpu_to_cid are inverse permutations.
fn check_bijection(t: &CidTables, n: usize) {
    assert_eq!(t.cid_to_cpu.len(), n);
    for cid in 0..n {
        let cpu = t.cid_to_cpu[cid];
        assert!(cpu >= 0 && (cpu as usize) < n, "cid {cid} -> cpu {cpu}");
        assert_eq!(t.cpu_to_cid[cpu as usize], cid as i32, "cpu {cpu}");
    }
}

#[test]
fn flat_machine_numbers_cids_as_cpus() {
    let topo = Topology::flat(4).expect("flat");
    let t = CidTables::build(&topo, 0);
    assert_eq!(t.cid_to_cpu, vec![0, 1, 2, 3]);
    assert_eq!(t.shards, vec![(0, 4)]);
}

#[test]
fn smt_siblings_get_adjacent_cids() {
    // 4 cores x 2 threads in one LLC: CPU c and c + 4 are siblings.
    let topo = uniform(1, 1, 4, 2);
    let t = CidTables::build(&topo, 0);
    check_bijection(&t, 8);
    assert_eq!(t.cid_to_cpu, vec![0, 4, 1, 5, 2, 6, 3, 7]);
    // Core ranges: cid 2k and 2k + 1 share core_cid 2k and core index k.
    for cid in 0..8 {
        assert_eq!(t.topo[cid].core_cid, (cid as i32 / 2) * 2);
        assert_eq!(t.topo[cid].core_idx, cid as i32 / 2);
        assert_eq!(t.topo[cid].llc_cid, 0);
    }
}

#[test]
fn nodes_and_llcs_are_contiguous_cid_ranges() {
    // 2 nodes x 2 LLCs x 3 cores x 2 threads = 24 CPUs.
    let topo = uniform(2, 2, 3, 2);
    let t = CidTables::build(&topo, 0);
    check_bijection(&t, 24);
    for cid in 0..24usize {
        let cpu = t.cid_to_cpu[cid] as usize;
        // Node 0's 12 CPUs come first, each LLC's 6 in a row.
        assert_eq!(topo.node_of(cpu), cid / 12, "cid {cid}");
        assert_eq!(t.topo[cid].node_cid, (cid / 12 * 12) as i32);
        assert_eq!(t.topo[cid].llc_idx, (cid / 6) as i32);
        assert_eq!(t.topo[cid].llc_cid, (cid / 6 * 6) as i32);
        assert_eq!(topo.llc_of(cpu), topo.llc_of(t.cid_to_cpu[cid / 6 * 6] as usize));
    }
    // One shard per LLC (6 CPUs < 24), on the LLC's node.
    assert_eq!(t.shards, vec![(0, 6), (6, 6), (12, 6), (18, 6)]);
    assert_eq!(t.shard_node, vec![0, 0, 1, 1]);
}

#[test]
fn a_large_llc_is_cut_into_even_shards_of_whole_cores() {
    // One LLC of 20 cores x 2 threads: 40 CPUs at 24 per shard is 2 shards
    // of 10 cores (20 cids) each.
    let topo = uniform(1, 1, 20, 2);
    let t = CidTables::build(&topo, 0);
    assert_eq!(t.shards, vec![(0, 20), (20, 20)]);
    // A shard size of 8: 5 shards of 4 cores.
    let t = CidTables::build(&topo, 8);
    assert_eq!(t.shards, (0..5).map(|s| (s * 8, 8)).collect::<Vec<_>>());
    // 21 cores at 8 per shard: ceil(42 / 8) = 6 shards, 3 of them with a
    // fourth core; a core never straddles two shards.
    let topo = uniform(1, 1, 21, 2);
    let t = CidTables::build(&topo, 8);
    assert_eq!(t.shards.len(), 6);
    assert_eq!(t.shards.iter().map(|s| s.1).sum::<u32>(), 42);
    assert!(t.shards.iter().all(|s| s.0 % 2 == 0 && s.1 % 2 == 0 && s.1 <= 8), "{:?}", t.shards);
}

#[test]
fn cmask_from_cpus_sets_the_cids_of_those_cpus() {
    let topo = uniform(1, 1, 4, 2);
    let t = CidTables::build(&topo, 0);
    let mut buf = vec![0xffu8; cmask_bytes(8)];
    let m = Cmask(buf.as_mut_ptr());
    // CPUs 1 and 4 are cids 2 and 1.
    // SAFETY: `buf` holds cmask_bytes(8) bytes.
    unsafe { m.fill(0, 8, &t, |cpu| cpu == 1 || cpu == 4) };
    assert_eq!((m.base(), m.nr_cids(), m.alloc_words()), (0, 8, 2));
    let set: Vec<u32> = (0..8).filter(|&c| m.test(c)).collect();
    assert_eq!(set, vec![1, 2]);
    assert_eq!(u64::from_ne_bytes(buf[16..24].try_into().unwrap()), 0b110);
    // An unaligned range: cids 3..8 only; cid 1 and 2 fall outside it.
    let mut buf = vec![0u8; cmask_bytes(5)];
    let m = Cmask(buf.as_mut_ptr());
    // SAFETY: as above.
    unsafe { m.fill(3, 5, &t, |_| true) };
    assert_eq!((0..8).filter(|&c| m.test(c)).collect::<Vec<_>>(), vec![3, 4, 5, 6, 7]);
    assert_eq!(m.check(8), Ok((3, 5)));
    assert_eq!(m.check(7), Err(-22));
}

#[test]
fn cid_override_checks_its_input_and_clears_topology() {
    let topo = uniform(1, 1, 4, 1);
    let mut t = CidTables::build(&topo, 0);
    let before = t.clone();
    assert_eq!(t.override_with(&topo, &[0, 0, 1, 2], &[0]), Err("cid 0 assigned to multiple cpus".into()));
    assert_eq!(t.override_with(&topo, &[0, 1, 2, 4], &[0]), Err("invalid cid 4".into()));
    assert_eq!(t.override_with(&topo, &[0, 1, 2, 3], &[0, 0]), Err("scx_bpf_cid_override: shard_start not increasing at [1]".into()));
    assert_eq!(t.override_with(&topo, &[0, 1, 2], &[0]).unwrap_err(), "scx_bpf_cid_override: cpu_to_cid expected 4 entries, got 3");
    assert_eq!(t, before);
    t.override_with(&topo, &[3, 2, 1, 0], &[0, 2]).expect("valid");
    assert_eq!(t.cid_to_cpu, vec![3, 2, 1, 0]);
    assert_eq!(t.shards, vec![(0, 2), (2, 2)]);
    assert_eq!(t.topo[3].core_cid, -1);
    assert_eq!((t.topo[3].shard_cid, t.topo[3].shard_idx), (2, 1));
}
