//! The loader profile file format (TOML), parsed with the line of every
//! field kept for messages.
//!
//! ```toml
//! [profile]
//! scheduler = "scx_bpfland"          # the crate or program it describes
//! versions = ["1.1.4"]               # what it was written from
//! ops = "bpfland_ops"                # optional: which struct_ops to load
//! let = ["smt_enabled = !disable_smt && smt"]   # derived values, in order
//! ops_flags = ["ENQ_LAST", "BUILTIN_IDLE_PER_NODE if numa_enabled"]
//! ops_flags_mode = "replace"         # the loader assigns .flags (or "add")
//! positional = "layer specs"         # optional: the binary takes positional arguments
//!
//! [[flag]]                           # the scheduler's own command line
//! long = "slice-us"                  # --slice-us; read as `slice_us`
//! short = "s"                        # -s
//! type = "u64"                       # bool, u32, u64, i32, i64, string
//! default = 1000
//!
//! [rodata]                           # const volatile globals, before load
//! slice_max = "slice_us * 1000"      # an expression (see expr.rs) or a literal
//!
//! [[set]]                            # rodata or .bss/.data, optionally per CPU
//! name = "cpu_capacity[cpu]"         # the index is an expression too
//! value = "capacity(cpu)"
//! for = "cpu"                        # cpu, llc, node, core or "q in 0..n"; binds it and `i`
//! repeat = "k in 1..11"              # optional outer loop around `for` (binds k)
//! order = "-capacity(cpu)"           # optional sort key (ascending, stable)
//! when = "..."                       # optional filter (before `i` counts)
//!
//! [[resize]]                         # RESIZE_ARRAY / bpf_map__set_value_size
//! array = "cpu_gimme_task"
//! len = "nr_cpu_ids"
//!
//! [[map]]                            # bpf_map_update_elem() from user space
//! name = "cpu_node_map"
//! key = ["u32 = cpu"]
//! value = ["u32 = node(cpu)"]
//! for = "cpu"
//!
//! [[syscall]]                        # bpf_prog_test_run_opts() of SEC("syscall")
//! prog = "enable_sibling_cpu"
//! args = ["s32 cpu_id = cpu", "s32 sibling_cpu_id = sibling(cpu)"]
//! for = "cpu"
//! when = "smt_enabled"
//! phase = "load"                     # "load" (before attach) or "attach" (after)
//! cpu = "0"                          # the CPU it runs on
//! on_error = "fail"                  # a non-zero return: "fail" or "warn"
//!
//! [layer_specs]                      # scx_layered's layer config (layered.rs), from the
//! default = "scx_layered.json"       # positional arguments; this file without any
//! ```
//!
//! Named steps (`[arena_lib]`, `[layer_specs]`) are translations a
//! `[[set]]` expression cannot say sanely (a JSON document walked three
//! levels deep, seeded shuffles, a core allocator); each is one Rust
//! module named by its table, and what it produces goes through the same
//! [`Plan`](super::resolve::Plan) as every other entry: writes (members of
//! array elements in `.bss` included, `layers[0].matches[1].matches[0].kind`),
//! writes into members of map values (`cpu_ctxs` per CPU), syscall runs.

use serde::Deserialize;
use std::collections::BTreeMap;
use toml::Spanned;

/// Why a profile cannot be used: the file, the line, the field and how
/// to fix it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{file}:{line}: {field}: {msg}")]
pub struct ProfileError {
    /// The profile file.
    pub file: String,
    /// The line, 1-based.
    pub line: usize,
    /// The field, e.g. `set[2].value`.
    pub field: String,
    /// What is wrong and how to fix it.
    pub msg: String,
}

