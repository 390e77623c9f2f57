//! The `[arena_lib]` step of a loader profile: what the scx_arena crate's
//! `ArenaLib::setup()` does between load and attach for the schedulers
//! whose BPF side keeps its state in an arena (scx_p2dq, scx_lavd).
//!
//! ```toml
//! [arena_lib]
//! task_ctx = "struct task_p2dq"   # the per-task context the allocator hands out
//! static_pages = 8                # optional: the static allocator's granule
//! task_ctx_align = 0              # optional: 0 = word alignment
//! max_cpus = 640                  # optional: the library's CPU mask limit
//! ```
//!
//! The steps, each a `bpf_prog_test_run_opts()` of a SEC("syscall")
//! program of the scx arena library, on the loader's CPU (0):
//! 1. `arena_init {static_pages, task_ctx_size, task_ctx_align}`, the size
//!    being `sizeof(task_ctx)` as the compiled object has it;
//! 2. `arena_topology_init {max_children[5]}`: per level (machine, node,
//!    LLC, core, CPU) the most children a node of that level has;
//! 3. per topology node, the machine (id 0), each node, each LLC, each
//!    core, each CPU, in that order and by id: `arena_alloc_mask {bitmap}`
//!    returns an arena bitmap, user space writes the node's CPU mask into
//!    it, and `arena_topology_node_init {bitmap, data_size = 0, id}` links
//!    it into the tree.
//!
//! Like the library, a machine with `max_cpus` CPUs or more is refused.

use super::format::{Profile, ProfileError};
use super::machine::Machine;
use serde::Deserialize;
use toml::Spanned;

/// The `[arena_lib]` table as written.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArenaLibDef {
    /// The C type of the per-task context (`struct task_ctx`).
    pub task_ctx: Spanned<String>,
    /// `arena_init_args.static_pages` (an expression or integer).
    #[serde(default)]
    pub static_pages: Option<Spanned<toml::Value>>,
    /// `arena_init_args.task_ctx_align` (an expression or integer).
    #[serde(default)]
    pub task_ctx_align: Option<Spanned<toml::Value>>,
    /// The library's `MAX_CPU_SUPPORTED`.
    #[serde(default)]
    pub max_cpus: Option<Spanned<toml::Value>>,
}

/// scx_arena's defaults: `STATIC_ALLOC_PAGES_GRANULARITY` and
/// `MAX_CPU_SUPPORTED`.
pub(crate) const DEFAULT_STATIC_PAGES: u64 = 8;
/// See [`DEFAULT_STATIC_PAGES`].
pub(crate) const DEFAULT_MAX_CPUS: u64 = 640;

/// Topology levels, as the library numbers them (`enum topo_level`).
const LEVELS: usize = 5;

/// One node of the topology tree handed to the BPF side.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TopoNode {
    /// `arena_topology_node_init_args.id`: 0 for the machine, else the
    /// node, LLC, core or CPU id.
    pub id: u64,
    /// The node's CPUs, as the words of a CPU mask.
    pub mask: Vec<u64>,
}

/// The resolved step: everything but `sizeof(task_ctx)`, which comes from
/// the compiled object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArenaLibSetup {
    /// The C type whose size `arena_init` gets.
    pub task_ctx: String,
    /// `arena_init_args.static_pages`: the static allocator's pages.
    pub static_pages: u64,
    /// `arena_init_args.task_ctx_align` (0: word alignment).
    pub task_ctx_align: u64,
    /// `arena_topology_init_args.max_children`.
    pub max_children: [u32; LEVELS],
    /// In the order the library registers them.
    pub nodes: Vec<TopoNode>,
    /// Where it came from, for messages (`file:line`).
    pub origin: String,
}

/// Checks what parsing alone can: that `task_ctx` names a C type.
pub(crate) fn check(p: &Profile, d: &ArenaLibDef) -> Result<(), ProfileError> {
    let t = d.task_ctx.get_ref().trim();
    let name = t.strip_prefix("struct ").or_else(|| t.strip_prefix("union ")).unwrap_or(t).trim();
    let ident = !name.is_empty() && !name.starts_with(|c: char| c.is_ascii_digit()) && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !ident {
        return Err(p.err(
            d.task_ctx.span(),
            "arena_lib.task_ctx",
            format!("`{t}` is not a C type name; write the type the loader takes sizeof() of, e.g. \"struct task_ctx\""),
        ));
    }
    Ok(())
}

