//! Resolving a profile for one machine and one command line into the
//! concrete steps a loader takes ([`Plan`]): values to write, arrays to
//! resize, ops flags, map updates and syscall-program runs with their
//! argument bytes.

use super::args;
use super::expr::{self, Env, Expr, ExprError, Value};
use super::format::{split_field, split_if, split_index, Each, Lines, Profile, ProfileError};
use super::machine::Machine;
use schedlab::sched::ext::ops::ops_flags;
use std::cell::RefCell;
use std::collections::BTreeMap;
use toml::Spanned;

/// A write of a scalar or one array element, rodata or .bss/.data.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Write {
    /// `name` or `name[i]`.
    pub target: String,
    /// The value, evaluated.
    pub value: Value,
    /// Where it came from, for messages (`file:line`).
    pub origin: String,
}

/// When a syscall program runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// After the object is loaded, before the struct_ops is attached.
    Load,
    /// Right after the attach.
    Attach,
}

/// One `bpf_prog_test_run_opts()` of a SEC("syscall") program.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Run {
    /// The SEC("syscall") program's name.
    pub prog: String,
    /// The context passed in (`ctx_in`), packed as the program's C struct.
    pub ctx: Vec<u8>,
    /// The CPU it runs on (`bpf_test_run_opts.cpu`).
    pub cpu: u32,
    /// When it runs.
    pub phase: Phase,
    /// A non-zero return fails the load (else it is only reported).
    pub fail: bool,
    /// Where it came from, for messages (`file:line`).
    pub origin: String,
}

/// One `bpf_map_update_elem()` from user space.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MapWrite {
    /// The map's name.
    pub map: String,
    /// The key, as bytes.
    pub key: Vec<u8>,
    /// The value, as bytes.
    pub value: Vec<u8>,
    /// Where it came from, for messages (`file:line`).
    pub origin: String,
}

/// What the loader does, in order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Plan {
    /// The scheduler the profile is for.
    pub scheduler: String,
    /// The `struct sched_ext_ops` variable to attach, when the object has several.
    pub ops: Option<String>,
    /// Rodata and globals, in file order (`[rodata]` first).
    pub writes: Vec<Write>,
    /// Arrays resized before load: (array, elements).
    pub resize: Vec<(String, u64)>,
    /// Maps given a new max_entries before load: (map, max_entries).
    pub map_sizes: Vec<(String, u32)>,
    /// Maps created into map-in-maps after load, in order.
    pub inner_maps: Vec<InnerMap>,
    /// Ops flags by name (without SCX_OPS_).
    pub ops_flags: Vec<String>,
    /// The loader assigns ops.flags (true) or adds to the source's.
    pub replace_flags: bool,
    /// User-space map updates, in order, before the attach.
    pub maps: Vec<MapWrite>,
    /// Syscall programs to run, in order.
    pub runs: Vec<Run>,
    /// scx_arena's set-up, after the load-phase runs.
    pub arena_lib: Option<super::arena_lib::ArenaLibSetup>,
    /// Map members user space writes after load, before the runs
    /// (scx_layered's per-CPU contexts and proximity maps).
    pub patches: Vec<super::layered::MapPatch>,
    /// The CPUs each layer starts with (`[layer_specs]`), for reports.
    pub layer_cpus: Vec<Vec<usize>>,
}

/// A map the loader creates into a map-in-map after load.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InnerMap {
    /// The ARRAY_OF_MAPS or HASH_OF_MAPS.
    pub outer: String,
    /// The slot it fills.
    pub slot: u32,
    /// The new map's `enum bpf_map_type`.
    pub map_type: u32,
    /// Its key size.
    pub key_size: u32,
    /// Its value size.
    pub value_size: u32,
    /// Its max_entries.
    pub max_entries: u32,
    /// The profile line it came from.
    pub origin: String,
}