/// The `[profile]` table.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Header {
    /// The crate or program the profile describes.
    pub scheduler: String,
    /// The versions it was written from.
    #[serde(default)]
    pub versions: Vec<String>,
    /// A one-line description for `schedlab scheds`.
    #[serde(default)]
    pub about: Option<String>,
    /// Which `struct sched_ext_ops` variable to load, when the object has several.
    #[serde(default)]
    pub ops: Option<String>,
    /// Derived values (`NAME = EXPR`), evaluated in order after the flags.
    #[serde(default, rename = "let")]
    pub lets: Vec<Spanned<String>>,
    /// Ops flags to set, without `SCX_OPS_`, each optionally with `if COND`.
    #[serde(default)]
    pub ops_flags: Vec<Spanned<String>>,
    /// "replace": the loader assigns `ops.flags`; "add" (the default): added to the source's.
    #[serde(default)]
    pub ops_flags_mode: Option<Spanned<String>>,
    /// What the binary's positional arguments are (e.g. "layer specs"):
    /// without it the command line takes none. A step that reads them
    /// (`[layer_specs]`) gets them in order.
    #[serde(default)]
    pub positional: Option<String>,
}

/// A `[[flag]]` entry: one option of the scheduler's command line.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FlagDef {
    /// The long name, without `--`; read in expressions with `-` as `_`.
    pub long: Spanned<String>,
    /// The one-letter short name.
    #[serde(default)]
    pub short: Option<Spanned<String>>,
    /// The type: bool, u32, u64, i32, i64 or string.
    #[serde(rename = "type")]
    pub ty: Spanned<String>,
    /// The default when not given (false, 0 or "" without it).
    #[serde(default)]
    pub default: Option<Spanned<toml::Value>>,
    /// The help text.
    #[serde(default)]
    pub help: Option<String>,
}

/// Iteration shared by set, map and syscall entries (`for`, `when`,
/// `order`).
#[derive(Clone, Copy, Debug)]
pub struct Each<'a> {
    /// An outer loop `NAME in FIRST..END` around the whole iteration
    /// (its variable is bound in `for`'s `when`, `order` and everything
    /// else; `i` restarts for each of its values).
    pub repeat: &'a Option<Spanned<String>>,
    /// The inner loop (`cpu`, `llc`, `node`, `core` or `NAME in A..B`), binding its variable and `i`.
    pub each: &'a Option<Spanned<String>>,
    /// A filter: entries where it is false are skipped (before `i` counts).
    pub when: &'a Option<Spanned<String>>,
    /// A sort key: the iteration runs in ascending order of it (stable).
    pub order: &'a Option<Spanned<String>>,
}

macro_rules! each_fields {
    ($t:ident) => {
        impl $t {
            /// The entry's iteration.
            pub fn each(&self) -> Each<'_> {
                Each { repeat: &self.repeat, each: &self.each, when: &self.when, order: &self.order }
            }
        }
    };
}
each_fields!(SetDef);
each_fields!(MapDef);
each_fields!(SyscallDef);
each_fields!(InnerMapDef);

/// A `[[set]]` entry: a write to rodata or .bss/.data before load.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SetDef {
    /// The target: `NAME`, `NAME[EXPR]` or a member path `NAME[i].a.b[j]`.
    pub name: Spanned<String>,
    /// The value: an expression or a literal.
    pub value: Spanned<toml::Value>,
    /// Optional outer loop `NAME in A..B`.
    #[serde(default)]
    pub repeat: Option<Spanned<String>>,
    /// Optional iteration (`for`).
    #[serde(default, rename = "for")]
    pub each: Option<Spanned<String>>,
    /// Optional filter.
    #[serde(default)]
    pub when: Option<Spanned<String>>,
    /// Optional sort key.
    #[serde(default)]
    pub order: Option<Spanned<String>>,
}

/// A `[[resize]]` entry before load: an array (RESIZE_ARRAY) or a map's
/// `max_entries` (`bpf_map__set_max_entries()`); exactly one of the two.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResizeDef {
    /// The global array.
    #[serde(default)]
    pub array: Option<Spanned<String>>,
    /// The map.
    #[serde(default)]
    pub map: Option<Spanned<String>>,
    /// Its new number of elements (an expression).
    pub len: Spanned<toml::Value>,
}

