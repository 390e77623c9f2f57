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
    let mut out = Vec::new();
    let mut e = p.base.clone();
    let level = |e: &mut String, n: usize, out: &mut Vec<String>| {
        for _ in 0..n {
            out.push(format!("sizeof({e})"));
            e.push_str("[0]");
            out.push(format!("sizeof({e})"));
        }
    };
    level(&mut e, p.base_index.len(), &mut out);
    for s in &p.steps {
        out.push(format!("__builtin_offsetof(__typeof__({e}), {})", s.member));
        e = format!("{e}.{}", s.member);
        level(&mut e, s.index.len(), &mut out);
    }
    out.push(format!("sizeof({e})"));
    out
}

/// The C constant expressions a write to `target` needs (none when it is
/// not a path).
pub(crate) fn exprs(target: &str) -> Vec<String> {
    parse(target).map(|p| template(&p)).unwrap_or_default()
}

impl HostedScheduler {
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
        let consts = template(&p);
        let mut vals = Vec::with_capacity(consts.len());
        for c in &consts {
            vals.push(self.c_const(c).ok_or_else(|| format!("`{c}` was not recorded at load (the profile did not name `{target}` before load)"))?);
        }
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
        index(&p.base_index, &mut next, &mut off, &p.base)?;
        for s in &p.steps {
            off += next();
            index(&s.index, &mut next, &mut off, &s.member)?;
        }
        let size = next();
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
        super::loader::write_rodata(base, off, &bytes)
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
}