impl Plan {
    /// The ops flags as a bit mask.
    pub fn flag_bits(&self) -> Result<u64, super::apply::ApplyError> {
        ops_flags::parse(&self.ops_flags)
            .map_err(|f| super::apply::ApplyError::UnknownFlag { flag: f.clone(), valid: ops_flags::valid() })
    }
}

/// C scalar types for argument structs: (name, size, signed).
pub(crate) const C_TYPES: &[(&str, usize, bool)] = &[
    ("u8", 1, false),
    ("s8", 1, true),
    ("bool", 1, false),
    ("u16", 2, false),
    ("s16", 2, true),
    ("u32", 4, false),
    ("s32", 4, true),
    ("int", 4, true),
    ("u64", 8, false),
    ("s64", 8, true),
];

/// Size and signedness of a C type name.
pub(crate) fn c_type(t: &str) -> Option<(usize, bool)> {
    C_TYPES.iter().find(|c| c.0 == t).map(|c| (c.1, c.2))
}

struct Scope<'a> {
    machine: &'a Machine,
    vars: &'a BTreeMap<String, Value>,
    /// Loop bindings, innermost last.
    local: &'a [(String, Value)],
}

impl Env for Scope<'_> {
    fn var(&self, name: &str) -> Option<Value> {
        if let Some((_, v)) = self.local.iter().rev().find(|(n, _)| n == name) {
            return Some(v.clone());
        }
        self.vars.get(name).cloned().or_else(|| self.machine.var(name))
    }
    fn call(&self, name: &str, args: &[Value]) -> Result<Value, ExprError> {
        self.machine.call(name, args)
    }
    fn names(&self) -> Vec<String> {
        let mut n: Vec<String> = self.local.iter().map(|(n, _)| n.clone()).collect();
        n.extend(self.vars.keys().cloned());
        n.extend(Machine::NAMES.iter().map(|s| s.to_string()));
        n
    }
}

struct Ctx<'a> {
    p: &'a Profile,
    machine: &'a Machine,
    vars: BTreeMap<String, Value>,
    /// The profile's lines, for origins.
    lines: Lines,
    /// The expressions parsed so far, by their text (a loop evaluates the
    /// same text once per iteration).
    parsed: RefCell<BTreeMap<String, Expr>>,
}