/// An `[[inner_map]]` entry after load: `bpf_map_create()` of a new map,
/// then `bpf_map_update_elem(outer, &key, &fd)`, as scx_pair's loader fills
/// its ARRAY_OF_MAPS with one queue per cgroup index.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InnerMapDef {
    /// The ARRAY_OF_MAPS or HASH_OF_MAPS.
    pub outer: Spanned<String>,
    /// The slot (an expression).
    pub key: Spanned<toml::Value>,
    /// The new map's type: hash, array, percpu_array, lru_hash, queue or stack.
    #[serde(rename = "type")]
    pub ty: Spanned<String>,
    /// Its key size in bytes (default 0, as queues and stacks have).
    #[serde(default)]
    pub key_size: Option<Spanned<toml::Value>>,
    /// Its value size in bytes.
    pub value_size: Spanned<toml::Value>,
    /// Its max_entries.
    pub max_entries: Spanned<toml::Value>,
    /// Optional outer loop `NAME in A..B`.
    #[serde(default)]
    pub repeat: Option<Spanned<String>>,
    /// Optional iteration (`for`).
    #[serde(default, rename = "for")]
    pub each: Option<Spanned<String>>,
    /// Optional filter.
    #[serde(default)]
    pub when: Option<Spanned<String>>,
    /// Optional sort key.
    #[serde(default)]
    pub order: Option<Spanned<String>>,
}

/// A `[[require]]` entry: a condition the loader checks before it loads
/// anything, refusing the scheduler's flags or the machine otherwise (as
/// scx_pair's loader refuses an odd number of CPUs).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RequireDef {
    /// The condition (an expression over flags, `let`s and the machine).
    pub check: Spanned<String>,
    /// What the loader says when it is false.
    pub message: String,
}

/// The map types an `[[inner_map]]` can create: (name, `enum bpf_map_type`).
pub const INNER_MAP_TYPES: &[(&str, u32)] =
    &[("hash", 1), ("array", 2), ("percpu_array", 6), ("lru_hash", 9), ("queue", 22), ("stack", 23)];

/// A `[[map]]` entry: `bpf_map_update_elem()` from user space.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MapDef {
    /// The map.
    pub name: Spanned<String>,
    /// The key, as typed fields `TYPE = EXPR`, packed in order.
    pub key: Vec<Spanned<String>>,
    /// The value, as typed fields `TYPE = EXPR`, packed in order.
    pub value: Vec<Spanned<String>>,
    /// Optional outer loop `NAME in A..B`.
    #[serde(default)]
    pub repeat: Option<Spanned<String>>,
    /// Optional iteration (`for`).
    #[serde(default, rename = "for")]
    pub each: Option<Spanned<String>>,
    /// Optional filter.
    #[serde(default)]
    pub when: Option<Spanned<String>>,
    /// Optional sort key.
    #[serde(default)]
    pub order: Option<Spanned<String>>,
}

/// A `[[syscall]]` entry: a `bpf_prog_test_run_opts()` of a SEC("syscall") program.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SyscallDef {
    /// The program.
    pub prog: Spanned<String>,
    /// Its context struct's fields, `TYPE NAME = EXPR`, packed in order.
    #[serde(default)]
    pub args: Vec<Spanned<String>>,
    /// "load" (before the attach, the default) or "attach" (after it).
    #[serde(default)]
    pub phase: Option<Spanned<String>>,
    /// The CPU it runs on (an expression; default 0).
    #[serde(default)]
    pub cpu: Option<Spanned<toml::Value>>,
    /// A non-zero return: "fail" (the default) or "warn".
    #[serde(default)]
    pub on_error: Option<Spanned<String>>,
    /// Optional outer loop `NAME in A..B`.
    #[serde(default)]
    pub repeat: Option<Spanned<String>>,
    /// Optional iteration (`for`).
    #[serde(default, rename = "for")]
    pub each: Option<Spanned<String>>,
    /// Optional filter.
    #[serde(default)]
    pub when: Option<Spanned<String>>,
    /// Optional sort key.
    #[serde(default)]
    pub order: Option<Spanned<String>>,
}

