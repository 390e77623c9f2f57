//! The machine as a scheduler's user space sees it (scx_utils'
//! `Topology`, libbpf's `libbpf_num_possible_cpus()`), for profile
//! expressions.
//!
//! Names every profile can read:
//! - `nr_cpu_ids`, `nr_cpus` (possible CPUs; schedlab's ids are dense),
//!   `max_llc_cpus` (the most CPUs an LLC has),
//!   `nr_nodes` (non-empty NUMA nodes), `nr_llcs`, `nr_cores`;
//! - `smt` (some core has more than one CPU: scx_utils' `smt_enabled`),
//!   `numa` (`nr_nodes > 1`).
//!
//! Functions:
//! - `capacity(cpu)`: scx_utils' `cpu_capacity`, scaled to 1024. schedlab's
//!   CPUs are all the same (no big.LITTLE), so 1024;
//! - `kind(cpu)`: scx_utils' core type, `'big'` or `'little'` (all `'big'`
//!   here, as scx_utils classifies a machine without capacity differences);
//! - `sibling(cpu)`: scx_utils' `Topology::sibling_cpus()`: the first two
//!   CPUs of a core name each other, every other CPU has -1;
//! - `node(cpu)`, `llc(cpu)`, `core(cpu)`, `thread(cpu)`;
//! - `llc_rdx(cpu)`, `core_rdx(cpu)`: scx_utils' relative indices (the
//!   CPU's LLC among its node's LLCs, its core among its LLC's cores);
//! - `llc_first(llc)`, `llc_weight(llc)`, `node_first(node)`,
//!   `node_weight(node)`;
//! - `in_mask(cpu, mask)`: `mask` as scx_utils' `Cpumask::from_str()`
//!   takes it: `'all'`, `'none'`, or hexadecimal with or without `0x`;
//! - `mask_weight(mask)`, `mask_first(mask)` (-1 when empty);
//! - `in_list(cpu, list)`, `list_len(list)`: a cpulist (`'0-3,8'`);
//! - `min(a, b)`, `max(a, b)`, `log2(x)` (rounded down, as `f64::log2`
//!   cast to an integer; -1 for 0);
//! - `node_nr_llcs(node)`, `node_llc_first(node)`: a node's LLCs;
//! - `circular(n, s, i)`: the i-th position around a ring of n, nearest
//!   to s first (ties: lower position first), as scx_lavd orders the
//!   compute domains it steals from;
//! - `count(list)`, `nth(list, i)`: the numbers of a comma-separated list
//!   given as text (a list flag, e.g. `-t 500,2500,5000`);
//! - `int(text)`: a decimal or `0x` hexadecimal number given as text (a
//!   flag the binary parses itself, e.g. a raw PMU event id).

use super::expr::{ExprError, Value};
use schedlab::machine::topology::Topology;

/// The facts profiles read, taken from a [`Topology`].
#[derive(Clone, Debug)]
pub struct Machine {
    /// Number of CPUs.
    pub nr_cpus: usize,
    /// Per CPU: its NUMA node.
    pub node: Vec<usize>,
    /// Per CPU: its LLC id.
    pub llc: Vec<usize>,
    /// Per CPU: its core id.
    pub core: Vec<usize>,
    /// Per CPU: its SMT thread index within its core.
    pub thread: Vec<usize>,
    /// scx_utils' relative indices: the CPU's LLC among its node's LLCs
    /// and its core among its LLC's cores, each by ascending id.
    pub llc_rdx: Vec<usize>,
    /// Per CPU: its core among its LLC's cores (see `llc_rdx`).
    pub core_rdx: Vec<usize>,
    /// Per CPU: its SMT sibling, -1 if it has none.
    pub sibling: Vec<i64>,
    /// Number of NUMA nodes.
    pub nr_nodes: usize,
    /// Number of LLCs.
    pub nr_llcs: usize,
    /// Number of cores.
    pub nr_cores: usize,
    /// Whether cores have more than one thread.
    pub smt: bool,
}