impl<'a> Ctx<'a> {
    fn new(p: &'a Profile, machine: &'a Machine, vars: BTreeMap<String, Value>) -> Ctx<'a> {
        Ctx { p, machine, vars, lines: Lines::new(&p.text), parsed: RefCell::default() }
    }

    fn origin(&self, span: std::ops::Range<usize>) -> String {
        format!("{}:{}", self.p.file, self.lines.line_of(span.start))
    }

    fn eval<T>(&self, local: &[(String, Value)], at: &Spanned<T>, src: &str, field: &str) -> Result<Value, ProfileError> {
        let scope = Scope { machine: self.machine, vars: &self.vars, local };
        let mut parsed = self.parsed.borrow_mut();
        if !parsed.contains_key(src) {
            let e = expr::parse(src).map_err(|m| self.p.err(at.span(), field, format!("in `{}`: {m}", src.trim())))?;
            parsed.insert(src.to_string(), e);
        }
        parsed[src].eval(&scope).map_err(|m| self.p.err(at.span(), field, format!("in `{}`: {m}", src.trim())))
    }

    /// A value field: a TOML literal or an expression string.
    fn value(&self, local: &[(String, Value)], v: &Spanned<toml::Value>, field: &str) -> Result<Value, ProfileError> {
        match v.get_ref() {
            toml::Value::String(s) => self.eval(local, v, s, field),
            toml::Value::Integer(i) => Ok(Value::Int(*i as i128)),
            toml::Value::Boolean(b) => Ok(Value::Bool(*b)),
            other => Err(self.p.err(v.span(), field, format!("{other} is not a number, boolean or expression string"))),
        }
    }

    /// The loop bindings of an entry: one list per iteration.
    fn iterations(&self, e: Each<'_>, what: &str) -> Result<Vec<Vec<(String, Value)>>, ProfileError> {
        let Some(r) = e.repeat else { return self.inner_iterations(e, what, &[]) };
        let field = format!("{what}.repeat");
        let (var, a, b) = super::format::split_range(r.get_ref()).unwrap_or_default();
        let a = self.eval(&[], r, a, &field)?.int().map_err(|m| self.p.err(r.span(), &field, m))?;
        let b = self.eval(&[], r, b, &field)?.int().map_err(|m| self.p.err(r.span(), &field, m))?;
        if b - a > 1 << 16 {
            return Err(self.p.err(r.span(), &field, format!("{a}..{b} is too long a range")));
        }
        let mut out = Vec::new();
        for k in a..b {
            let outer = [(var.to_string(), Value::Int(k))];
            for mut l in self.inner_iterations(e, what, &outer)? {
                l.insert(0, outer[0].clone());
                out.push(l);
            }
        }
        Ok(out)
    }

    /// [`Ctx::iterations`] inside one value of `repeat` (`outer`).
    fn inner_iterations(&self, e: Each<'_>, what: &str, outer: &[(String, Value)]) -> Result<Vec<Vec<(String, Value)>>, ProfileError> {
        let Some(over) = e.each else {
            let keep = match e.when {
                Some(w) => self.eval(outer, w, w.get_ref(), &format!("{what}.when"))?.truthy().map_err(|m| self.p.err(w.span(), &format!("{what}.when"), m))?,
                None => true,
            };
            return Ok(if keep { vec![Vec::new()] } else { Vec::new() });
        };
        let m = self.machine;
        let field = format!("{what}.for");
        let (var, first, end) = match super::format::split_range(over.get_ref()) {
            Some((v, a, b)) => {
                let a = self.eval(outer, over, a, &field)?.int().map_err(|m| self.p.err(over.span(), &field, m))?;
                let b = self.eval(outer, over, b, &field)?.int().map_err(|m| self.p.err(over.span(), &field, m))?;
                if b - a > 1 << 20 {
                    return Err(self.p.err(over.span(), &field, format!("{a}..{b} is too long a range")));
                }
                (v.to_string(), a, b)
            }
            None => {
                let n = match over.get_ref().as_str() {
                    "cpu" => m.nr_cpus,
                    "llc" => m.nr_llcs,
                    "node" => m.node.iter().max().map_or(0, |x| x + 1),
                    _ => m.core.iter().max().map_or(0, |x| x + 1),
                };
                (over.get_ref().clone(), 0, n as i128)
            }
        };
        let mut ids: Vec<(i128, i128)> = Vec::new();
        for id in first..end {
            let mut local = outer.to_vec();
            local.push((var.clone(), Value::Int(id)));
            if let Some(w) = e.when {
                let field = format!("{what}.when");
                if !self.eval(&local, w, w.get_ref(), &field)?.truthy().map_err(|m| self.p.err(w.span(), &field, m))? {
                    continue;
                }
            }
            let key = match e.order {
                Some(o) => {
                    let field = format!("{what}.order");
                    self.eval(&local, o, o.get_ref(), &field)?.int().map_err(|m| self.p.err(o.span(), &field, m))?
                }
                None => 0,
            };
            ids.push((key, id));
        }
        // Stable: equal keys keep id order, as Rust's sort_by_key does.
        ids.sort_by_key(|&(k, _)| k);
        Ok(ids
            .into_iter()
            .enumerate()
            .map(|(i, (_, id))| vec![(var.clone(), Value::Int(id)), ("i".to_string(), Value::Int(i as i128))])
            .collect())
    }

    /// Packs "TYPE NAME = EXPR" fields into a C struct (natural alignment).
    fn pack(&self, local: &[(String, Value)], fields: &[Spanned<String>], field: &str) -> Result<Vec<u8>, ProfileError> {
        let mut out: Vec<u8> = Vec::new();
        let mut align = 1;
        for f in fields {
            let (ty, name, e) = split_field(f.get_ref()).map_err(|m| self.p.err(f.span(), field, m))?;
            let (size, signed) = c_type(ty).ok_or_else(|| self.p.err(f.span(), field, format!("unknown type `{ty}`")))?;
            let v = self.eval(local, f, e, field)?.int().map_err(|m| self.p.err(f.span(), field, m))?;
            let bits = size as u32 * 8;
            let (lo, hi) = if signed { (-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1) } else { (0, (1i128 << bits) - 1) };
            if v < lo || v > hi {
                return Err(self.p.err(f.span(), field, format!("{name} = {v} does not fit {ty} ({lo}..={hi})")));
            }
            align = align.max(size);
            while out.len() % size != 0 {
                out.push(0);
            }
            out.extend_from_slice(&v.to_le_bytes()[..size]);
        }
        while out.len() % align != 0 {
            out.push(0);
        }
        Ok(out)
    }
}

