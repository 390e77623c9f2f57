//! A resolved [`Plan`] as the line-oriented file scripts/vm/scx-load.c
//! reads (`scx-load OBJ.bpf.o --profile FILE`), so that a real run loads
//! the scheduler exactly as the simulated one does:
//!
//! ```text
//! schedlab-profile 1
//! ops NAME                          the struct_ops map to attach (when named)
//! resize NAME ELEMENTS              RESIZE_ARRAY: the .data.NAME/.bss.NAME map
//! maxent MAP N                      bpf_map__set_max_entries() before load
//! write NAME INDEX VALUE            a global (rodata/.data/.bss); INDEX -1 for a scalar
//!                                   or a path (NAME[ROW][COLUMN], NAME[i].member[j])
//! flags replace|add HEX             struct_ops flags
//! map NAME KEYHEX VALUEHEX          bpf_map_update_elem() after load
//! inner OUTER SLOT TYPE KEY VAL MAX bpf_map_create(TYPE, KEY, VAL, MAX) after the
//!                                   map updates, put into slot SLOT of map OUTER
//! member MAP KEY CPU PATH HEX       after those: element KEY (u32) of MAP looked up, the
//!                                   bytes written into member PATH (`.a[i].b`, offset and
//!                                   width from the map's value BTF; they must fit) of CPU's
//!                                   copy (per-CPU maps; CPU ignored otherwise), written back;
//!                                   all before the load runs, as apply::before_attach
//! run load|attach PROG CPU FAIL HEX bpf_prog_test_run_opts() pinned to CPU
//! arena_lib STATIC ALIGN M0 M1 M2 M3 M4 TYPE
//!                                   scx_arena's ArenaLib::setup() after the load runs:
//!                                   arena_init with sizeof(TYPE) from the object's BTF,
//!                                   arena_topology_init with the max_children M0..M4,
//! arena_node ID HEX                 then per node arena_alloc_mask, the mask words (HEX)
//!                                   written there, arena_topology_node_init
//! ```
//!
//! Values are decimal integers (booleans 0/1); strings are written as
//! `writes NAME HEX` (the bytes, NUL-padded by the loader). A NAME may
//! reach into struct members (`topo.nr_cpus`), and into members of array
//! elements with their indices (`cpdom_ctxs[3].neighbor_ids[129]`). The loader also fills scx's
//! `__SCX_*` enum variables from the running kernel's BTF by itself, as
//! scx_utils does, so they are not part of the plan.

use super::expr::Value;
use super::resolve::{Phase, Plan};
use std::fmt::Write;

