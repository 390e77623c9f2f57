//! Finding what a scheduler defines, from its preprocessed source.
//!
//! libbpf learns a BPF object's maps, rodata, struct_ops and programs from
//! ELF sections and BTF. A natively compiled object has neither, so the
//! loader runs the preprocessor once with `-D__SCHEDLAB_SCAN__`, where the
//! shim's `SEC(x)` expands to the marker `__schedlab_sec(x)` and
//! `__kconfig` to `__schedlab_kconfig`, and reads the top-level
//! declarations of the result:
//!
//! - `struct { ... } NAME __schedlab_sec(".maps") [= { .values = {...} }];`
//!   is a map; its members (`type`, `key`, `value`, `key_size`,
//!   `value_size`, `max_entries`, `map_flags`, `values`) are recorded by
//!   name only. Their values are not parsed: the shim keeps libbpf's
//!   encoding (`__uint(x, N)` is `int (*x)[N]`, `__type(x, T)` is `T *x`),
//!   so the generated descriptor has the compiler compute them with sizeof.
//! - `const volatile T NAME [= ...];` is rodata.
//! - any other scalar object in .bss or .data is a global the scheduler
//!   writes (its counters, as user space reads them from the object's
//!   .bss/.data maps).
//! - `struct sched_ext_ops NAME = {...};` is an ops table (`struct
//!   sched_ext_ops_cid`: a cid-form one).
//! - a function carrying `__schedlab_sec("syscall")` is a syscall program.
//! - `extern T NAME __schedlab_kconfig;` gets a weak zero definition.
//!
//! [`generate`] then writes the C descriptor table compiled after the
//! scheduler in the same translation unit, so static definitions work too.

use std::fmt::Write;

#[derive(Clone, Debug, PartialEq, Eq)]
struct Tok {
    text: String,
    ident: bool,
}

fn tokenize(src: &str) -> Vec<Tok> {
    let b = src.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    let mut line_start = true;
    while i < b.len() {
        let c = b[i];
        if c == b'\n' {
            line_start = true;
            i += 1;
            continue;
        }
        if c.is_ascii_whitespace() {
            i += 1;
            continue;
        }
        // Line markers and pragmas left by the preprocessor.
        if c == b'#' && line_start {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
            continue;
        }
        line_start = false;
        let start = i;
        if c.is_ascii_alphabetic() || c == b'_' {
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            out.push(Tok { text: src[start..i].to_string(), ident: true });
        } else if c.is_ascii_digit() {
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_' || b[i] == b'.') {
                i += 1;
            }
            out.push(Tok { text: src[start..i].to_string(), ident: false });
        } else if c == b'"' || c == b'\'' {
            i += 1;
            while i < b.len() && b[i] != c {
                i += if b[i] == b'\\' { 2 } else { 1 };
            }
            i = (i + 1).min(b.len());
            out.push(Tok { text: src[start..i].to_string(), ident: false });
        } else {
            let two = if i + 1 < b.len() { &src[i..i + 2] } else { "" };
            let n =
                if ["->", "<<", ">>", "<=", ">=", "==", "!=", "&&", "||", "++", "--"].contains(&two) { 2 } else { 1 };
            i += n;
            out.push(Tok { text: src[start..i].to_string(), ident: false });
        }
    }
    out
}