/// Resolves `p` for `machine` with the scheduler's command line `argv`.
pub fn resolve(p: &Profile, machine: &Machine, argv: &[String]) -> Result<Plan, ProfileError> {
    let d = &p.def;
    let (vars, positional) = args::parse_all(p, argv)?;
    if !positional.is_empty() && d.layer_specs.is_none() {
        return Err(ProfileError {
            file: "--sched-args".into(),
            line: 0,
            field: d.profile.scheduler.clone(),
            msg: format!("`{}`: the profile declares positional arguments but no step reads them; remove them", positional[0]),
        });
    }
    let mut cx = Ctx::new(p, machine, vars);
    for l in &d.profile.lets {
        let (name, e) = l.get_ref().split_once('=').unwrap_or(("", ""));
        let v = cx.eval(&[], l, e, "profile.let")?;
        cx.vars.insert(name.trim().to_string(), v);
    }
    for r in &d.require {
        let src = r.check.get_ref();
        let ok = cx.eval(&[], &r.check, src, "require.check")?.truthy().map_err(|m| p.err(r.check.span(), "require.check", m))?;
        if !ok {
            return Err(p.err(r.check.span(), "require", format!("{} (`{}` is false for these flags on this machine)", r.message, src.trim())));
        }
    }
    let mut plan = Plan {
        scheduler: d.profile.scheduler.clone(),
        ops: d.profile.ops.clone(),
        replace_flags: d.profile.ops_flags_mode.as_ref().is_some_and(|m| m.get_ref() == "replace"),
        ..Plan::default()
    };
    for f in &d.profile.ops_flags {
        let (name, cond) = split_if(f.get_ref());
        let on = match cond {
            Some(c) => cx.eval(&[], f, c, "profile.ops_flags")?.truthy().map_err(|m| p.err(f.span(), "profile.ops_flags", m))?,
            None => true,
        };
        if on {
            plan.ops_flags.push(name.to_string());
        }
    }
    plan.flag_bits().map_err(|m| {
        let at = d.profile.ops_flags.first().map_or(0..0, |f| f.span());
        p.err(at, "profile.ops_flags", m)
    })?;
    for (k, v) in &d.rodata {
        let value = cx.value(&[], v, &format!("rodata.{k}"))?;
        plan.writes.push(Write { target: k.clone(), value, origin: cx.origin(v.span()) });
    }
    for s in &d.set {
        for local in cx.iterations(s.each(), "set")? {
            let path = s.name.get_ref().contains("].");
            let target = match split_index(s.name.get_ref()) {
                _ if path => {
                    let (parts, tail) = super::format::bracket_exprs(s.name.get_ref()).unwrap_or_default();
                    let mut t = String::new();
                    for (text, e) in parts {
                        let i = cx.eval(&local, &s.name, e, "set.name")?.int().map_err(|m| p.err(s.name.span(), "set.name", m))?;
                        if i < 0 {
                            return Err(p.err(s.name.span(), "set.name", format!("index {i} is negative")));
                        }
                        t += &format!("{}[{i}]", text.trim());
                    }
                    t + tail.trim()
                }
                Some((base, idx)) => {
                    let mut t = base.to_string();
                    for e in idx {
                        let i = cx.eval(&local, &s.name, e, "set.name")?.int().map_err(|m| p.err(s.name.span(), "set.name", m))?;
                        if i < 0 {
                            return Err(p.err(s.name.span(), "set.name", format!("index {i} is negative")));
                        }
                        t += &format!("[{i}]");
                    }
                    t
                }
                None => s.name.get_ref().trim().to_string(),
            };
            let value = cx.value(&local, &s.value, "set.value")?;
            plan.writes.push(Write { target, value, origin: cx.origin(s.name.span()) });
        }
    }
    for r in &d.resize {
        let v = cx.value(&[], &r.len, "resize.len")?.int().map_err(|m| p.err(r.len.span(), "resize.len", m))?;
        if !(1..=1 << 24).contains(&v) {
            return Err(p.err(r.len.span(), "resize.len", format!("{v} elements: give 1 or more (e.g. \"nr_cpu_ids\")")));
        }
        match (&r.array, &r.map) {
            (Some(a), _) => plan.resize.push((a.get_ref().clone(), v as u64)),
            (None, Some(m)) => plan.map_sizes.push((m.get_ref().clone(), v as u32)),
            (None, None) => unreachable!("Profile::check requires array or map"),
        }
    }
    for m in &d.inner_map {
        let map_type = super::format::INNER_MAP_TYPES.iter().find(|(n, _)| n == m.ty.get_ref()).map_or(0, |t| t.1);
        for local in cx.iterations(m.each(), "inner_map")? {
            let num = |v: &Spanned<toml::Value>, field: &str, lo: i128, hi: i128| -> Result<u32, ProfileError> {
                let n = cx.value(&local, v, field)?.int().map_err(|e| p.err(v.span(), field, e))?;
                if !(lo..=hi).contains(&n) {
                    return Err(p.err(v.span(), field, format!("{n} is outside {lo}..{hi}")));
                }
                Ok(n as u32)
            };
            let key_size = match &m.key_size {
                Some(k) => num(k, "inner_map.key_size", 0, 512)?,
                None => 0,
            };
            plan.inner_maps.push(InnerMap {
                outer: m.outer.get_ref().clone(),
                slot: num(&m.key, "inner_map.key", 0, u32::MAX as i128)?,
                map_type,
                key_size,
                value_size: num(&m.value_size, "inner_map.value_size", 1, 1 << 20)?,
                max_entries: num(&m.max_entries, "inner_map.max_entries", 1, 1 << 24)?,
                origin: cx.origin(m.outer.span()),
            });
        }
    }
    for m in &d.map {
        for local in cx.iterations(m.each(), "map")? {
            plan.maps.push(MapWrite {
                map: m.name.get_ref().clone(),
                key: cx.pack(&local, &m.key, "map.key")?,
                value: cx.pack(&local, &m.value, "map.value")?,
                origin: cx.origin(m.name.span()),
            });
        }
    }
    for sc in &d.syscall {
        let phase = match sc.phase.as_ref().map(|p| p.get_ref().as_str()) {
            Some("attach") => Phase::Attach,
            _ => Phase::Load,
        };
        for local in cx.iterations(sc.each(), "syscall")? {
            let cpu = match &sc.cpu {
                Some(c) => {
                    let v = cx.value(&local, c, "syscall.cpu")?.int().map_err(|m| p.err(c.span(), "syscall.cpu", m))?;
                    if v < 0 || v as usize >= machine.nr_cpus {
                        return Err(p.err(c.span(), "syscall.cpu", format!("CPU {v} does not exist (the machine has {})", machine.nr_cpus)));
                    }
                    v as u32
                }
                None => 0,
            };
            plan.runs.push(Run {
                prog: sc.prog.get_ref().clone(),
                ctx: cx.pack(&local, &sc.args, "syscall.args")?,
                cpu,
                phase,
                fail: sc.on_error.as_ref().is_none_or(|e| e.get_ref() == "fail"),
                origin: cx.origin(sc.prog.span()),
            });
        }
    }
    if let Some(l) = &d.layer_specs {
        let origin = cx.origin(l.default.span());
        let dir = std::path::Path::new(&p.file).parent().map(|d| d.to_path_buf()).unwrap_or_default();
        let default = l.default.get_ref();
        let default = if super::shipped_data(default).is_some() || dir.as_os_str().is_empty() { default.clone() } else { dir.join(default).display().to_string() };
        let shipped = |name: &str| super::shipped_data(name);
        let setup = super::layered::setup(machine, &cx.vars, &positional, &default, &shipped, &origin).map_err(|m| ProfileError {
            file: if positional.is_empty() { p.file.clone() } else { "--sched-args".into() },
            line: if positional.is_empty() { super::format::line_of(&p.text, l.default.span().start) } else { 0 },
            field: if positional.is_empty() { "layer_specs.default".into() } else { d.profile.scheduler.clone() },
            msg: m,
        })?;
        plan.writes.extend(setup.writes);
        plan.patches.extend(setup.patches);
        plan.runs.extend(setup.runs);
        plan.layer_cpus = setup.layer_cpus;
    }
    if let Some(a) = &d.arena_lib {
        let int = |v: &Option<Spanned<toml::Value>>, field: &str, default: u64| -> Result<u64, ProfileError> {
            let Some(v) = v else { return Ok(default) };
            let x = cx.value(&[], v, field)?.int().map_err(|m| p.err(v.span(), field, m))?;
            u64::try_from(x).map_err(|_| p.err(v.span(), field, format!("{x} is negative; give a count")))
        };
        use super::arena_lib as al;
        let static_pages = int(&a.static_pages, "arena_lib.static_pages", al::DEFAULT_STATIC_PAGES)?;
        let align = int(&a.task_ctx_align, "arena_lib.task_ctx_align", 0)?;
        let max_cpus = int(&a.max_cpus, "arena_lib.max_cpus", al::DEFAULT_MAX_CPUS)?;
        let origin = cx.origin(a.task_ctx.span());
        let t = a.task_ctx.get_ref().trim().to_string();
        plan.arena_lib = Some(
            al::setup(machine, t, static_pages, align, max_cpus, origin).map_err(|m| p.err(a.task_ctx.span(), "arena_lib", m))?,
        );
    }
    Ok(plan)
}