fn mask_of(nr_cpus: usize, words: usize, cpus: impl Iterator<Item = usize>) -> Vec<u64> {
    let mut m = vec![0u64; words.max(nr_cpus.div_ceil(64))];
    for c in cpus {
        m[c / 64] |= 1 << (c % 64);
    }
    m
}

/// The tree and the per-level child counts for `machine`, as the library
/// builds them from scx_utils' `Topology`.
pub(crate) fn setup(
    machine: &Machine,
    task_ctx: String,
    static_pages: u64,
    task_ctx_align: u64,
    max_cpus: u64,
    origin: String,
) -> Result<ArenaLibSetup, String> {
    let n = machine.nr_cpus;
    if n as u64 >= max_cpus {
        return Err(format!(
            "the arena library supports fewer than {max_cpus} CPUs and the machine has {n} (its loader stops with \"Scheduler specifies too many CPUs\"); use a smaller machine or raise arena_lib.max_cpus"
        ));
    }
    let ids = |v: &[usize]| {
        let mut x = v.to_vec();
        x.sort_unstable();
        x.dedup();
        x
    };
    let (nodes, llcs, cores) = (ids(&machine.node), ids(&machine.llc), ids(&machine.core));
    let cpus_where = |f: &dyn Fn(usize) -> bool| (0..n).filter(move |&c| f(c)).collect::<Vec<_>>();
    let max_distinct = |parents: &[usize], parent_of: &[usize], child_of: &[usize]| {
        parents
            .iter()
            .map(|&p| ids(&(0..n).filter(|&c| parent_of[c] == p).map(|c| child_of[c]).collect::<Vec<_>>()).len())
            .max()
            .unwrap_or(0) as u32
    };
    let max_children = [
        nodes.len() as u32,
        max_distinct(&nodes, &machine.node, &machine.llc),
        max_distinct(&llcs, &machine.llc, &machine.core),
        max_distinct(&cores, &machine.core, &(0..n).collect::<Vec<_>>()),
        0,
    ];
    let span_words = n.div_ceil(64);
    let cpu_words = (max_cpus as usize).div_ceil(64);
    let mut tree = vec![TopoNode { id: 0, mask: mask_of(n, span_words, 0..n) }];
    for (level, of) in [(&nodes, &machine.node), (&llcs, &machine.llc), (&cores, &machine.core)] {
        for &id in level {
            tree.push(TopoNode { id: id as u64, mask: mask_of(n, span_words, cpus_where(&|c| of[c] == id).into_iter()) });
        }
    }
    for c in 0..n {
        tree.push(TopoNode { id: c as u64, mask: mask_of(n, cpu_words, std::iter::once(c)) });
    }
    Ok(ArenaLibSetup { task_ctx, static_pages, task_ctx_align, max_children, nodes: tree, origin })
}

#[cfg(test)]
mod tests {
    use super::*;
    use schedlab::machine::topology::Topology;

    #[test]
    fn the_tree_follows_the_machine() {
        // 2 nodes x 1 LLC x 2 cores x 2 threads; CPUs c and c + 4 are
        // the threads of core c.
        let topo = Topology::uniform("t", 2, 1, 1, 2, 2).unwrap();
        let m = Machine::new(&topo);
        let s = setup(&m, "struct t".into(), 8, 0, 640, "p:1".into()).unwrap();
        assert_eq!(s.max_children, [2, 1, 2, 2, 0]);
        // machine, 2 nodes, 2 LLCs, 4 cores, 8 CPUs.
        assert_eq!(s.nodes.len(), 1 + 2 + 2 + 4 + 8);
        assert_eq!(s.nodes[0].mask, vec![0xff]);
        assert_eq!((s.nodes[2].id, s.nodes[2].mask.clone()), (1, vec![0xcc]));
        assert_eq!(s.nodes[5].mask, vec![0x11], "core 0");
        let cpu7 = &s.nodes[16];
        assert_eq!((cpu7.id, cpu7.mask.len(), cpu7.mask[0]), (7, 10, 0x80), "a CPU mask is the library's 640 bits");
        let e = setup(&m, "struct t".into(), 8, 0, 8, "p:1".into()).unwrap_err();
        assert!(e.contains("fewer than 8 CPUs"), "{e}");
    }
}