/// A profile as written.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProfileDef {
    /// The `[profile]` header.
    pub profile: Header,
    /// The scheduler's command-line options.
    #[serde(default)]
    pub flag: Vec<FlagDef>,
    /// `const volatile` globals, by name.
    #[serde(default)]
    pub rodata: BTreeMap<String, Spanned<toml::Value>>,
    /// Writes to globals, in order.
    #[serde(default)]
    pub set: Vec<SetDef>,
    /// Arrays resized before load.
    #[serde(default)]
    pub resize: Vec<ResizeDef>,
    /// User-space map updates, in order.
    #[serde(default)]
    pub map: Vec<MapDef>,
    /// Syscall programs to run, in order.
    #[serde(default)]
    pub syscall: Vec<SyscallDef>,
    /// Maps created into map-in-maps after load, in order.
    #[serde(default)]
    pub inner_map: Vec<InnerMapDef>,
    /// Conditions the loader refuses to run without.
    #[serde(default)]
    pub require: Vec<RequireDef>,
    /// scx_arena's `ArenaLib::setup()` (see arena_lib.rs).
    #[serde(default)]
    pub arena_lib: Option<super::arena_lib::ArenaLibDef>,
    /// scx_layered's layer specs (see layered.rs).
    #[serde(default)]
    pub layer_specs: Option<super::layered::LayerSpecsDef>,
}

/// A profile with the text it came from (for line numbers).
#[derive(Clone, Debug)]
pub struct Profile {
    /// The file name, for messages.
    pub file: String,
    /// The text, for line numbers.
    pub text: String,
    /// The parsed profile.
    pub def: ProfileDef,
}

impl Profile {
    /// Parses profile `text`, naming it `file` in messages.
    pub fn parse(file: &str, text: &str) -> Result<Profile, ProfileError> {
        let def: ProfileDef = toml::from_str(text).map_err(|e| {
            let line = e.span().map_or(0, |s| line_of(text, s.start));
            ProfileError {
                file: file.to_string(),
                line,
                field: "(file)".into(),
                msg: format!(
                    "{}; see the format in the README (\"Loader profiles\")",
                    e.message().trim_end()
                ),
            }
        })?;
        let p = Profile { file: file.to_string(), text: text.to_string(), def };
        p.check()?;
        Ok(p)
    }

    /// Reads and parses a profile file.
    pub fn load(path: &std::path::Path) -> Result<Profile, ProfileError> {
        let text = std::fs::read_to_string(path).map_err(|e| ProfileError {
            file: path.display().to_string(),
            line: 0,
            field: "(file)".into(),
            msg: format!("cannot read it: {e}; check the path given to --sched-profile or scheduler.profile"),
        })?;
        Profile::parse(&path.display().to_string(), &text)
    }

    /// An error at `span` of this profile's text.
    pub fn err(&self, span: std::ops::Range<usize>, field: &str, msg: impl std::fmt::Display) -> ProfileError {
        ProfileError { file: self.file.clone(), line: line_of(&self.text, span.start), field: field.to_string(), msg: msg.to_string() }
    }

    /// The variable a flag is read as (`slice-us` -> `slice_us`).
    pub fn flag_var(f: &FlagDef) -> String {
        f.long.get_ref().replace('-', "_")
    }