#[cfg(test)]
mod tests {
    use super::*;
    use schedlab::machine::topology::Topology;

    const P: &str = r#"
[profile]
scheduler = "scx_t"
let = ["smt_on = !nosmt && smt", "slice = slice_us * 1000"]
ops_flags = ["ENQ_LAST", "BUILTIN_IDLE_PER_NODE if numa"]
ops_flags_mode = "replace"

[[flag]]
long = "slice-us"
short = "s"
type = "u64"
default = 20000

[[flag]]
long = "nosmt"
short = "n"
type = "bool"

[rodata]
slice_ns = "slice"
nr_cpu_ids = "nr_cpu_ids"
smt_enabled = "smt_on"
fixed = 3

[[set]]
name = "preferred_cpus[i]"
value = "cpu"
for = "cpu"
order = "-cpu"

[[resize]]
array = "cpu_started_at"
len = "nr_cpu_ids"

[[syscall]]
prog = "enable_sibling_cpu"
args = ["s32 cpu_id = cpu", "s32 sibling_cpu_id = sibling(cpu)"]
for = "cpu"
when = "smt_on && cpu < 2"

[[syscall]]
prog = "start_timer"
args = ["u8 pad = 1", "u64 at = 7"]
phase = "attach"
cpu = "nr_cpu_ids - 1"

[[map]]
name = "cpu_node"
key = ["u32 k = cpu"]
value = ["u32 v = node(cpu)"]
for = "cpu"
when = "cpu == 1"
"#;