impl Machine {
    /// The machine of `topo`.
    pub fn new(topo: &Topology) -> Machine {
        let n = topo.nr_cpus();
        let mut sibling = vec![-1i64; n];
        for span in &topo.core_span {
            let mut it = span.iter();
            if let (Some(a), Some(b)) = (it.next(), it.next()) {
                sibling[a] = b as i64;
                sibling[b] = a as i64;
            }
        }
        let node: Vec<usize> = topo.cpus.iter().map(|c| c.node).collect();
        let llc: Vec<usize> = topo.cpus.iter().map(|c| c.llc).collect();
        let core: Vec<usize> = topo.cpus.iter().map(|c| c.core).collect();
        let rank = |parent: &[usize], child: &[usize]| -> Vec<usize> {
            let mut kids: std::collections::BTreeMap<usize, std::collections::BTreeSet<usize>> = Default::default();
            for c in 0..n {
                kids.entry(parent[c]).or_default().insert(child[c]);
            }
            (0..n).map(|c| kids[&parent[c]].range(..child[c]).count()).collect()
        };
        let (llc_rdx, core_rdx) = (rank(&node, &llc), rank(&llc, &core));
        Machine {
            llc_rdx,
            core_rdx,
            nr_cpus: n,
            node,
            llc,
            core,
            thread: topo.cpus.iter().map(|c| c.thread).collect(),
            sibling,
            nr_nodes: topo.node_span.iter().filter(|s| s.weight() > 0).count(),
            nr_llcs: topo.nr_llcs(),
            nr_cores: topo.nr_cores(),
            smt: topo.core_span.iter().any(|s| s.weight() > 1),
        }
    }

    /// A machine-wide name.
    pub fn var(&self, name: &str) -> Option<Value> {
        let int = |v: usize| Some(Value::Int(v as i128));
        match name {
            "nr_cpu_ids" | "nr_cpus" => int(self.nr_cpus),
            "nr_nodes" => int(self.nr_nodes),
            "nr_llcs" => int(self.nr_llcs),
            "nr_cores" => int(self.nr_cores),
            "smt" => Some(Value::Bool(self.smt)),
            "numa" => Some(Value::Bool(self.nr_nodes > 1)),
            "max_llc_cpus" => {
                let mut per = std::collections::BTreeMap::new();
                for l in &self.llc {
                    *per.entry(*l).or_insert(0usize) += 1;
                }
                int(per.values().copied().max().unwrap_or(0))
            }
            _ => None,
        }
    }

