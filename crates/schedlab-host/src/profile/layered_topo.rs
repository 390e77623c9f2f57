//! The machine side of the `[layer_specs]` step (see [`super::layered`]):
//! scx_layered's per-CPU contexts (`init_cpus()`, `init_cpu_prox_map()`),
//! the LLC and node proximity maps, `init_node_ctx()`, and the first
//! `refresh_cpumasks()`: which CPUs each layer gets from its growth
//! order (`layer_core_growth.rs`: Sticky, Linear, Reverse) and the
//! `CpuPool` (whole cores unless `--allow-partial-core`).

use super::expr::Value;
use super::layered::{Growth, LayeredSetup, MapPatch, Spec, MAX_LAYERS};
use super::machine::Machine;
use super::resolve::{Phase, Run, Write};
use std::collections::BTreeMap;

/// `NUM_PROXIMITY_MAPS` of intf.h.
const NUM_PROXIMITY_MAPS: u64 = 32;

fn u16s(v: &[usize]) -> Vec<u8> {
    v.iter().flat_map(|&x| (x as u16).to_le_bytes()).collect()
}

fn u32s(v: &[u32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// The machine's spans, by id.
struct Spans {
    core: BTreeMap<usize, Vec<usize>>,
    llc: BTreeMap<usize, Vec<usize>>,
    node: BTreeMap<usize, Vec<usize>>,
    /// Per node, its LLCs; per LLC, its cores (ascending ids).
    node_llcs: BTreeMap<usize, Vec<usize>>,
    llc_cores: BTreeMap<usize, Vec<usize>>,
}

impl Spans {
    fn new(m: &Machine) -> Spans {
        let mut s = Spans { core: BTreeMap::new(), llc: BTreeMap::new(), node: BTreeMap::new(), node_llcs: BTreeMap::new(), llc_cores: BTreeMap::new() };
        for c in 0..m.nr_cpus {
            s.core.entry(m.core[c]).or_default().push(c);
            s.llc.entry(m.llc[c]).or_default().push(c);
            s.node.entry(m.node[c]).or_default().push(c);
            let nl = s.node_llcs.entry(m.node[c]).or_default();
            if !nl.contains(&m.llc[c]) {
                nl.push(m.llc[c]);
            }
            let lc = s.llc_cores.entry(m.llc[c]).or_default();
            if !lc.contains(&m.core[c]) {
                lc.push(m.core[c]);
            }
        }
        for v in s.node_llcs.values_mut().chain(s.llc_cores.values_mut()) {
            v.sort_unstable();
        }
        s
    }
}

/// Everything after `init_layers()`: contexts, proximity maps, the node
/// contexts and the first CPU allocation.
pub(crate) fn setup(out: &mut LayeredSetup, specs: &[Spec], m: &Machine, vars: &BTreeMap<String, Value>, origin: &str) -> Result<(), String> {
    let sp = Spans::new(m);
    let patch = |out: &mut LayeredSetup, map: &str, key: usize, cpu: usize, member: String, bytes: Vec<u8>| {
        out.patches.push(MapPatch { map: map.into(), key: key as u32, cpu: cpu as u32, member, bytes, origin: origin.to_string() })
    };
    init_cpus(out, specs, m, &sp, &patch);
    // init_llc_prox_map(): NUM_PROXIMITY_MAPS shuffled orders per LLC.
    for k in 0..NUM_PROXIMITY_MAPS {
        for &llc in sp.llc.keys() {
            let node = m.node[sp.llc[&llc][0]];
            let mut node_order: Vec<usize> = sp.node_llcs[&node].clone();
            let mut sys_order: Vec<usize> = sp.llc.keys().copied().collect();
            sys_order.retain(|id| !node_order.contains(id));
            node_order.retain(|&id| id != llc);
            let mut rng = fastrand::Rng::with_seed((k << 32) | llc as u64);
            rng.shuffle(&mut sys_order);
            rng.shuffle(&mut node_order);
            let mut order = vec![llc];
            order.extend(&node_order);
            let node_end = order.len() as u32;
            order.extend(&sys_order);
            let sys_end = order.len() as u32;
            patch(out, "llc_data", llc, 0, format!(".prox_maps[{k}].llcs"), u16s(&order));
            patch(out, "llc_data", llc, 0, format!(".prox_maps[{k}].node_end"), node_end.to_le_bytes().to_vec());
            patch(out, "llc_data", llc, 0, format!(".prox_maps[{k}].sys_end"), sys_end.to_le_bytes().to_vec());
        }
    }
    // init_node_prox_map(): the other nodes by distance; schedlab's nodes
    // are equidistant, so by id.
    for &node in sp.node.keys() {
        let order: Vec<usize> = sp.node.keys().copied().filter(|&n| n != node).collect();
        patch(out, "node_data", node, 0, ".prox_map.nodes".into(), u16s(&order));
        patch(out, "node_data", node, 0, ".prox_map.sys_end".into(), (order.len() as u32).to_le_bytes().to_vec());
    }
    // init_node_ctx(): every layer empty on every node, and the node's LLCs.
    let all: Vec<u32> = (0..specs.len() as u32).collect();
    for &node in sp.node.keys() {
        let llcs: Vec<u32> = sp.node_llcs[&node].iter().map(|&l| l as u32).collect();
        out.runs.push(node_ctx_run(node, true, &all, &llcs, Phase::Load, origin));
    }
    first_refresh(out, specs, m, &sp, vars, origin)
}

/// `struct refresh_node_ctx_arg` for `refresh_node_ctx`.
fn node_ctx_run(node: usize, init: bool, empty: &[u32], llcs: &[u32], phase: Phase, origin: &str) -> Run {
    let mut ids = vec![MAX_LAYERS as u32; MAX_LAYERS];
    ids[..empty.len()].copy_from_slice(empty);
    let mut l = vec![0u32; 64];
    if init {
        l[..llcs.len()].copy_from_slice(llcs);
    }
    let mut a = vec![node as u32, init as u32];
    a.extend(ids);
    a.push(empty.len() as u32);
    a.extend(l);
    a.push(if init { llcs.len() as u32 } else { 0 });
    Run { prog: "refresh_node_ctx".into(), ctx: u32s(&a), cpu: 0, phase, fail: false, origin: origin.to_string() }
}

type Patch<'a> = dyn Fn(&mut LayeredSetup, &str, usize, usize, String, Vec<u8>) + 'a;

/// `init_cpus()` and `init_cpu_prox_map()`.
fn init_cpus(out: &mut LayeredSetup, specs: &[Spec], m: &Machine, sp: &Spans, patch: &Patch<'_>) {
    let pick = |open: bool, preempt: bool| -> Vec<u32> {
        (0..specs.len())
            .filter(|&i| {
                let k = &specs[i].kind;
                (if open { k.is_open() } else { k.is_grouped() }) && k.common().preempt == preempt
            })
            .map(|i| i as u32)
            .collect()
    };
    let (op, on, gp, gn) = (pick(true, true), pick(true, false), pick(false, true), pick(false, false));
    let pad = |v: Vec<u32>| -> Vec<u8> {
        let mut a = vec![MAX_LAYERS as u32; MAX_LAYERS];
        a[..v.len()].copy_from_slice(&v);
        u32s(&a)
    };
    for cpu in 0..m.nr_cpus {
        let mut rng = fastrand::Rng::with_seed(cpu as u64);
        let mut shuffled = |mut v: Vec<u32>| {
            rng.shuffle(&mut v);
            pad(v)
        };
        let ogp = shuffled([op.clone(), gp.clone()].concat());
        let ogn = shuffled([on.clone(), gn.clone()].concat());
        let orders = [("ogp", ogp), ("ogn", ogn), ("op", shuffled(op.clone())), ("on", shuffled(on.clone())), ("gp", shuffled(gp.clone())), ("gn", shuffled(gn.clone()))];
        patch(out, "cpu_ctxs", 0, cpu, ".cpu".into(), (cpu as i32).to_le_bytes().to_vec());
        patch(out, "cpu_ctxs", 0, cpu, ".layer_id".into(), (MAX_LAYERS as u32).to_le_bytes().to_vec());
        // scx_utils sees no turbo cores on a machine whose cores are all
        // alike (as scx_lavd's profile takes it): no CPU is big.
        patch(out, "cpu_ctxs", 0, cpu, ".is_big".into(), vec![0]);
        for (name, bytes) in orders {
            patch(out, "cpu_ctxs", 0, cpu, format!(".{name}_layer_order"), bytes);
        }
        // The proximity map: self, core, LLC, node, system, each exclusive.
        let (core, llc, node) = (m.core[cpu], m.llc[cpu], m.node[cpu]);
        let radiate_cpu = |mut v: Vec<usize>| {
            v.sort_by_key(|&id| ((core as i32 - m.core[id] as i32).abs(), (cpu as i32 - id as i32).abs()));
            v
        };
        let core_o = radiate_cpu(sp.core[&core].iter().copied().filter(|&c| c != cpu).collect());
        let llc_o = radiate_cpu(sp.llc[&llc].iter().copied().filter(|&c| m.core[c] != core).collect());
        // init_cpu_prox_map() radiates the node order around the node id.
        let mut node_o: Vec<usize> = sp.node[&node].iter().copied().filter(|&c| m.llc[c] != llc).collect();
        node_o.sort_by_key(|&id| (node as i32 - id as i32).abs());
        let sys_o = radiate_cpu((0..m.nr_cpus).filter(|&c| m.node[c] != node).collect());
        let mut order = vec![cpu];
        order.extend(&core_o);
        let core_end = order.len() as u32;
        order.extend(&llc_o);
        let llc_end = order.len() as u32;
        order.extend(&node_o);
        let node_end = order.len() as u32;
        order.extend(&sys_o);
        let sys_end = order.len() as u32;
        patch(out, "cpu_ctxs", 0, cpu, ".prox_map.cpus".into(), u16s(&order));
        for (f, v) in [("core_end", core_end), ("llc_end", llc_end), ("node_end", node_end), ("sys_end", sys_end)] {
            patch(out, "cpu_ctxs", 0, cpu, format!(".prox_map.{f}"), v.to_le_bytes().to_vec());
        }
    }
}

/// `layer_core_growth::node_order()`: the spec's nodes, else every node
/// rotated by the layer index, nodes other layers name ranked last.
fn node_order(specs: &[Spec], idx: usize, nodes: &[usize]) -> Vec<usize> {
    let mine = &specs[idx].kind.common().nodes;
    if !mine.is_empty() {
        return mine.clone();
    }
    let mut order = nodes.to_vec();
    let nr = order.len();
    if nr > 1 {
        order.rotate_left(idx % nr);
        let max_rank = specs.iter().map(|s| s.kind.common().nodes.len()).max().unwrap_or(0);
        if max_rank > 0 {
            let mut rank: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
            for (i, s) in specs.iter().enumerate() {
                if i == idx {
                    continue;
                }
                for (pos, &n) in s.kind.common().nodes.iter().enumerate() {
                    rank.entry(n).or_insert_with(|| vec![0; max_rank])[pos] += 1;
                }
            }
            let zero = vec![0; max_rank];
            order.sort_by_key(|n| rank.get(n).unwrap_or(&zero).clone());
        }
    }
    order
}

/// The layer's core order per node (`LayerCoreOrderGenerator`): cores by
/// their sequence number (node, LLC, core), rotated per layer.
fn core_orders(specs: &[Spec], idx: usize, sp: &Spans, nodes: &[usize]) -> BTreeMap<usize, Vec<usize>> {
    let c = specs[idx].kind.common();
    let rotate_offset = |v: &mut Vec<usize>| {
        if !v.is_empty() {
            let chunk = v.len().div_ceil(specs.len());
            let by = (chunk * idx).min(v.len());
            v.rotate_right(by);
        }
    };
    let mut out = BTreeMap::new();
    for node in node_order(specs, idx, nodes) {
        let mut order: Vec<usize> = sp.node_llcs[&node].iter().flat_map(|l| sp.llc_cores[l].iter().copied()).collect();
        match c.growth_algo {
            Growth::Sticky => {
                rotate_offset(&mut order);
                for llc in &sp.node_llcs[&node] {
                    let len = sp.llc_cores[llc].len();
                    let x = len + (idx << 1);
                    let rot = if x <= len { x } else { x % len };
                    if idx % 2 == 0 {
                        order.rotate_left(rot);
                    } else {
                        order.rotate_right(rot);
                    }
                }
            }
            Growth::Linear | Growth::Reverse => {
                if c.llcs.is_empty() {
                    rotate_offset(&mut order);
                }
                if c.growth_algo == Growth::Reverse {
                    order.reverse();
                }
            }
            // Refused by layered::verify().
            _ => {}
        }
        out.insert(node, order);
    }
    out
}

/// The first `refresh_cpumasks()` at zero utilization.
fn first_refresh(out: &mut LayeredSetup, specs: &[Spec], m: &Machine, sp: &Spans, vars: &BTreeMap<String, Value>, origin: &str) -> Result<(), String> {
    let partial = vars.get("allow_partial_core").is_some_and(|v| v.truthy().unwrap_or(false));
    let au = if partial { 1 } else { sp.core.values().next().map_or(1, |c| c.len()) };
    let nodes: Vec<usize> = sp.node.keys().copied().collect();
    // calc_target_nr_cpus() with no utilization yet: each layer's minimum.
    let mut units = Vec::new();
    for s in specs {
        let min = match s.kind.cpus_range(m.nr_cpus) {
            Some(r) => r?.0,
            None => 0,
        };
        units.push(min.div_ceil(au));
    }
    let total: usize = units.iter().sum();
    if total > m.nr_cpus / au {
        return Err(format!(
            "the layers' minimum sizes add up to {} CPUs, more than the machine's {}; sharing CPUs between competing layers (the binary's weighted water-fill) is not reproduced: lower cpus_range / cpus_range_frac",
            total * au,
            m.nr_cpus
        ));
    }
    // unified_alloc(): strict node tiers, most preferred first.
    let mut cap: BTreeMap<usize, usize> = sp.node.iter().map(|(&n, c)| (n, c.len() / au)).collect();
    let orders: Vec<Vec<usize>> = (0..specs.len()).map(|i| node_order(specs, i, &nodes)).collect();
    let mut alloc: Vec<BTreeMap<usize, usize>> = vec![BTreeMap::new(); specs.len()];
    let mut left = units.clone();
    for rank in 0..nodes.len() {
        let mut want: BTreeMap<usize, usize> = BTreeMap::new();
        let mut asks = Vec::new();
        for (i, s) in specs.iter().enumerate() {
            if s.kind.is_open() || left[i] == 0 {
                continue;
            }
            let Some(&n) = orders[i].get(rank) else { continue };
            let ask = left[i].min(cap[&n]);
            *want.entry(n).or_default() += ask;
            asks.push((i, n, ask));
        }
        if let Some((n, w)) = want.iter().find(|(n, w)| **w > cap[*n]) {
            return Err(format!("layers compete for node {n} ({} CPUs wanted, {} free); the binary's weighted sharing is not reproduced: lower cpus_range or set \"nodes\"", w * au, cap[n] * au));
        }
        for (i, n, ask) in asks {
            *alloc[i].entry(n).or_default() += ask;
            *cap.get_mut(&n).expect("node") -= ask;
            left[i] -= ask;
        }
    }
    // Grow each layer, smallest target first, from its core order.
    let mut avail = vec![true; m.nr_cpus];
    let mut cpus: Vec<Vec<bool>> = vec![vec![false; m.nr_cpus]; specs.len()];
    let targets: Vec<usize> = alloc.iter().map(|a| a.values().sum::<usize>() * au).collect();
    let mut ascending: Vec<usize> = (0..specs.len()).collect();
    ascending.sort_by_key(|&i| targets[i]);
    let mut updated = false;
    let mut changed = vec![false; specs.len()];
    for &i in &ascending {
        if specs[i].kind.is_open() {
            continue;
        }
        let allowed = allowed_cpus(&specs[i], m);
        let order = core_orders(specs, i, sp, &nodes);
        for &n in &orders[i] {
            let mut need = alloc[i].get(&n).copied().unwrap_or(0) * au;
            for core in order.get(&n).into_iter().flatten() {
                if need == 0 {
                    break;
                }
                let free: Vec<usize> = sp.core[core].iter().copied().filter(|&c| allowed[c] && avail[c] && m.node[c] == n).collect();
                if free.is_empty() {
                    continue;
                }
                let take = if partial { need.min(free.len()) } else { free.len() };
                for &c in &free[..take] {
                    avail[c] = false;
                    cpus[i][c] = true;
                }
                changed[i] = true;
                updated = true;
                need = need.saturating_sub(free.len());
            }
        }
    }
    let owned: usize = cpus.iter().map(|c| c.iter().filter(|&&x| x).count()).sum();
    let fully = owned >= m.nr_cpus;
    let mut w = |target: String, value: Value| out.writes.push(Write { target, value, origin: origin.to_string() });
    for (i, s) in specs.iter().enumerate() {
        if !s.kind.is_open() {
            w(format!("layers[{i}].fully_allocated"), Value::Bool(fully));
        }
    }
    refresh_xnuma(&mut w, specs, &nodes);
    if !updated {
        out.layer_cpus = vec![Vec::new(); specs.len()];
        return Ok(());
    }
    // The rest goes to the Open layers.
    for (i, s) in specs.iter().enumerate() {
        if s.kind.is_open() {
            let allowed = allowed_cpus(s, m);
            cpus[i] = (0..m.nr_cpus).map(|c| avail[c] && allowed[c]).collect();
            changed[i] = true;
        }
    }
    let mut empty: BTreeMap<usize, Vec<u32>> = BTreeMap::new();
    for (i, mask) in cpus.iter().enumerate() {
        for &n in &nodes {
            if !sp.node[&n].iter().any(|&c| mask[c]) {
                empty.entry(n).or_default().push(i as u32);
            }
        }
        if !changed[i] {
            continue;
        }
        let ly = format!("layers[{i}]");
        for (b, chunk) in mask.chunks(8).enumerate() {
            let byte = chunk.iter().enumerate().fold(0u8, |a, (k, &on)| a | ((on as u8) << k));
            w(format!("{ly}.cpus[{b}]"), Value::Int(byte as i128));
        }
        w(format!("{ly}.nr_cpus"), Value::Int(mask.iter().filter(|&&x| x).count() as i128));
        for (&l, span) in &sp.llc {
            w(format!("{ly}.nr_llc_cpus[{l}]"), Value::Int(span.iter().filter(|&&c| mask[c]).count() as i128));
        }
        for (&n, span) in &sp.node {
            w(format!("{ly}.node[{n}].nr_cpus"), Value::Int(span.iter().filter(|&&c| mask[c]).count() as i128));
        }
        w(format!("{ly}.refresh_cpus"), Value::Int(1));
    }
    // CpuPool's fallback CPU: the node's first unallocated CPU, else its first.
    for (&n, span) in &sp.node {
        let fb = span.iter().copied().find(|&c| avail[c]).unwrap_or(span[0]);
        w(format!("fallback_cpus[{n}]"), Value::Int(fb as i128));
    }
    out.runs.push(Run { prog: "refresh_layer_cpumasks".into(), ctx: Vec::new(), cpu: 0, phase: Phase::Attach, fail: false, origin: origin.to_string() });
    for &n in &nodes {
        out.runs.push(node_ctx_run(n, false, empty.get(&n).map_or(&[][..], |v| v), &[], Phase::Attach, origin));
    }
    out.layer_cpus = cpus.iter().map(|m| m.iter().enumerate().filter(|(_, &on)| on).map(|(c, _)| c).collect()).collect();
    Ok(())
}

/// `Layer::new()`'s allowed CPUs: every CPU, or those of the spec's nodes
/// and LLCs.
fn allowed_cpus(s: &Spec, m: &Machine) -> Vec<bool> {
    let c = s.kind.common();
    if c.nodes.is_empty() && c.llcs.is_empty() {
        return vec![true; m.nr_cpus];
    }
    (0..m.nr_cpus).map(|cpu| c.nodes.contains(&m.node[cpu]) || c.llcs.contains(&m.llc[cpu])).collect()
}

/// `refresh_xnuma()` after the first refresh: a layer whose
/// `xnuma_threshold` is (0, 0) has cross-node migration gating off (every
/// node a source, every rate unlimited); any other starts with no
/// utilization, so no node is a migration source and every rate is 0
/// (its later opening with the load is the refresh loop's, not
/// reproduced).
fn refresh_xnuma(w: &mut dyn FnMut(String, Value), specs: &[Spec], nodes: &[usize]) {
    if nodes.len() <= 1 {
        return;
    }
    for (i, s) in specs.iter().enumerate() {
        let (lo, hi) = s.kind.common().xnuma_threshold;
        let off = lo <= 0.0 && hi <= 0.0;
        for &src in nodes {
            w(format!("layers[{i}].node[{src}].xnuma_is_mig_src"), Value::Bool(off));
            for &dst in nodes {
                w(format!("layers[{i}].node[{src}].xnuma[{dst}].rate"), Value::Int(if off { u64::MAX as i128 } else { 0 }));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use schedlab::machine::topology::Topology;

    fn specs(algos: &[&str], nodes: &str) -> Vec<Spec> {
        let one = |a: &str| format!(r#"{{"name": "l", "matches": [], "kind": {{"Confined": {{"util_range": [0.0, 1.0], "growth_algo": "{a}", "nodes": {nodes}}}}}}}"#);
        serde_json::from_str(&format!("[{}]", algos.iter().map(|a| one(a)).collect::<Vec<_>>().join(","))).unwrap()
    }

    /// The layer's core order, node by node in its node order.
    fn order(topo: &Topology, specs: &[Spec], idx: usize) -> Vec<usize> {
        let m = Machine::new(topo);
        let sp = Spans::new(&m);
        let nodes: Vec<usize> = sp.node.keys().copied().collect();
        let per_node = core_orders(specs, idx, &sp, &nodes);
        node_order(specs, idx, &nodes).into_iter().flat_map(|n| per_node[&n].clone()).collect()
    }

    /// Upstream's own expectations (scx_layered 1.1.4's lib.rs tests, on
    /// its 1-node and 2-node test machines of 2 LLCs x 4 cores x 2 threads
    /// per node).
    #[test]
    fn growth_orders_match_upstreams_tests() {
        let n1 = Topology::uniform("t", 1, 1, 2, 4, 2).unwrap();
        let n2 = Topology::uniform("t", 1, 2, 2, 4, 2).unwrap();
        assert_eq!(order(&n1, &specs(&["Sticky"], "[]"), 0), (0..8).collect::<Vec<_>>());
        assert_eq!(order(&n2, &specs(&["Sticky"], "[]"), 0), (0..16).collect::<Vec<_>>());
        assert_eq!(order(&n1, &specs(&["Linear"], "[]"), 0), (0..8).collect::<Vec<_>>());
        assert_eq!(order(&n2, &specs(&["Linear"], "[]"), 0), (0..16).collect::<Vec<_>>());
        assert_eq!(order(&n2, &specs(&["Linear"], "[1]"), 0), (8..16).collect::<Vec<_>>());
        assert_eq!(order(&n1, &specs(&["Reverse"], "[]"), 0), (0..8).rev().collect::<Vec<_>>());
        let three = specs(&["Sticky", "Sticky", "Sticky"], "[]");
        let (o0, o1, o2) = (order(&n1, &three, 0), order(&n1, &three, 1), order(&n1, &three, 2));
        assert!(o0[0] != o1[0] && o1[0] != o2[0], "{o0:?} {o1:?} {o2:?}");
        for o in [&o0, &o1, &o2] {
            let mut s = o.clone();
            s.sort_unstable();
            assert_eq!(s, (0..8).collect::<Vec<_>>());
        }
    }
}