    #[test]
    fn resolves_values_loops_and_argument_bytes() {
        let p = Profile::parse("t.toml", P).unwrap();
        let m = Machine::new(&Topology::uniform("t", 1, 1, 1, 2, 2).unwrap());
        let plan = resolve(&p, &m, &["-s".into(), "5000".into()]).unwrap();
        let w = |t: &str| plan.writes.iter().find(|w| w.target == t).map(|w| w.value.clone());
        assert_eq!(w("slice_ns"), Some(Value::Int(5_000_000)));
        assert_eq!(w("nr_cpu_ids"), Some(Value::Int(4)));
        assert_eq!(w("smt_enabled"), Some(Value::Bool(true)));
        assert_eq!(w("fixed"), Some(Value::Int(3)));
        assert_eq!(w("preferred_cpus[0]"), Some(Value::Int(3)));
        assert_eq!(w("preferred_cpus[3]"), Some(Value::Int(0)));
        assert_eq!(plan.resize, [("cpu_started_at".to_string(), 4)]);
        assert_eq!(plan.ops_flags, ["ENQ_LAST"]);
        assert!(plan.replace_flags);
        assert_eq!(plan.runs.len(), 3);
        let s0 = &plan.runs[0];
        assert_eq!((s0.prog.as_str(), s0.phase, s0.cpu), ("enable_sibling_cpu", Phase::Load, 0));
        let sib = m.sibling[0] as i32;
        assert_eq!(s0.ctx, [0i32.to_le_bytes(), sib.to_le_bytes()].concat());
        let t = &plan.runs[2];
        assert_eq!((t.phase, t.cpu, t.ctx.len()), (Phase::Attach, 3, 16));
        assert_eq!(t.ctx[0], 1);
        assert_eq!(t.ctx[8], 7);
        assert_eq!(plan.maps.len(), 1);
        assert_eq!(plan.maps[0].key, 1u32.to_le_bytes());
        assert!(t.origin.starts_with("t.toml:"));
        // -n turns SMT off: no sibling runs.
        let plan = resolve(&p, &m, &["-n".into()]).unwrap();
        assert_eq!(plan.runs.len(), 1);
    }