    /// Checks what parsing alone can: flag types and names, phases, modes
    /// and that every expression parses.
    fn check(&self) -> Result<(), ProfileError> {
        let d = &self.def;
        let mut seen: Vec<String> = Vec::new();
        for f in &d.flag {
            let ty = f.ty.get_ref().as_str();
            if !FLAG_TYPES.contains(&ty) {
                return Err(self.err(f.ty.span(), "flag.type", format!("unknown type `{ty}`; use one of {}", FLAG_TYPES.join(", "))));
            }
            let long = f.long.get_ref();
            if long.is_empty() || long.starts_with('-') || !long.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
                return Err(self.err(f.long.span(), "flag.long", format!("`{long}`: write the long name without dashes, e.g. \"slice-us\"")));
            }
            if let Some(s) = &f.short {
                if s.get_ref().chars().count() != 1 {
                    return Err(self.err(s.span(), "flag.short", format!("`{}`: a short flag is one character, e.g. \"s\"", s.get_ref())));
                }
                if seen.contains(&format!("-{}", s.get_ref())) {
                    return Err(self.err(s.span(), "flag.short", format!("-{} is defined twice; give each flag its own letter", s.get_ref())));
                }
                seen.push(format!("-{}", s.get_ref()));
            }
            if seen.contains(&format!("--{long}")) {
                return Err(self.err(f.long.span(), "flag.long", format!("--{long} is defined twice; remove one")));
            }
            seen.push(format!("--{long}"));
            if let Some(v) = &f.default {
                super::args::parse_value(ty, &super::args::toml_text(v.get_ref()))
                    .map_err(|m| self.err(v.span(), "flag.default", format!("{m}; give a {ty} default")))?;
            }
        }
        if let Some(m) = &d.profile.ops_flags_mode {
            if !["replace", "add"].contains(&m.get_ref().as_str()) {
                return Err(self.err(m.span(), "profile.ops_flags_mode", format!("`{}`: use \"replace\" (the loader assigns ops.flags) or \"add\"", m.get_ref())));
            }
        }
        for l in &d.profile.lets {
            let (name, e) = l.get_ref().split_once('=').ok_or_else(|| {
                self.err(l.span(), "profile.let", format!("`{}`: write \"NAME = EXPRESSION\"", l.get_ref()))
            })?;
            let name = name.trim();
            if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                return Err(self.err(l.span(), "profile.let", format!("`{name}` is not a name; use letters, digits and _")));
            }
            self.expr(l, e, "profile.let")?;
        }
        for f in &d.profile.ops_flags {
            let (_, cond) = split_if(f.get_ref());
            if let Some(c) = cond {
                self.expr(f, c, "profile.ops_flags")?;
            }
        }
        for (k, v) in &d.rodata {
            if let toml::Value::String(s) = v.get_ref() {
                self.expr(v, s, &format!("rodata.{k}"))?;
            }
        }
        for s in &d.set {
            self.check_each(s.each(), "set")?;
            if let toml::Value::String(x) = s.value.get_ref() {
                self.expr(&s.value, x, "set.value")?;
            }
            if s.name.get_ref().contains("].") {
                // A member of an array element (host::paths).
                let (parts, _) = bracket_exprs(s.name.get_ref()).ok_or_else(|| {
                    self.err(s.name.span(), "set.name", format!("`{}`: unbalanced brackets", s.name.get_ref()))
                })?;
                for (_, e) in parts {
                    self.expr(&s.name, e, "set.name")?;
                }
            } else if let Some((_, idx)) = split_index(s.name.get_ref()) {
                if idx.len() > 2 {
                    return Err(self.err(s.name.span(), "set.name", format!("`{}`: at most two indices (name[i] or name[i][j])", s.name.get_ref())));
                }
                for i in idx {
                    self.expr(&s.name, i, "set.name")?;
                }
            }
        }
        for m in &d.map {
            self.check_each(m.each(), "map")?;
            for f in m.key.iter().chain(&m.value) {
                self.field(f, "map.key/value")?;
            }
        }
        for r in &d.resize {
            if r.array.is_some() == r.map.is_some() {
                return Err(self.err(r.len.span(), "resize", "name either `array` (a RESIZABLE_ARRAY) or `map` (its max_entries), not both or neither"));
            }
        }
        for m in &d.inner_map {
            self.check_each(m.each(), "inner_map")?;
            if !INNER_MAP_TYPES.iter().any(|(n, _)| n == m.ty.get_ref()) {
                let valid: Vec<&str> = INNER_MAP_TYPES.iter().map(|(n, _)| *n).collect();
                return Err(self.err(m.ty.span(), "inner_map.type", format!("`{}`: use one of {}", m.ty.get_ref(), valid.join(", "))));
            }
        }
        if let Some(a) = &d.arena_lib {
            super::arena_lib::check(self, a)?;
        }
        if let Some(l) = &d.layer_specs {
            if d.profile.positional.is_none() {
                return Err(self.err(l.default.span(), "layer_specs", "the specs come from the positional arguments: declare them with `positional = \"layer specs\"` under [profile]"));
            }
        }
        for sc in &d.syscall {
            self.check_each(sc.each(), "syscall")?;
            for a in &sc.args {
                self.field(a, "syscall.args")?;
            }
            if let Some(p) = &sc.phase {
                if !["load", "attach"].contains(&p.get_ref().as_str()) {
                    return Err(self.err(p.span(), "syscall.phase", format!("`{}`: use \"load\" (before attach) or \"attach\" (right after)", p.get_ref())));
                }
            }
            if let Some(p) = &sc.on_error {
                if !["fail", "warn"].contains(&p.get_ref().as_str()) {
                    return Err(self.err(p.span(), "syscall.on_error", format!("`{}`: use \"fail\" or \"warn\"", p.get_ref())));
                }
            }
        }
        Ok(())
    }

    fn expr<T>(&self, at: &Spanned<T>, src: &str, field: &str) -> Result<super::expr::Expr, ProfileError> {
        super::expr::parse(src).map_err(|m| self.err(at.span(), field, format!("in `{}`: {m}", src.trim())))
    }

    fn field(&self, f: &Spanned<String>, field: &str) -> Result<(), ProfileError> {
        let (ty, _, e) = split_field(f.get_ref()).map_err(|m| self.err(f.span(), field, m))?;
        if super::resolve::c_type(ty).is_none() {
            return Err(self.err(
                f.span(),
                field,
                format!("unknown type `{ty}`; use one of {}", super::resolve::C_TYPES.iter().map(|t| t.0).collect::<Vec<_>>().join(", ")),
            ));
        }
        self.expr(f, e, field).map(|_| ())
    }

    fn check_each(&self, e: Each<'_>, what: &str) -> Result<(), ProfileError> {
        if let Some(r) = e.repeat {
            let (_, a, b) = split_range(r.get_ref()).ok_or_else(|| {
                self.err(r.span(), &format!("{what}.repeat"), format!("`{}`: write a range \"NAME in FIRST..END\"", r.get_ref()))
            })?;
            self.expr(r, a, &format!("{what}.repeat"))?;
            self.expr(r, b, &format!("{what}.repeat"))?;
        }
        if let Some(f) = e.each {
            match split_range(f.get_ref()) {
                Some((_, a, b)) => {
                    self.expr(f, a, &format!("{what}.for"))?;
                    self.expr(f, b, &format!("{what}.for"))?;
                }
                None if LOOPS.contains(&f.get_ref().as_str()) => {}
                None => {
                    return Err(self.err(
                        f.span(),
                        &format!("{what}.for"),
                        format!("`{}`: loop over one of {}, or a range \"NAME in FIRST..END\"", f.get_ref(), LOOPS.join(", ")),
                    ))
                }
            }
        }
        for (x, n) in [(e.when, "when"), (e.order, "order")] {
            if let Some(x) = x {
                self.expr(x, x.get_ref(), &format!("{what}.{n}"))?;
            }
        }
        Ok(())
    }
}

