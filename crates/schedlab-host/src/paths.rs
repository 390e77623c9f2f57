//! Loader writes into members of arrays of structs, as a skeleton-based
//! loader writes `skel->bss->cpdom_ctxs[3].neighbor_ids[129] = 2` or
//! `layers[0].matches[1][0].kind = 3`.
//!
//! libbpf's loader knows where such a member is from the object's BTF. A
//! natively compiled object has no BTF, so the offsets and sizes come from
//! the compiler: a write target `NAME[i].a.b[j][k].c` (a path, told apart
//! by a member access after an index) becomes a template with every index
//! 0, and for each template the object records, as C constant
//! expressions, the size of every array level it indexes and the offset of
//! every member it names (see [`exprs`]). The host then computes the
//! address of any concrete write, checking each index against its level.

use super::HostedScheduler;
use crate::profile::expr::Value;

/// One `.member[i][j]` step of a path.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Step {
    member: String,
    index: Vec<u64>,
}

/// A parsed write target `NAME[i].a.b[j][k].c`.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Path {
    base: String,
    base_index: Vec<u64>,
    steps: Vec<Step>,
}

fn ident(s: &str) -> bool {
    !s.is_empty() && !s.starts_with(|c: char| c.is_ascii_digit()) && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// `name[1][2]` -> ("name", [1, 2]).
fn indexed(part: &str) -> Option<(String, Vec<u64>)> {
    let (name, mut rest) = part.split_once('[').map_or((part, ""), |(n, r)| (n, r));
    if !ident(name) {
        return None;
    }
    let mut idx = Vec::new();
    while !rest.is_empty() {
        let (n, after) = rest.split_once(']')?;
        idx.push(n.trim().parse().ok()?);
        rest = match after {
            "" => "",
            a => a.strip_prefix('[')?,
        };
    }
    Some((name.to_string(), idx))
}

/// Whether a write target is a path (a member of an array element).
pub(crate) fn is_path(target: &str) -> bool {
    target.contains("].")
}

fn parse(target: &str) -> Option<Path> {
    let mut parts = target.split('.');
    let (base, base_index) = indexed(parts.next()?)?;
    let steps = parts.map(|p| indexed(p).map(|(member, index)| Step { member, index })).collect::<Option<Vec<_>>>()?;
    (!steps.is_empty()).then_some(Path { base, base_index, steps })
}

/// What the object must record for writes like `target`: per array level
/// `sizeof` of the array and of its element, per member its offset in the
/// enclosing type, and the size of what is written, in that order.
fn template(p: &Path) -> Vec<String> {
    template_from(p.base.clone(), p.base_index.len(), &p.steps)
}

/// [`template`] from a base C expression with `levels` indices.
fn template_from(base: String, levels: usize, steps: &[Step]) -> Vec<String> {
    let mut out = Vec::new();
    let mut e = base;
    let level = |e: &mut String, n: usize, out: &mut Vec<String>| {
        for _ in 0..n {
            out.push(format!("sizeof({e})"));
            e.push_str("[0]");
            out.push(format!("sizeof({e})"));
        }
    };
    level(&mut e, levels, &mut out);
    for s in steps {
        out.push(format!("__builtin_offsetof(__typeof__({e}), {})", s.member));
        e = format!("{e}.{}", s.member);
        level(&mut e, s.index.len(), &mut out);
    }
    out.push(format!("sizeof({e})"));
    out
}

/// The shape of a path: its text without what is inside brackets
/// (`a[1].b[2][ 3 ].c` -> `a[].b[][].c`). Two paths that parse and have
/// one shape have one template (it depends on the names and on how many
/// indices each level has, not on their values).
pub(crate) fn shape(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    let mut inside = false;
    for c in path.chars() {
        match c {
            '[' => inside = true,
            ']' => inside = false,
            _ if inside => continue,
            _ => {}
        }
        out.push(c);
    }
    out
}

/// The C expression of a map's value type: `(*MAP.value)`.
fn map_value(map: &str) -> String {
    format!("(*{map}.value)")
}

/// The member path `.a[i].b` of a map value (see [`map_member_exprs`]).
fn member_steps(member: &str) -> Option<Vec<Step>> {
    let rest = member.strip_prefix('.')?;
    rest.split('.').map(|p| indexed(p).map(|(member, index)| Step { member, index })).collect()
}

/// The C constant expressions a write into member `member` (`.a[i].b`)
/// of map `map`'s value needs.
pub(crate) fn map_member_exprs(map: &str, member: &str) -> Vec<String> {
    member_steps(member).map(|s| template_from(map_value(map), 0, &s)).unwrap_or_default()
}

/// The C constant expressions a write to `target` needs (none when it is
/// not a path).
pub(crate) fn exprs(target: &str) -> Vec<String> {
    parse(target).map(|p| template(&p)).unwrap_or_default()
}

impl HostedScheduler {
    /// The values the object recorded for the template of writes of
    /// `shape` (`template` makes it), kept for the next write of the shape.
    fn template_values(&self, target: &str, shape: String, template: impl FnOnce() -> Vec<String>) -> Result<Vec<i64>, String> {
        if let Some(v) = self.path_consts.borrow().get(&shape) {
            return Ok(v.clone());
        }
        let consts = template();
        let mut vals = Vec::with_capacity(consts.len());
        for c in &consts {
            vals.push(self.c_const(c).ok_or_else(|| format!("`{c}` was not recorded at load (the profile did not name `{target}` before load)"))?);
        }
        self.path_consts.borrow_mut().insert(shape, vals.clone());
        Ok(vals)
    }

    /// The offset and size of what a path addresses, from the constants
    /// the object recorded for its template (`vals`), checking every index.
    fn locate(&self, target: &str, vals: Vec<i64>, base_index: &[u64], steps: &[Step], base: &str) -> Result<(usize, usize), String> {
        let mut vals = vals.into_iter();
        let mut next = || vals.next().unwrap_or(0).max(0) as usize;
        let mut off = 0usize;
        let index = |idx: &[u64], next: &mut dyn FnMut() -> usize, off: &mut usize, what: &str| -> Result<(), String> {
            for &i in idx {
                let (all, one) = (next(), next());
                let n = all.checked_div(one).unwrap_or(0);
                if i as usize >= n {
                    return Err(format!("`{target}`: index {i} of {what} is past its {n} elements"));
                }
                *off += i as usize * one;
            }
            Ok(())
        };
        index(base_index, &mut next, &mut off, base)?;
        for s in steps {
            off += next();
            index(&s.index, &mut next, &mut off, &s.member)?;
        }
        Ok((off, next()))
    }

    /// Writes `bytes` at member `member` (`.a[i].b`, at most its size) of
    /// map `map`'s element `key`: CPU `cpu`'s copy of a per-CPU map, as
    /// user space writes a member of a value it looked up (scx_layered's
    /// `cpu_ctxs`, `llc_data`, `node_data`).
    pub(crate) fn patch_map(&self, map: &str, key: u32, cpu: u32, nr_cpus: u32, member: &str, bytes: &[u8]) -> Result<(), String> {
        let steps = member_steps(member).ok_or_else(|| format!("`{member}` is not a member path like .a[1].b"))?;
        let what = format!("{map}{member}");
        let vals = self.template_values(&what, shape(&format!("{}{member}", map_value(map))), || template_from(map_value(map), 0, &steps))?;
        let (off, size) = self.locate(&what, vals, &[], &steps, map)?;
        if bytes.len() > size {
            return Err(format!("`{what}` is {size} bytes; {} do not fit", bytes.len()));
        }
        let done = self.with_map(map, |m| {
            if off + bytes.len() > m.def.value_size as usize {
                return Err(format!("`{what}` lies outside the map's {}-byte value", m.def.value_size));
            }
            let k = key.to_ne_bytes();
            let p = if m.def.kind == crate::maps::MapKind::PercpuArray { m.lookup_percpu(&k, cpu, nr_cpus) } else { m.lookup(&k, cpu, nr_cpus) };
            if p.is_null() {
                return Err(format!("`{map}` has no element {key}"));
            }
            // SAFETY: `p` points at value_size bytes of the map's storage;
            // the range was checked against it above.
            unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), p.add(off), bytes.len()) };
            Ok(())
        });
        done.ok_or_else(|| format!("no map `{map}`; the scheduler's maps are: {}", self.map_names().join(", ")))?
    }

    /// Writes `value` to the path `target` (see the module doc): integers
    /// little-endian in the member's size, text NUL-padded into a char
    /// array.
    pub(crate) fn set_path(&self, target: &str, value: &Value) -> Result<(), String> {
        let p = parse(target).ok_or_else(|| format!("`{target}` is not NAME[i].member... with numeric indices"))?;
        let base = self
            .rodata
            .iter()
            .chain(&self.globals)
            .find(|g| g.name == p.base)
            .ok_or_else(|| format!("`{}`: no global of that name (a .bss/.data/.rodata variable)", p.base))?;
        let vals = self.template_values(target, shape(target), || template(&p))?;
        let (off, size) = self.locate(target, vals, &p.base_index, &p.steps, &p.base)?;
        let bytes: Vec<u8> = match value {
            Value::Int(v) if matches!(size, 1 | 2 | 4 | 8) => v.to_le_bytes()[..size].to_vec(),
            Value::Bool(b) if matches!(size, 1 | 2 | 4 | 8) => (*b as u64).to_le_bytes()[..size].to_vec(),
            Value::Str(s) if s.len() < size => {
                let mut b = s.as_bytes().to_vec();
                b.resize(size, 0);
                b
            }
            Value::Str(s) => return Err(format!("`{target}`: \"{s}\" does not fit its {size} bytes with the NUL")),
            _ => return Err(format!("`{target}` is {size} bytes, not an integer member; name a scalar member")),
        };
        if off + bytes.len() > base.size as usize {
            return Err(format!("`{target}` lies outside `{}` ({} bytes)", p.base, base.size));
        }
        let written = super::loader::write_rodata(&self.state.pages, base, off, &bytes);
        // As every write (HostedScheduler::write_text).
        self.state.pages.seal();
        written
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_parse_and_template() {
        assert!(is_path("cpdom_ctxs[3].id") && !is_path("cfg.x") && !is_path("a[2]"));
        let p = parse("layers[1].matches[2][0].kind").unwrap();
        assert_eq!((p.base.as_str(), p.base_index.as_slice(), p.steps.len()), ("layers", &[1u64][..], 2));
        assert_eq!(p.steps[0], Step { member: "matches".into(), index: vec![2, 0] });
        assert_eq!(
            template(&p),
            [
                "sizeof(layers)",
                "sizeof(layers[0])",
                "__builtin_offsetof(__typeof__(layers[0]), matches)",
                "sizeof(layers[0].matches)",
                "sizeof(layers[0].matches[0])",
                "sizeof(layers[0].matches[0])",
                "sizeof(layers[0].matches[0][0])",
                "__builtin_offsetof(__typeof__(layers[0].matches[0][0]), kind)",
                "sizeof(layers[0].matches[0][0].kind)",
            ]
        );
        assert_eq!(parse("a[x].b"), None);
        assert_eq!(parse("a[1]"), None);
        assert_eq!(parse("a[1].2b"), None);
    }

    #[test]
    fn paths_of_one_shape_share_their_template() {
        let same = ["layers[1].matches[2][0].kind", "layers[3].matches[0][5].kind", "layers[ 0 ].matches[1][1].kind"];
        for t in same {
            assert_eq!(shape(t), "layers[].matches[][].kind");
            assert_eq!(exprs(t), exprs(same[0]));
        }
        for other in ["layers[1].matches[2].kind", "layers[1].matches[2][0].kinds", "layers[1][0].matches[2][0].kind", "layer[1].matches[2][0].kind"] {
            assert_ne!(shape(other), shape(same[0]));
            assert_ne!(exprs(other), exprs(same[0]));
        }
        assert_eq!((shape("a[2]"), shape("cfg.x"), shape("a[12][3]")), ("a[]".into(), "cfg.x".into(), "a[][]".into()));
        assert_eq!(shape(".a[3].b"), shape(".a[0].b"));
        assert_eq!(map_member_exprs("m", ".a[3].b"), map_member_exprs("m", ".a[0].b"));
        assert_ne!(shape(".a.b"), shape(".a[0].b"));
    }
}