    #[test]
    fn errors_name_file_line_field_and_fix() {
        let bad = P.replace("value = \"cpu\"", "value = \"cpux\"");
        let p = Profile::parse("t.toml", &bad).unwrap();
        let m = Machine::new(&Topology::flat(2).unwrap());
        let e = resolve(&p, &m, &[]).unwrap_err().to_string();
        assert!(e.starts_with("t.toml:27: set.value: in `cpux`: unknown name `cpux`; known:"), "{e}");
        let e = Profile::parse("t.toml", &P.replace("\"s32 cpu_id = cpu\"", "\"s33 cpu_id = cpu\"")).unwrap_err();
        assert_eq!((e.line, e.field.as_str()), (37, "syscall.args"));
        assert!(e.msg.contains("unknown type `s33`; use one of u8"), "{e}");
        let e = Profile::parse("t.toml", &P.replace("type = \"bool\"", "type = \"boolean\"")).unwrap_err();
        assert!(e.to_string().contains("t.toml:17: flag.type: unknown type `boolean`"), "{e}");
        let e = Profile::parse("t.toml", &P.replace("phase = \"attach\"", "phase = \"later\"")).unwrap_err();
        assert!(e.to_string().contains("syscall.phase: `later`: use \"load\""), "{e}");
        let e = Profile::parse("t.toml", &P.replace("[[resize]]", "[[resizes]]")).unwrap_err();
        assert!(e.to_string().starts_with("t.toml:31: (file): unknown field `resizes`"), "{e}");
        let e = Profile::parse("t.toml", &P.replace("for = \"cpu\"\norder", "for = \"cpus\"\norder")).unwrap_err();
        assert!(e.to_string().contains("set.for: `cpus`: loop over one of cpu, llc, node, core"), "{e}");
        let p = Profile::parse("t.toml", &P.replace("\"ENQ_LAST\"", "\"ENQ_FIRST\"")).unwrap();
        let e = resolve(&p, &m, &[]).unwrap_err().to_string();
        assert!(e.contains("profile.ops_flags: unknown ops flag `ENQ_FIRST`; valid:"), "{e}");
        let p = Profile::parse("t.toml", &P.replace("u64 at = 7", "u8 at = 300")).unwrap();
        assert!(resolve(&p, &m, &[]).unwrap_err().to_string().contains("at = 300 does not fit u8"));
        let p = Profile::parse("t.toml", &P.replace("cpu = \"nr_cpu_ids - 1\"", "cpu = \"nr_cpu_ids\"")).unwrap();
        assert!(resolve(&p, &m, &[]).unwrap_err().to_string().contains("CPU 2 does not exist"));
    }