fn hex(b: &[u8]) -> String {
    if b.is_empty() {
        return "-".into();
    }
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// The plan as scx-load reads it.
pub fn write(plan: &Plan) -> Result<String, super::apply::ApplyError> {
    let mut o = String::from("schedlab-profile 1\n");
    if let Some(ops) = &plan.ops {
        let _ = writeln!(o, "ops {ops}");
    }
    for (a, n) in &plan.resize {
        let _ = writeln!(o, "resize {a} {n}");
    }
    for (m, n) in &plan.map_sizes {
        let _ = writeln!(o, "maxent {m} {n}");
    }
    for w in &plan.writes {
        let (name, index) = match super::format::split_index(&w.target) {
            // A member of an array element: the path with its indices.
            _ if crate::paths::is_path(&w.target) => (w.target.clone(), "-1".into()),
            // An element of a two-dimensional array, as a path.
            Some((_, i)) if i.len() > 1 => (w.target.clone(), "-1".into()),
            Some((b, i)) => (b.to_string(), i.join(",")),
            None => (w.target.clone(), "-1".into()),
        };
        match &w.value {
            Value::Int(i) => {
                let _ = writeln!(o, "write {name} {index} {i}");
            }
            Value::Bool(b) => {
                let _ = writeln!(o, "write {name} {index} {}", *b as u8);
            }
            Value::Str(s) if index == "-1" => {
                let _ = writeln!(o, "writes {name} {}", hex(s.as_bytes()));
            }
            Value::Str(_) => return Err(super::apply::ApplyError::StringInArray { origin: w.origin.clone() }),
        }
    }
    let bits = plan.flag_bits()?;
    let _ = writeln!(o, "flags {} {bits:#x}", if plan.replace_flags { "replace" } else { "add" });
    for m in &plan.maps {
        let _ = writeln!(o, "map {} {} {}", m.map, hex(&m.key), hex(&m.value));
    }
    for m in &plan.inner_maps {
        let _ = writeln!(o, "inner {} {} {} {} {} {}", m.outer, m.slot, m.map_type, m.key_size, m.value_size, m.max_entries);
    }
    // Applied after the map updates and inner maps, before the load-phase
    // runs, as apply::before_attach does.
    for p in &plan.patches {
        let _ = writeln!(o, "member {} {} {} {} {}", p.map, p.key, p.cpu, p.member, hex(&p.bytes));
    }
    for r in &plan.runs {
        let phase = if r.phase == Phase::Load { "load" } else { "attach" };
        let _ = writeln!(o, "run {phase} {} {} {} {}", r.prog, r.cpu, r.fail as u8, hex(&r.ctx));
    }
    if let Some(a) = &plan.arena_lib {
        let m = a.max_children.map(|c| c.to_string()).join(" ");
        let _ = writeln!(o, "arena_lib {} {} {m} {}", a.static_pages, a.task_ctx_align, a.task_ctx);
        for n in &a.nodes {
            let bytes: Vec<u8> = n.mask.iter().flat_map(|w| w.to_ne_bytes()).collect();
            let _ = writeln!(o, "arena_node {} {}", n.id, hex(&bytes));
        }
    }
    Ok(o)
}

#[cfg(test)]
mod tests {
    use super::super::arena_lib::{ArenaLibSetup, TopoNode};
    use super::super::layered::MapPatch;
    use super::super::resolve::{InnerMap, MapWrite, Run, Write as W};
    use super::*;

    #[test]
    fn every_step_has_its_line() {
        let plan = Plan {
            scheduler: "x".into(),
            ops: Some("x_ops".into()),
            writes: vec![
                W { target: "slice_ns".into(), value: Value::Int(5000), origin: String::new() },
                W { target: "cpus[2]".into(), value: Value::Bool(true), origin: String::new() },
                W { target: "name".into(), value: Value::Str("ab".into()), origin: String::new() },
                W { target: "doms[3].ids[1]".into(), value: Value::Int(7), origin: String::new() },
                W { target: "masks[2][1]".into(), value: Value::Int(5), origin: String::new() },
            ],
            resize: vec![("arr".into(), 8)],
            map_sizes: vec![("ctx".into(), 4)],
            inner_maps: vec![InnerMap { outer: "qs".into(), slot: 2, map_type: 22, key_size: 0, value_size: 4, max_entries: 64, origin: String::new() }],
            ops_flags: vec!["ENQ_LAST".into()],
            replace_flags: true,
            maps: vec![MapWrite { map: "m".into(), key: vec![1, 0], value: vec![], origin: String::new() }],
            runs: vec![Run { prog: "p".into(), ctx: vec![0xff], cpu: 3, phase: Phase::Attach, fail: true, origin: String::new() }],
            arena_lib: Some(ArenaLibSetup {
                task_ctx: "struct t".into(),
                static_pages: 8,
                task_ctx_align: 0,
                max_children: [1, 1, 2, 1, 0],
                nodes: vec![TopoNode { id: 0, mask: vec![3] }],
                origin: String::new(),
            }),
            patches: vec![
                MapPatch { map: "cpu_ctxs".into(), key: 0, cpu: 2, member: ".prox_map.cpus".into(), bytes: vec![2, 0, 3, 0], origin: String::new() },
                MapPatch { map: "llc_data".into(), key: 1, cpu: 0, member: ".prox_maps[2].sys_end".into(), bytes: vec![4, 0, 0, 0], origin: String::new() },
            ],
            layer_cpus: vec![],
        };
        let t = write(&plan).unwrap();
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(
            lines,
            [
                "schedlab-profile 1",
                "ops x_ops",
                "resize arr 8",
                "maxent ctx 4",
                "write slice_ns -1 5000",
                "write cpus 2 1",
                "writes name 6162",
                "write doms[3].ids[1] -1 7",
                "write masks[2][1] -1 5",
                "flags replace 0x2",
                "map m 0100 -",
                "inner qs 2 22 0 4 64",
                "member cpu_ctxs 0 2 .prox_map.cpus 02000300",
                "member llc_data 1 0 .prox_maps[2].sys_end 04000000",
                "run attach p 3 1 ff",
                "arena_lib 8 0 1 1 2 1 0 struct t",
                "arena_node 0 0300000000000000",
            ]
        );
    }

    #[test]
    fn layereds_map_member_writes_come_before_its_load_runs() {
        let topo = schedlab::machine::topology::Topology::flat(4).unwrap();
        let p = super::super::shipped("scx_layered").expect("shipped profile");
        let plan = super::super::resolve(&p, &super::super::Machine::new(&topo), &[]).unwrap();
        let t = write(&plan).unwrap();
        let lines: Vec<&str> = t.lines().collect();
        let members: Vec<usize> = (0..lines.len()).filter(|&i| lines[i].starts_with("member ")).collect();
        assert_eq!(members.len(), plan.patches.len());
        // CPU 3's copy of cpu_ctxs gets its id, as init_cpus() writes it.
        assert!(lines.contains(&"member cpu_ctxs 0 3 .cpu 03000000"), "{t}");
        assert!(lines.iter().any(|l| l.starts_with("member llc_data 0 0 .prox_maps[31].llcs ")), "{t}");
        assert!(lines.iter().any(|l| l.starts_with("member node_data 0 0 .prox_map.nodes ")), "{t}");
        let first_run = lines.iter().position(|l| l.starts_with("run load ")).expect("refresh_node_ctx runs at load");
        let last_map = lines.iter().rposition(|l| l.starts_with("map ") || l.starts_with("inner ")).unwrap_or(0);
        assert!(members.iter().all(|&i| i > last_map && i < first_run), "{t}");
    }
}