/// Flag value types.
pub const FLAG_TYPES: &[&str] = &["bool", "u32", "u64", "i32", "i64", "f64", "string"];
/// What `for` can loop over.
pub const LOOPS: &[&str] = &["cpu", "llc", "node", "core"];

/// 1-based line of byte `at` in `text`.
pub fn line_of(text: &str, at: usize) -> usize {
    text.as_bytes()[..at.min(text.len())].iter().filter(|&&b| b == b'\n').count() + 1
}

/// The line numbers of one text's byte offsets, as [`line_of`] counts
/// them, found by a binary search over the text's newlines.
pub(crate) struct Lines(Vec<usize>);

impl Lines {
    /// The newlines of `text`.
    pub(crate) fn new(text: &str) -> Lines {
        Lines(text.bytes().enumerate().filter(|&(_, b)| b == b'\n').map(|(i, _)| i).collect())
    }

    /// The 1-based line of byte `at` (`line_of(text, at)`).
    pub(crate) fn line_of(&self, at: usize) -> usize {
        self.0.partition_point(|&n| n < at) + 1
    }
}

/// `"q in 0..n"` -> ("q", "0", "n").
pub fn split_range(s: &str) -> Option<(&str, &str, &str)> {
    let (var, range) = s.split_once(" in ")?;
    let (a, b) = range.split_once("..")?;
    let var = var.trim();
    (!var.is_empty() && var.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')).then_some((var, a.trim(), b.trim()))
}

/// `"NAME if COND"` -> (NAME, Some(COND)).
pub fn split_if(s: &str) -> (&str, Option<&str>) {
    match s.split_once(" if ") {
        Some((a, b)) => (a.trim(), Some(b.trim())),
        None => (s.trim(), None),
    }
}

/// `"name[expr]"` -> ("name", ["expr"]), `"name[a][b]"` (a two-dimensional
/// array) -> ("name", ["a", "b"]); None without an index. Expressions have
/// no brackets of their own.
/// The index expressions of a target written with brackets anywhere
/// (`cpdom_ctxs[d].neighbor_ids[k * 128 + i]`): the text before each
/// bracket and the expression inside, then the text after the last one.
pub fn bracket_exprs(s: &str) -> Option<(Vec<(&str, &str)>, &str)> {
    let mut out = Vec::new();
    let mut rest = s;
    while let Some(open) = rest.find('[') {
        let mut depth = 0;
        let close = rest[open..].char_indices().find_map(|(i, c)| {
            match c {
                '[' => depth += 1,
                ']' => {
                    depth -= 1;
                    if depth == 0 {
                        return Some(open + i);
                    }
                }
                _ => {}
            }
            None
        })?;
        out.push((&rest[..open], &rest[open + 1..close]));
        rest = &rest[close + 1..];
    }
    Some((out, rest))
}

/// Splits `NAME[A][B]` into the name and its index expressions; None when `s` has no index.
pub fn split_index(s: &str) -> Option<(&str, Vec<&str>)> {
    let open = s.find('[')?;
    let inner = s[open + 1..].trim_end().strip_suffix(']')?;
    Some((s[..open].trim(), inner.split("][").collect()))
}

/// `"s32 cpu_id = cpu"` -> ("s32", "cpu_id", "cpu").
pub(crate) fn split_field(s: &str) -> Result<(&str, &str, &str), String> {
    let bad = || format!("`{s}`: write a field as \"TYPE NAME = EXPRESSION\", e.g. \"s32 cpu_id = cpu\"");
    let (decl, e) = s.split_once('=').ok_or_else(bad)?;
    let mut w = decl.split_whitespace();
    let (ty, name) = (w.next().ok_or_else(bad)?, w.next().unwrap_or(""));
    if w.next().is_some() {
        return Err(bad());
    }
    Ok((ty, name, e.trim()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_count_as_line_of_does() {
        for text in ["", "\n", "a", "a\n", "ab\ncd\n\nef", "\n\nx\n\n", "[p]\nk = 1\r\nj = 2\n"] {
            let lines = Lines::new(text);
            for at in 0..text.len() + 3 {
                assert_eq!(lines.line_of(at), line_of(text, at), "{text:?} at {at}");
            }
        }
        let lines = Lines::new("a\nbb\n\nc");
        let got: Vec<usize> = (0..8).map(|at| lines.line_of(at)).collect();
        assert_eq!(got, [1, 1, 2, 2, 2, 3, 4, 4]);
    }
}