    #[test]
    fn map_sizes_inner_maps_and_requirements() {
        let text = "[profile]\nscheduler = \"t\"\n\n[[require]]\ncheck = \"nr_cpu_ids % 2 == 0\"\nmessage = \"needs an even number of CPUs\"\n\n\
                    [[resize]]\nmap = \"ctx\"\nlen = \"nr_cpu_ids / 2\"\n\n\
                    [[inner_map]]\nouter = \"qs\"\nkey = \"q\"\nfor = \"q in 0..3\"\ntype = \"queue\"\nvalue_size = 4\nmax_entries = \"64 * (q + 1)\"\n";
        let p = Profile::parse("t.toml", text).unwrap();
        let plan = resolve(&p, &Machine::new(&Topology::flat(4).unwrap()), &[]).unwrap();
        assert_eq!(plan.map_sizes, [("ctx".to_string(), 2)]);
        let got: Vec<(u32, u32, u32)> = plan.inner_maps.iter().map(|m| (m.slot, m.map_type, m.max_entries)).collect();
        assert_eq!(got, [(0, 22, 64), (1, 22, 128), (2, 22, 192)]);
        let e = resolve(&p, &Machine::new(&Topology::flat(3).unwrap()), &[]).unwrap_err().to_string();
        assert!(e.starts_with("t.toml:5: require: needs an even number of CPUs (`nr_cpu_ids % 2 == 0` is false"), "{e}");
        let e = Profile::parse("t.toml", &text.replace("map = \"ctx\"", "map = \"ctx\"\narray = \"a\"")).unwrap_err();
        assert!(e.to_string().contains("resize: name either `array`"), "{e}");
        let e = Profile::parse("t.toml", &text.replace("\"queue\"", "\"ringbuf\"")).unwrap_err();
        assert!(e.to_string().contains("inner_map.type: `ringbuf`: use one of hash, array"), "{e}");
    }

    #[test]
    fn positional_arguments_need_a_declaration_and_a_reader() {
        let m = Machine::new(&Topology::flat(2).unwrap());
        let p = Profile::parse("t.toml", "[profile]\nscheduler = \"t\"\n").unwrap();
        let e = resolve(&p, &m, &["spec".into()]).unwrap_err().to_string();
        assert!(e.contains("t takes no positional arguments (got `spec`)"), "{e}");
        let p = Profile::parse("t.toml", "[profile]\nscheduler = \"t\"\npositional = \"specs\"\n").unwrap();
        let e = resolve(&p, &m, &["spec".into()]).unwrap_err().to_string();
        assert!(e.contains("`spec`: the profile declares positional arguments but no step reads them"), "{e}");
        assert!(resolve(&p, &m, &[]).is_ok());
        let e = Profile::parse("t.toml", "[profile]\nscheduler = \"t\"\n\n[layer_specs]\ndefault = \"x.json\"\n").unwrap_err().to_string();
        assert!(e.contains("layer_specs: the specs come from the positional arguments: declare them"), "{e}");
    }
}