/// A map found in the source.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct ScannedMap {
    pub name: String,
    /// Member names of the definition (`type`, `key`, `max_entries`, ...).
    pub members: Vec<String>,
    /// Static ARRAY_OF_MAPS contents: (slot expression, inner map name).
    pub slots: Vec<(String, String)>,
    /// Special fields of the value type (kptrs, locks, timers, list and
    /// rbtree heads, refcounts), as member paths (`cpumask`, `a.lock`).
    pub special: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct ScannedRodata {
    pub name: String,
    /// The declaration's type words, for messages (`const volatile u64`).
    pub type_text: String,
    /// Array dimensions (0 for a scalar).
    pub dims: usize,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct Scan {
    pub maps: Vec<ScannedMap>,
    pub rodata: Vec<ScannedRodata>,
    /// .bss/.data objects: scalars and one-dimensional arrays.
    pub globals: Vec<ScannedRodata>,
    pub ops: Vec<String>,
    /// For each of `ops`: a `struct sched_ext_ops_cid` (the 7.3 cid form).
    pub ops_cid: Vec<bool>,
    pub syscalls: Vec<String>,
    /// `SEC("tp_btf/NAME")` programs: (function, tracepoint NAME).
    pub tracing: Vec<(String, String)>,
    pub kconfig: Vec<String>,
    /// Symbols tested with bpf_ksym_exists().
    pub ksym_tested: Vec<String>,
    /// RESIZABLE_ARRAY()s: arrays alone in a `.data.NAME` / `.bss.NAME`
    /// section of their own name (libbpf resizes such a section's map).
    pub resizable: Vec<String>,
    /// `__arena_global` objects (section `.addr_space.1`): libbpf places
    /// them in the arena; here they are compiled like a resizable array,
    /// through a pointer the host points into the arena.
    pub arena_globals: Vec<String>,
    /// Globals of type `struct bpf_cpumask` (or arrays of it), which BPF
    /// passes to the cpumask kfuncs directly (scx_lavd's cpdom_cpumask[]).
    pub cpumask_globals: Vec<String>,
}

/// Splits the token stream into top-level items: declarations ending in
/// `;` and function definitions ending with their body's `}`.
fn items(toks: &[Tok]) -> Vec<&[Tok]> {
    let mut out = Vec::new();
    let (mut start, mut depth, mut parens) = (0usize, 0i32, 0i32);
    let mut fn_body = false;
    for (i, t) in toks.iter().enumerate() {
        match t.text.as_str() {
            "(" => parens += 1,
            ")" => parens -= 1,
            "{" => {
                if depth == 0 && parens == 0 {
                    fn_body = i > start && toks[i - 1].text == ")" && !toks[start..i].iter().any(|t| t.text == "=");
                }
                depth += 1;
            }
            "}" => {
                depth -= 1;
                if depth == 0 && fn_body {
                    out.push(&toks[start..=i]);
                    start = i + 1;
                    fn_body = false;
                }
            }
            ";" if depth == 0 && parens == 0 => {
                out.push(&toks[start..=i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out
}

/// Index of the token closing the group opened at `open`.
fn close_of(toks: &[Tok], open: usize) -> usize {
    let (o, c) = match toks[open].text.as_str() {
        "(" => ("(", ")"),
        "[" => ("[", "]"),
        _ => ("{", "}"),
    };
    let mut d = 0;
    for (i, t) in toks.iter().enumerate().skip(open) {
        if t.text == o {
            d += 1;
        } else if t.text == c {
            d -= 1;
            if d == 0 {
                return i;
            }
        }
    }
    toks.len() - 1
}

/// The item without attribute groups and markers; returns the removed
/// section names too.
fn strip_attrs(item: &[Tok]) -> (Vec<Tok>, Vec<String>) {
    let (mut out, mut secs) = (Vec::new(), Vec::new());
    let mut i = 0;
    while i < item.len() {
        let t = &item[i].text;
        let is_group = matches!(t.as_str(), "__attribute__" | "__attribute" | "__schedlab_sec" | "__declspec");
        if is_group && i + 1 < item.len() && item[i + 1].text == "(" {
            let end = close_of(item, i + 1);
            if t == "__schedlab_sec" && i + 2 < end {
                // Adjacent literals concatenate: SEC("." "data" "." "x").
                let lit: String = item[i + 2..end].iter().map(|t| t.text.trim_matches('"')).collect();
                secs.push(lit);
            }
            // LLVM places an address_space(1) global in the arena's
            // section (what `__arena_global` means under
            // __BPF_FEATURE_ADDR_SPACE_CAST); GCC ignores the attribute.
            let group: Vec<&str> = item[i + 1..end].iter().map(|t| t.text.as_str()).collect();
            if group.windows(4).any(|w| w == ["address_space", "(", "1", ")"]) {
                secs.push(".addr_space.1".into());
            }
            i = end + 1;
            continue;
        }
        out.push(item[i].clone());
        i += 1;
    }
    (out, secs)
}

/// The declared name of `decl` (type + declarator, no initializer), and the
/// number of array dimensions after it.
fn declarator_name(decl: &[Tok]) -> Option<(String, usize)> {
    let mut end = decl.len();
    let mut dims = 0;
    while end > 0 && decl[end - 1].text == "]" {
        let mut d = 0;
        let mut j = end;
        while j > 0 {
            j -= 1;
            match decl[j].text.as_str() {
                "]" => d += 1,
                "[" => {
                    d -= 1;
                    if d == 0 {
                        break;
                    }
                }
                _ => {}
            }
        }
        end = j;
        dims += 1;
    }
    let t = decl.get(end.checked_sub(1)?)?;
    t.ident.then(|| (t.text.clone(), dims))
}

/// Splits at `sep` tokens at bracket depth 0: the pieces before each
/// separator, and what follows the last one.
fn split_top<'a>(toks: &'a [Tok], sep: &str) -> (Vec<&'a [Tok]>, &'a [Tok]) {
    let (mut out, mut start, mut d) = (Vec::new(), 0, 0);
    for (i, t) in toks.iter().enumerate() {
        match t.text.as_str() {
            "(" | "[" | "{" => d += 1,
            ")" | "]" | "}" => d -= 1,
            s if s == sep && d == 0 => {
                out.push(&toks[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    (out, &toks[start..])
}

/// Splits at commas at nesting depth 0.
fn split_commas(toks: &[Tok]) -> Vec<&[Tok]> {
    let (mut out, rest) = split_top(toks, ",");
    out.push(rest);
    out
}

fn member_names(body: &[Tok]) -> Vec<String> {
    let mut out = Vec::new();
    for m in body.split(|t| t.text == ";").filter(|m| !m.is_empty()) {
        // `int (*name)[N]`: the identifier after `( *`.
        if let Some(i) = m.windows(3).position(|w| w[0].text == "(" && w[1].text == "*" && w[2].ident) {
            out.push(m[i + 2].text.clone());
            continue;
        }
        // Otherwise the last identifier outside (), [] and {}.
        let (mut d, mut last) = (0, None);
        for t in m {
            match t.text.as_str() {
                "(" | "[" | "{" => d += 1,
                ")" | "]" | "}" => d -= 1,
                _ if d == 0 && t.ident => last = Some(t.text.clone()),
                _ => {}
            }
        }
        out.extend(last);
    }
    out
}

/// `{ .values = { [0] = &a, &b } }` -> [("0", "a"), ("(0) + 1", "b")].
fn array_of_maps_slots(init: &[Tok]) -> Vec<(String, String)> {
    let Some(v) =
        init.windows(4).position(|w| w[0].text == "." && w[1].text == "values" && w[2].text == "=" && w[3].text == "{")
    else {
        return Vec::new();
    };
    let open = v + 3;
    let close = close_of(init, open);
    let mut out = Vec::new();
    let mut next = "0".to_string();
    for e in split_commas(&init[open + 1..close]) {
        let Some(amp) = e.iter().position(|t| t.text == "&") else { continue };
        let Some(name) = e.get(amp + 1).filter(|t| t.ident) else { continue };
        let slot = if e.first().is_some_and(|t| t.text == "[") {
            let c = close_of(e, 0);
            e[1..c].iter().map(|t| t.text.as_str()).collect::<Vec<_>>().join(" ")
        } else {
            next.clone()
        };
        next = format!("({slot}) + 1");
        out.push((slot, name.text.clone()));
    }
    out
}

/// Struct and union bodies by tag.
type Bodies = std::collections::BTreeMap<String, Vec<Tok>>;

/// The body of `struct TAG` / `union TAG` named in type words `ty`, if
/// the source defines it.
fn struct_tag_body<'a>(ty: &[Tok], bodies: &'a Bodies) -> Option<&'a [Tok]> {
    let p = ty.iter().position(|t| t.text == "struct" || t.text == "union")?;
    bodies.get(&ty.get(p + 1)?.text).map(|b| b.as_slice())
}

/// The member declarations of a struct body (each ended by `;`), without
/// bit-fields (a `:` at depth 0).
fn split_members(body: &[Tok]) -> Vec<&[Tok]> {
    let mut members = split_top(body, ";").0;
    members.retain(|m| !m.is_empty() && split_top(m, ":").0.is_empty());
    members
}

/// BPF objects that are fields of a value type's btf_record (besides
/// kptrs): map updates leave them alone.
const SPECIAL_TYPES: [&str; 10] = [
    "bpf_spin_lock",
    "bpf_res_spin_lock",
    "bpf_timer",
    "bpf_wq",
    "bpf_task_work",
    "bpf_list_head",
    "bpf_list_node",
    "bpf_rb_root",
    "bpf_rb_node",
    "bpf_refcount",
];

/// The special fields of a map's value type, from the map definition's
/// body (`__type(value, struct TAG)` is `__typeof__(struct TAG) *value`).
fn value_special(map_body: &[Tok], bodies: &Bodies) -> Vec<String> {
    let mut out = Vec::new();
    for m in split_members(map_body) {
        let n = m.len();
        if n < 6 || m[n - 1].text != "value" || m[n - 2].text != "*" || m[0].text != "__typeof__" || m[1].text != "(" {
            continue;
        }
        let c = close_of(m, 1);
        if let Some(b) = struct_tag_body(&m[2..c], bodies) {
            special_fields(b, "", bodies, 0, &mut out);
        }
    }
    out
}

fn special_fields(body: &[Tok], prefix: &str, bodies: &Bodies, depth: usize, out: &mut Vec<String>) {
    if depth > 8 {
        return;
    }
    let path = |name: &str| if prefix.is_empty() { name.to_string() } else { format!("{prefix}.{name}") };
    for m in split_members(body) {
        if let Some(o) = m.iter().position(|t| t.text == "{") {
            let c = o + close_of(&m[o..], 0);
            let decls: Vec<&[Tok]> = split_commas(&m[c + 1..]).into_iter().filter(|d| !d.is_empty()).collect();
            if decls.is_empty() {
                special_fields(&m[o + 1..c], prefix, bodies, depth + 1, out);
            }
            for dcl in decls {
                if let Some((name, 0)) = declarator_name(dcl) {
                    special_fields(&m[o + 1..c], &path(&name), bodies, depth + 1, out);
                }
            }
            continue;
        }
        let kptr = m.iter().any(|t| t.text == "__schedlab_kptr");
        let decls = split_commas(m);
        let tag = decls[0].iter().position(|t| t.text == "struct" || t.text == "union").and_then(|p| decls[0].get(p + 1));
        let special_type = tag.is_some_and(|t| SPECIAL_TYPES.contains(&t.text.as_str()));
        let nested = struct_tag_body(decls[0], bodies);
        for dcl in decls {
            let Some((name, dims)) = declarator_name(dcl) else { continue };
            let pointer = dcl.iter().any(|t| t.text == "*");
            if kptr || (special_type && !pointer) {
                out.push(path(&name));
            } else if let (Some(b), false, 0) = (nested, pointer, dims) {
                special_fields(b, &path(&name), bodies, depth + 1, out);
            }
        }
    }
}

/// The members of a struct body as rodata `prefix.member` (nested
/// structs as `prefix.inner.member`; the members of an anonymous struct or
/// union member belong to the enclosing struct, as in C11). Bit-fields
/// are left out: their address cannot be taken, and no loader writes one
/// by name here.
fn struct_members(body: &[Tok], prefix: &str, bodies: &Bodies, depth: usize, out: &mut Vec<ScannedRodata>) {
    if depth > 8 {
        return;
    }
    for m in split_members(body) {
        if let Some(o) = m.iter().position(|t| t.text == "{") {
            // struct [TAG] { ... } [name[, name2]];
            let c = o + close_of(&m[o..], 0);
            let decls: Vec<&[Tok]> = split_commas(&m[c + 1..]).into_iter().filter(|d| !d.is_empty()).collect();
            if decls.is_empty() {
                struct_members(&m[o + 1..c], prefix, bodies, depth + 1, out);
            }
            for dcl in decls {
                if let Some((name, 0)) = declarator_name(dcl) {
                    struct_members(&m[o + 1..c], &format!("{prefix}.{name}"), bodies, depth + 1, out);
                }
            }
            continue;
        }
        let decls = split_commas(m);
        let nested = struct_tag_body(decls[0], bodies);
        for dcl in decls {
            let Some((name, dims)) = declarator_name(dcl) else { continue };
            let path = format!("{prefix}.{name}");
            match nested {
                Some(b) if dims == 0 && !dcl.iter().any(|t| t.text == "*") => {
                    struct_members(b, &path, bodies, depth + 1, out)
                }
                _ => out.push(ScannedRodata { name: path, type_text: String::new(), dims }),
            }
        }
    }
}

/// Reads the preprocessed (scan-mode) source.
pub(super) fn scan(preprocessed: &str) -> Scan {
    let toks = tokenize(preprocessed);
    let mut s = Scan::default();
    for w in toks.windows(3) {
        if w[0].text == "__schedlab_ksym_exists" && w[1].text == "(" && w[2].ident && !s.ksym_tested.contains(&w[2].text) {
            s.ksym_tested.push(w[2].text.clone());
        }
    }
    let mut tags: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    // Struct and union bodies by tag, for rodata of a named struct type.
    let mut bodies: Bodies = Default::default();
    for item in items(&toks) {
        let (t, secs) = strip_attrs(item);
        if t.is_empty() {
            continue;
        }
        let words: Vec<&str> = t.iter().map(|t| t.text.as_str()).collect();
        let is_extern = words.contains(&"extern");
        let is_typedef = words.contains(&"typedef");
        let marked_kconfig = item.iter().any(|t| t.text == "__schedlab_kconfig");

        if marked_kconfig && is_extern {
            let decl: Vec<Tok> =
                t.iter().filter(|t| t.text != "__schedlab_kconfig" && t.text != ";").cloned().collect();
            if let Some((name, _)) = declarator_name(&decl) {
                if !s.kconfig.contains(&name) {
                    s.kconfig.push(name);
                }
            }
            continue;
        }
        if is_extern || is_typedef {
            continue;
        }
        if let Some(tp) = secs.iter().find_map(|x| x.strip_prefix("tp_btf/")) {
            if let Some(p) = t.iter().position(|t| t.text == "(") {
                if p > 0 && t[p - 1].ident {
                    s.tracing.push((t[p - 1].text.clone(), tp.trim_end_matches('?').to_string()));
                }
            }
            continue;
        }
        if secs.iter().any(|x| x == "syscall") {
            if let Some(p) = t.iter().position(|t| t.text == "(") {
                if p > 0 && t[p - 1].ident && !s.syscalls.contains(&t[p - 1].text) {
                    s.syscalls.push(t[p - 1].text.clone());
                }
            }
            continue;
        }
        // `struct TAG { ... }` anywhere at the start: remember the members,
        // for maps declared later as `struct TAG name SEC(".maps")`.
        let open = t.iter().position(|t| t.text == "{");
        if let (Some(o), Some(1)) = (open, t.iter().position(|t| t.text == "struct").map(|p| p + 1)) {
            if o == 2 && t[1].ident {
                tags.insert(t[1].text.clone(), member_names(&t[o + 1..close_of(&t, o)]));
            }
        }
        // Struct and union bodies under their tags (`struct TAG { ... }`
        // wherever it appears in the item).
        for (i, w) in t.windows(3).enumerate() {
            if matches!(w[0].text.as_str(), "struct" | "union") && w[1].ident && w[2].text == "{" {
                let c = close_of(&t, i + 2);
                bodies.entry(w[1].text.clone()).or_insert_with(|| t[i + 3..c].to_vec());
            }
        }
        if secs.iter().any(|x| x == ".maps") {
            // struct [TAG] { members } NAME [= init] [, NAME2 ...];  or  struct TAG NAME ...;
            let (members, decls_from, body) = match open {
                Some(o) => {
                    let c = close_of(&t, o);
                    (member_names(&t[o + 1..c]), c + 1, Some(&t[o + 1..c]))
                }
                None => match t.iter().position(|t| t.text == "struct") {
                    Some(p) if t.get(p + 1).is_some_and(|t| t.ident) => {
                        let tag = &t[p + 1].text;
                        (tags.get(tag).cloned().unwrap_or_default(), p + 2, bodies.get(tag).map(|b| b.as_slice()))
                    }
                    _ => continue,
                },
            };
            let special = body.map(|b| value_special(b, &bodies)).unwrap_or_default();
            for d in split_commas(&t[decls_from..t.len() - 1]) {
                let eq = d.iter().position(|t| t.text == "=");
                if let Some((name, _)) = declarator_name(&d[..eq.unwrap_or(d.len())]) {
                    let slots = eq.map(|e| array_of_maps_slots(&d[e + 1..])).unwrap_or_default();
                    s.maps.push(ScannedMap { name, members: members.clone(), slots, special: special.clone() });
                }
            }
            continue;
        }
        // Everything below is a plain object definition.
        if t.last().is_some_and(|t| t.text == "}") {
            continue; // function definition
        }
        let body = &t[..t.len() - 1];
        let ops_struct = |w: &[&str]| w[0] == "struct" && matches!(w[1], "sched_ext_ops" | "sched_ext_ops_cid") && w[2] != "{";
        if let Some(i) = words.windows(3).position(ops_struct) {
            let after = t.get(i + 2);
            let next = t.get(i + 3).map(|t| t.text.as_str());
            if let (Some(name), Some("=" | ";" | ",")) = (after.filter(|t| t.ident), next) {
                s.ops.push(name.text.clone());
                s.ops_cid.push(words[i + 1] == "sched_ext_ops_cid");
            }
            continue;
        }
        let decls = split_commas(body);
        let first = decls[0];
        let eq0 = first.iter().position(|t| t.text == "=").unwrap_or(first.len());
        let head = &first[..eq0];
        let (has_const, has_volatile) =
            (head.iter().any(|t| t.text == "const"), head.iter().any(|t| t.text == "volatile"));
        if has_const && has_volatile {
            // `const volatile struct [TAG] { ... } NAME;`: the struct, and
            // each of its members as `NAME.member` (a skeleton's loader
            // writes `rodata->NAME.member`).
            if let Some(o) = head.iter().position(|t| t.text == "{") {
                if head[..o].iter().any(|t| t.text == "struct" || t.text == "union") {
                    let c = o + close_of(&head[o..], 0);
                    if let Some((name, dims)) = declarator_name(&head[c + 1..]) {
                        let type_text = "const volatile struct".to_string();
                        s.rodata.push(ScannedRodata { name: name.clone(), type_text, dims });
                        if dims == 0 {
                            struct_members(&head[o + 1..c], &name, &bodies, 0, &mut s.rodata);
                        }
                    }
                    continue;
                }
            }
        }
        if head.iter().any(|t| t.text == "(" || t.text == "{") {
            continue;
        }
        if !has_const {
            let bpf_cpumask = head.windows(2).any(|w| w[0].text == "struct" && w[1].text == "bpf_cpumask");
            if bpf_cpumask && !head.iter().any(|t| t.text == "*") {
                for d in &decls {
                    let eq = d.iter().position(|t| t.text == "=").unwrap_or(d.len());
                    if let Some((name, 0..=1)) = declarator_name(&d[..eq]) {
                        s.cpumask_globals.push(name);
                    }
                }
                continue;
            }
            if let ([sec], [d]) = (secs.as_slice(), decls.as_slice()) {
                let eq = d.iter().position(|t| t.text == "=").unwrap_or(d.len());
                if sec == ".addr_space.1" {
                    if let Some((name, _)) = declarator_name(&d[..eq]) {
                        s.arena_globals.push(name);
                    }
                    continue;
                }
                if let Some((name, 1..)) = declarator_name(&d[..eq]) {
                    if *sec == format!(".data.{name}") || *sec == format!(".bss.{name}") {
                        s.resizable.push(name);
                        continue;
                    }
                }
            }
            // A writable global; custom sections (private(X): ".data.X")
            // are separate maps in BPF and are left out, as is .rodata.
            if secs.iter().all(|x| x == ".data" || x == ".bss") {
                for (i, d) in decls.iter().enumerate() {
                    let eq = d.iter().position(|t| t.text == "=").unwrap_or(d.len());
                    let Some((name, dims @ 0..=1)) = declarator_name(&d[..eq]) else { continue };
                    // `struct tag;` declares a type, not an object; the
                    // declarators after the first (`u64 a, b;`) share its type.
                    let at = d[..eq].iter().rposition(|t| t.text == name).unwrap_or(0);
                    let tag = at > 0 && matches!(d[at - 1].text.as_str(), "struct" | "union" | "enum");
                    if !tag && (at > 0 || i > 0) {
                        s.globals.push(ScannedRodata { name, type_text: String::new(), dims });
                    }
                }
            }
            continue;
        }
        if !has_volatile {
            continue;
        }
        let Some((name0, dims0)) = declarator_name(head) else { continue };
        // RESIZABLE_ARRAY(rodata, NAME): a const array alone in
        // `.rodata.NAME`, which the loader resizes before load.
        if let ([sec], [_]) = (secs.as_slice(), decls.as_slice()) {
            if dims0 >= 1 && *sec == format!(".rodata.{name0}") {
                s.resizable.push(name0);
                continue;
            }
        }
        let name_at = head.iter().rposition(|t| t.text == name0).unwrap_or(0);
        let type_text =
            head[..name_at].iter().filter(|t| t.ident).map(|t| t.text.as_str()).collect::<Vec<_>>().join(" ");
        s.rodata.push(ScannedRodata { name: name0.clone(), type_text: type_text.clone(), dims: dims0 });
        if let Some(body) = struct_tag_body(&head[..name_at], &bodies).filter(|_| dims0 == 0) {
            struct_members(body, &name0, &bodies, 0, &mut s.rodata);
        }
        for d in &decls[1..] {
            let eq = d.iter().position(|t| t.text == "=").unwrap_or(d.len());
            if let Some((name, dims)) = declarator_name(&d[..eq]) {
                s.rodata.push(ScannedRodata { name, type_text: type_text.clone(), dims });
            }
        }
    }
    s
}

fn c_str(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

/// Which object of a multi-object build a descriptor unit describes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Part<'a> {
    /// The main object; `others` are the scans of the other objects (parts
    /// 1..), whose tables it appends to its own when the object is loaded.
    Main { others: &'a [Scan] },
    /// Another object the build links (`.add_source()`), numbered from 1.
    Other(usize),
}

/// Table entry counts of a scan: maps, slots, rodata, globals, ops, progs,
/// special fields of map values.
fn counts(s: &Scan) -> [usize; 7] {
    let globals = s.globals.len() + s.resizable.len() + s.arena_globals.len() + s.cpumask_globals.len();
    let fields = s.maps.iter().map(|m| m.special.len()).sum();
    [s.maps.len(), s.maps.iter().map(|m| m.slots.len()).sum(), s.rodata.len(), globals, s.ops.len(), s.syscalls.len() + s.tracing.len(), fields]
}

const TABLES: [(&str, &str); 7] = [
    ("maps", "schedlab_map_desc"),
    ("slots", "schedlab_map_slot"),
    ("rodata", "schedlab_rodata_desc"),
    ("globals", "schedlab_rodata_desc"),
    ("ops", "schedlab_ops_desc"),
    ("progs", "schedlab_prog_desc"),
    ("fields", "schedlab_map_field"),
];

/// The descriptor unit: the scheduler source included first, then the
/// tables the loader reads through `schedlab_attach()`.
///
/// A multi-object build (the BPF static linker's job in scx) compiles each
/// object as its own translation unit, so statics stay private to it and
/// globals and maps link by name. Each other object's unit exports its
/// tables (`__schedlab_maps_1`, ...); the main unit's tables have room for
/// all of them and a constructor, run when the object is opened, appends
/// them (renumbering ARRAY_OF_MAPS slots to the merged map table).
///
/// `linked` names the RESIZABLE_ARRAY()s every object of the build defines
/// (one object defines scx's `uei_dump` through UEI_DEFINE(), others
/// declare it `extern char uei_dump[]`): each unit refers to them through
/// the same pointer the defining unit gets, as the BPF linker resolves an
/// extern to the one definition.
pub(super) fn generate(scan: &Scan, source: &str, abi_header: &str, part: Part, linked: &[String]) -> Result<String, String> {
    let mut c = String::new();
    let _ = writeln!(c, "/* Generated by schedlab's loader; see host/scan.rs. */");
    if let Part::Other(k) = part {
        // Every object may carry the license; BPF's linker merges them.
        let _ = writeln!(c, "#define _license __schedlab_license_{k}\n#define _version __schedlab_version_{k}");
    }
    // A RESIZABLE_ARRAY() becomes a pointer to storage the host sizes at
    // load (host::resizable); every use indexes through it.
    let mut names: Vec<&String> = scan.resizable.iter().chain(&scan.arena_globals).chain(linked).collect();
    names.sort();
    names.dedup();
    for r in names {
        let _ = writeln!(c, "#define {r} (*__schedlab_resizable_{r})");
    }
    let _ = writeln!(c, "#include {}", c_str(source));
    let _ = writeln!(c, "#include {}", c_str(abi_header));
    for k in &scan.kconfig {
        let _ = writeln!(c, "__attribute__((weak)) __typeof__({k}) {k};");
    }
    let (suffix, others) = match part {
        Part::Main { others } => (String::new(), others),
        Part::Other(k) => (format!("_{k}"), &[][..]),
    };
    let mine = counts(scan);
    let mut total = mine;
    for o in others {
        for (t, n) in total.iter_mut().zip(counts(o)) {
            *t += n;
        }
    }
    // Main tables are private and sized for every object; the others'
    // are visible to the main unit (hidden outside the shared object).
    let open = |c: &mut String, i: usize| {
        let (name, ty) = TABLES[i];
        let _ = match part {
            Part::Main { .. } => writeln!(c, "static struct {ty} __schedlab_{name}[{} + 1] = {{", total[i]),
            Part::Other(_) => writeln!(c, "struct {ty} __schedlab_{name}{suffix}[] = {{"),
        };
    };

    let map_index = |n: &str| scan.maps.iter().position(|m| m.name == n);
    open(&mut c, 0);
    for m in &scan.maps {
        let n = &m.name;
        let has = |x: &str| m.members.iter().any(|y| y == x);
        if !has("type") {
            return Err(format!("map `{n}` has no __uint(type, ...)"));
        }
        let ints = |x: &str| format!("(u32)(sizeof(*{n}.{x}) / sizeof(int))");
        let key = if has("key") {
            format!("(u32)sizeof(*{n}.key)")
        } else if has("key_size") {
            ints("key_size")
        } else {
            "0".into()
        };
        let value = if has("value") {
            format!("(u32)sizeof(*{n}.value)")
        } else if has("value_size") {
            ints("value_size")
        } else if has("values") {
            "(u32)sizeof(void *)".into()
        } else {
            "0".into()
        };
        let max = if has("max_entries") { ints("max_entries") } else { "0".into() };
        let flags = if has("map_flags") { ints("map_flags") } else { "0".into() };
        let _ = writeln!(c, "\t{{ {}, (void *)&{n}, {}, {key}, {value}, {max}, {flags}, 0 }},", c_str(n), ints("type"));
    }
    let _ = writeln!(c, "\t{{ 0 }}\n}};");

    open(&mut c, 1);
    for (oi, m) in scan.maps.iter().enumerate() {
        for (slot, inner) in &m.slots {
            if map_index(inner).is_none() {
                return Err(format!("map `{}`: `{inner}` in .values is not a map", m.name));
            }
            let _ = writeln!(c, "\t{{ {oi}, (u32)({slot}), (void *)&{inner} }},");
        }
    }
    let _ = writeln!(c, "\t{{ 0 }}\n}};");

    let kind = |x: &str| {
        format!(
            "_Generic(({x}), _Bool: 1, char: 4, signed char: 2, short: 2, int: 2, long: 2, long long: 2, \
             unsigned char: 3, unsigned short: 3, unsigned int: 3, unsigned long: 3, unsigned long long: 3, default: 5)"
        )
    };
    open(&mut c, 2);
    for r in &scan.rodata {
        let n = &r.name;
        let line = match r.dims {
            0 => format!("{{ {}, (void *)&{n}, sizeof({n}), sizeof({n}), {}, 0 }}", c_str(n), kind(n)),
            1 => format!(
                "{{ {}, (void *)&{n}, sizeof({n}), sizeof({n}[0]), {}, sizeof({n}) / sizeof({n}[0]) }}",
                c_str(n),
                kind(&format!("{n}[0]"))
            ),
            2 => format!(
                "{{ {}, (void *)&{n}, sizeof({n}), sizeof({n}[0][0]), {}, sizeof({n}) / sizeof({n}[0][0]), \
                 sizeof({n}[0]) / sizeof({n}[0][0]) }}",
                c_str(n),
                kind(&format!("{n}[0][0]"))
            ),
            _ => format!("{{ {}, (void *)&{n}, sizeof({n}), sizeof({n}), 5, 0 }}", c_str(n)),
        };
        let _ = writeln!(c, "\t{line},");
    }
    let _ = writeln!(c, "\t{{ 0 }}\n}};");

    // Globals as user space reads them: only integers are counters (kind 2
    // or 3); the rest is listed with kind 5 and never read.
    open(&mut c, 3);
    for g in &scan.globals {
        let n = &g.name;
        let line = if g.dims == 1 {
            // One-dimensional arrays, for loaders that fill them per CPU.
            let k = kind(&format!("{n}[0]"));
            format!("{{ {}, (void *)&{n}, sizeof({n}), sizeof({n}[0]), {k}, sizeof({n}) / sizeof({n}[0]) }}", c_str(n))
        } else {
            format!("{{ {}, (void *)&{n}, sizeof({n}), sizeof({n}), {}, 0 }}", c_str(n), kind(n))
        };
        let _ = writeln!(c, "\t{line},");
    }
    for r in &scan.resizable {
        let p = format!("__schedlab_resizable_{r}");
        let _ = writeln!(c, "\t{{ {}, (void *)&{p}, sizeof({p}), sizeof((*{p})[0]), 6, 1, {} }},", c_str(r), kind(&format!("(*{p})[0]")));
    }
    for n in &scan.cpumask_globals {
        let _ = writeln!(c, "\t{{ {}, (void *)&{n}, sizeof({n}), sizeof(struct bpf_cpumask), 8, sizeof({n}) / sizeof(struct bpf_cpumask) }},", c_str(n));
    }
    for r in &scan.arena_globals {
        let p = format!("__schedlab_resizable_{r}");
        let _ = writeln!(c, "\t{{ {}, (void *)&{p}, sizeof({p}), sizeof(*{p}), 7, 1 }},", c_str(r));
    }
    let _ = writeln!(c, "\t{{ 0 }}\n}};");

    open(&mut c, 4);
    for (i, o) in scan.ops.iter().enumerate() {
        let cid = u32::from(scan.ops_cid.get(i).copied().unwrap_or(false));
        let _ = writeln!(c, "\t{{ {}, (struct sched_ext_ops *)&{o}, {cid} }},", c_str(o));
    }
    let _ = writeln!(c, "\t{{ 0 }}\n}};");

    open(&mut c, 5);
    for p in &scan.syscalls {
        let _ = writeln!(c, "\t{{ {}, (void *){p} }},", c_str(p));
    }
    // Tracing programs go in the same table, named by their attach point.
    for (p, tp) in &scan.tracing {
        let _ = writeln!(c, "\t{{ {}, (void *){p} }},", c_str(&format!("tp_btf/{tp}")));
    }
    let _ = writeln!(c, "\t{{ 0 }}\n}};");

    open(&mut c, 6);
    for (mi, m) in scan.maps.iter().enumerate() {
        let ty = format!("__typeof__(*{}.value)", m.name);
        for f in &m.special {
            let _ = writeln!(c, "\t{{ {mi}, (u32)__builtin_offsetof({ty}, {f}), (u32)sizeof((({ty} *)0)->{f}) }},");
        }
    }
    let _ = writeln!(c, "\t{{ 0 }}\n}};");

    if let Part::Other(_) = part {
        return Ok(c);
    }
    if !others.is_empty() {
        for (k, _) in others.iter().enumerate() {
            for (name, ty) in TABLES {
                let _ = writeln!(c, "extern struct {ty} __schedlab_{name}_{}[];", k + 1);
            }
        }
        let _ = writeln!(c, "__attribute__((constructor)) static void __schedlab_link_objects(void)\n{{\n\tu32 i;");
        let mut at = mine;
        for (k, o) in others.iter().enumerate() {
            let n = counts(o);
            for (t, (name, _)) in TABLES.iter().enumerate() {
                if n[t] == 0 {
                    continue;
                }
                let _ = writeln!(c, "\tfor (i = 0; i < {}; i++)", n[t]);
                let _ = writeln!(c, "\t\t__schedlab_{name}[{} + i] = __schedlab_{name}_{}[i];", at[t], k + 1);
                if *name == "slots" {
                    let _ = writeln!(c, "\tfor (i = 0; i < {}; i++)\n\t\t__schedlab_slots[{} + i].outer += {};", n[t], at[t], at[0]);
                }
                if *name == "fields" {
                    let _ = writeln!(c, "\tfor (i = 0; i < {}; i++)\n\t\t__schedlab_fields[{} + i].map += {};", n[t], at[t], at[0]);
                }
            }
            for (a, x) in at.iter_mut().zip(n) {
                *a += x;
            }
        }
        let _ = writeln!(c, "}}");
    }

    let _ = writeln!(
        c,
        "struct schedlab_module __schedlab_module = {{\n\
         \t.abi_version = SCHEDLAB_ABI_VERSION,\n\
         \t.sizeof_ops = sizeof(struct sched_ext_ops),\n\
         \t.sizeof_task = sizeof(struct task_struct),\n\
         \t.nr_maps = {}, .nr_map_slots = {}, .nr_rodata = {}, .nr_ops = {}, .nr_progs = {},\n\
         \t.maps = __schedlab_maps, .map_slots = __schedlab_slots, .rodata = __schedlab_rodata,\n\
         \t.ops = __schedlab_ops, .progs = __schedlab_progs,\n\
         \t.nr_globals = {}, .globals = __schedlab_globals,\n\
         \t.nr_map_fields = {}, .map_fields = __schedlab_fields,\n}};",
        total[0], total[1], total[2], total[4], total[5], total[3], total[6]
    );
    Ok(c)
}

#[cfg(test)]
#[path = "scan_tests.rs"]
mod tests;