    /// Names [`Machine::var`] knows.
    pub const NAMES: &'static [&'static str] = &["nr_cpu_ids", "nr_cpus", "nr_nodes", "nr_llcs", "nr_cores", "smt", "numa", "max_llc_cpus"];

    /// Function names [`Machine::call`] knows.
    pub const FUNCTIONS: &'static [&'static str] = &[
        "capacity", "kind", "sibling", "node", "llc", "core", "thread", "llc_first", "llc_weight", "node_first",
        "node_weight", "llc_mask_word", "node_mask_word", "in_mask", "mask_weight", "mask_first", "in_list",
        "list_len", "min", "max", "int", "log2", "count", "nth", "llc_rdx", "core_rdx", "node_nr_llcs", "node_llc_first", "circular",
    ];

    fn cpu(&self, v: &Value, f: &str) -> Result<usize, ExprError> {
        let c = v.int()?;
        if c < 0 || c as usize >= self.nr_cpus {
            return Err(ExprError::Function(format!("{f}({c}): no such CPU (the machine has {} CPUs)", self.nr_cpus)));
        }
        Ok(c as usize)
    }

    /// Bits of a cpumask string, as scx_utils' `Cpumask::from_str()`.
    pub fn mask(&self, s: &str) -> Result<Vec<bool>, ExprError> {
        let n = self.nr_cpus;
        match s.trim() {
            "all" => return Ok(vec![true; n]),
            "none" => return Ok(vec![false; n]),
            _ => {}
        }
        let hex = s.trim().trim_start_matches("0x").trim_start_matches("0X").replace([',', '_'], "");
        if hex.is_empty() || !hex.chars().all(|c| c.is_ascii_hexdigit()) {
            return Err(ExprError::Function(format!("'{s}' is not a cpumask: expected 'all', 'none' or hexadecimal like 0xff")));
        }
        let mut bits = vec![false; n];
        for (i, c) in hex.chars().rev().enumerate() {
            let d = c.to_digit(16).unwrap_or(0);
            for b in 0..4 {
                if d & (1 << b) != 0 {
                    let cpu = i * 4 + b;
                    if cpu >= n {
                        return Err(ExprError::Function(format!("cpumask '{s}' names CPU {cpu}; the machine has {n} CPUs")));
                    }
                    bits[cpu] = true;
                }
            }
        }
        Ok(bits)
    }

    /// CPUs of a cpulist (`0-3,8`), in the order given, without repeats.
    pub fn list(&self, s: &str) -> Result<Vec<usize>, ExprError> {
        let mut out: Vec<usize> = Vec::new();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (a, b) = part.split_once('-').unwrap_or((part, part));
            let p = |x: &str| x.trim().parse::<usize>().map_err(|_| ExprError::Function(format!("'{s}' is not a CPU list like 0-3,8")));
            let (a, b) = (p(a)?, p(b)?);
            if a > b || b >= self.nr_cpus {
                return Err(ExprError::Function(format!("CPU list '{s}': {part} is not within 0-{}", self.nr_cpus.saturating_sub(1))));
            }
            for c in a..=b {
                if !out.contains(&c) {
                    out.push(c);
                }
            }
        }
        Ok(out)
    }

    /// A machine function.
    pub fn call(&self, f: &str, args: &[Value]) -> Result<Value, ExprError> {
        let want = |n: usize| -> Result<(), ExprError> {
            if args.len() == n {
                Ok(())
            } else {
                Err(ExprError::Function(format!("{f}() takes {n} argument{}, got {}", if n == 1 { "" } else { "s" }, args.len())))
            }
        };
        let int = |v: usize| Value::Int(v as i128);
        let s = |i: usize| -> Result<String, ExprError> {
            Ok(match &args[i] {
                Value::Str(s) => s.clone(),
                v => v.to_string(),
            })
        };
        let first_of = |ids: &[usize], id: i128| -> Value {
            ids.iter().position(|&x| x as i128 == id).map_or(Value::Int(-1), int)
        };
        let weight_of = |ids: &[usize], id: i128| int(ids.iter().filter(|&&x| x as i128 == id).count());
        Ok(match f {
            "capacity" => {
                want(1)?;
                self.cpu(&args[0], f)?;
                Value::Int(1024)
            }
            "kind" => {
                want(1)?;
                self.cpu(&args[0], f)?;
                Value::Str("big".into())
            }
            "sibling" => {
                want(1)?;
                Value::Int(self.sibling[self.cpu(&args[0], f)?] as i128)
            }
            "node" | "llc" | "core" | "thread" | "llc_rdx" | "core_rdx" => {
                want(1)?;
                let c = self.cpu(&args[0], f)?;
                int(match f {
                    "node" => self.node[c],
                    "llc" => self.llc[c],
                    "core" => self.core[c],
                    "llc_rdx" => self.llc_rdx[c],
                    "core_rdx" => self.core_rdx[c],
                    _ => self.thread[c],
                })
            }
            "llc_first" | "llc_weight" | "node_first" | "node_weight" => {
                want(1)?;
                let ids = if f.starts_with("llc") { &self.llc } else { &self.node };
                let id = args[0].int()?;
                if f.ends_with("first") {
                    first_of(ids, id)
                } else {
                    weight_of(ids, id)
                }
            }
            // Word `w` (CPUs 64w..64w+63) of the cpumask of LLC / node `id`,
            // as a loader fills a `u64 mask[ID][MAX_CPUS / 64]` array.
            "llc_mask_word" | "node_mask_word" => {
                want(2)?;
                let ids = if f.starts_with("llc") { &self.llc } else { &self.node };
                let (id, w) = (args[0].int()?, args[1].int()?);
                if w < 0 {
                    return Err(ExprError::Function(format!("{f}({id}, {w}): the word index is negative")));
                }
                let mut word: u64 = 0;
                for (c, &x) in ids.iter().enumerate() {
                    if x as i128 == id && (c / 64) as i128 == w {
                        word |= 1 << (c % 64);
                    }
                }
                Value::Int(word as i128)
            }
            "in_mask" => {
                want(2)?;
                let c = self.cpu(&args[0], f)?;
                Value::Bool(self.mask(&s(1)?)?[c])
            }
            "mask_weight" => {
                want(1)?;
                int(self.mask(&s(0)?)?.iter().filter(|b| **b).count())
            }
            "mask_first" => {
                want(1)?;
                self.mask(&s(0)?)?.iter().position(|b| *b).map_or(Value::Int(-1), int)
            }
            // LLCs by node: how many, and the lowest id (-1 when none).
            "node_nr_llcs" | "node_llc_first" => {
                want(1)?;
                let n = args[0].int()?;
                let ids: std::collections::BTreeSet<usize> =
                    (0..self.nr_cpus).filter(|&c| self.node[c] as i128 == n).map(|c| self.llc[c]).collect();
                if f == "node_nr_llcs" {
                    int(ids.len())
                } else {
                    ids.first().map_or(Value::Int(-1), |&l| int(l))
                }
            }
            // circular(n, s, i): the position of the i-th of n positions
            // around a ring, nearest to position s first (ties: the lower
            // position), s itself left out.
            "circular" => {
                want(3)?;
                let (n, st, i) = (args[0].int()?, args[1].int()?, args[2].int()?);
                if n <= 0 || !(0..n).contains(&st) || !(0..n - 1).contains(&i) {
                    return Err(ExprError::Function(format!("circular({n}, {st}, {i}): need 0 <= s < n and 0 <= i < n - 1")));
                }
                let mut order: Vec<i128> = (0..n).filter(|&x| x != st).collect();
                order.sort_by_key(|&x| {
                    let d = (x - st).rem_euclid(n);
                    (d.min(n - d), x)
                });
                Value::Int(order[i as usize])
            }
            "log2" => {
                want(1)?;
                let x = args[0].int()?;
                if x < 0 {
                    return Err(ExprError::Function(format!("log2({x}): a negative number")));
                }
                Value::Int(if x == 0 { -1 } else { 127 - x.leading_zeros() as i128 })
            }
            "count" | "nth" => {
                want(if f == "nth" { 2 } else { 1 })?;
                let text = s(0)?;
                let nums = text
                    .split(',')
                    .map(str::trim)
                    .filter(|p| !p.is_empty())
                    .map(|p| p.parse::<i128>().map_err(|_| ExprError::Function(format!("{f}('{text}'): `{p}` is not a number; write a list like '500,2500,5000'"))))
                    .collect::<Result<Vec<_>, _>>()?;
                if f == "count" {
                    int(nums.len())
                } else {
                    let i = args[1].int()?;
                    let at = usize::try_from(i).ok().and_then(|i| nums.get(i));
                    Value::Int(*at.ok_or_else(|| ExprError::Function(format!("nth('{text}', {i}): the list has {} numbers", nums.len())))?)
                }
            }
            "in_list" => {
                want(2)?;
                let c = self.cpu(&args[0], f)?;
                Value::Bool(self.list(&s(1)?)?.contains(&c))
            }
            "list_len" => {
                want(1)?;
                int(self.list(&s(0)?)?.len())
            }
            "int" => {
                want(1)?;
                let t = s(0)?.trim().replace('_', "");
                let n = match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
                    Some(h) => i128::from_str_radix(h, 16),
                    None => t.parse::<i128>(),
                };
                Value::Int(n.map_err(|_| ExprError::Function(format!("int('{t}'): not a number")))?)
            }
            "min" | "max" => {
                want(2)?;
                let (a, b) = (args[0].int()?, args[1].int()?);
                Value::Int(if f == "min" { a.min(b) } else { a.max(b) })
            }
            _ => {
                return Err(ExprError::Function(format!("unknown function {f}(); known: {}", Self::FUNCTIONS.join(", "))));
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn facts_of_an_smt_numa_machine() {
        let topo = Topology::uniform("t", 2, 1, 2, 2, 2).unwrap();
        let m = Machine::new(&topo);
        assert_eq!(m.nr_cpus, 16);
        assert_eq!(m.var("nr_nodes"), Some(Value::Int(2)));
        assert_eq!(m.var("smt"), Some(Value::Bool(true)));
        assert_eq!(m.var("numa"), Some(Value::Bool(true)));
        for c in 0..16 {
            let s = m.sibling[c];
            assert!(s >= 0 && m.sibling[s as usize] == c as i64 && m.core[s as usize] == m.core[c]);
        }
        let flat = Machine::new(&Topology::flat(4).unwrap());
        assert_eq!(flat.sibling, vec![-1; 4]);
        assert_eq!(flat.var("smt"), Some(Value::Bool(false)));
    }

    #[test]
    fn masks_and_lists() {
        let m = Machine::new(&Topology::flat(8).unwrap());
        assert_eq!(m.mask("0x5").unwrap(), [true, false, true, false, false, false, false, false]);
        assert_eq!(m.mask("all").unwrap().len(), 8);
        assert!(m.mask("0x100").unwrap_err().to_string().contains("CPU 8"));
        assert!(m.mask("zz").unwrap_err().to_string().contains("not a cpumask"));
        assert_eq!(m.list("0-2,6,1").unwrap(), [0, 1, 2, 6]);
        assert!(m.list("3-9").is_err());
        let s = |x: &str| Value::Str(x.into());
        assert_eq!(m.call("mask_first", &[s("0x0")]).unwrap(), Value::Int(-1));
        assert_eq!(m.call("in_mask", &[Value::Int(2), s("4")]).unwrap(), Value::Bool(true));
        assert!(m.call("capacity", &[Value::Int(9)]).unwrap_err().to_string().contains("no such CPU"));
        assert!(m.call("bogus", &[]).unwrap_err().to_string().contains("known: capacity"));
        let big = Machine::new(&Topology::uniform("t", 2, 1, 2, 20, 2).unwrap());
        assert_eq!(big.nr_cpus, 160);
        let words = |f: &str, id: i128| -> Vec<u64> {
            (0..3).map(|w| match big.call(f, &[Value::Int(id), Value::Int(w)]).unwrap() {
                Value::Int(x) => x as u64,
                v => panic!("{v}"),
            }).collect()
        };
        // Each CPU is in exactly one node's and one LLC's mask.
        let (mut nodes, mut llcs) = (vec![0u64; 3], vec![0u64; 3]);
        for id in 0..4 {
            for (w, x) in words("node_mask_word", id).into_iter().enumerate() {
                assert_eq!(nodes[w] & x, 0);
                nodes[w] |= x;
            }
            for (w, x) in words("llc_mask_word", id).into_iter().enumerate() {
                assert_eq!(llcs[w] & x, 0);
                llcs[w] |= x;
            }
        }
        assert_eq!(nodes, [u64::MAX, u64::MAX, (1 << 32) - 1]);
        assert_eq!(llcs, nodes);
        let n1: u32 = words("node_mask_word", 1).iter().map(|w| w.count_ones()).sum();
        assert_eq!(n1, 80);
    }
}
