//! The scheduler's own command line (`--sched-args "-s 5000 -m
//! performance"`), parsed against the flags its profile declares, the way
//! clap parses them in the scheduler's binary: `-s 5000`, `-s5000`,
//! `--slice-us 5000`, `--slice-us=5000`, boolean flags alone (`-p`,
//! `--local-pcpu`) or grouped (`-pk`), and `--` ends the flags.

use super::expr::Value;
use super::format::{FlagDef, Profile, ProfileError};
use std::collections::BTreeMap;

/// A flag value as text, from a TOML default.
pub fn toml_text(v: &toml::Value) -> String {
    match v {
        toml::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Parses `text` as a value of flag type `ty`.
pub(crate) fn parse_value(ty: &str, text: &str) -> Result<Value, String> {
    let t = text.trim();
    let int = |lo: i128, hi: i128| -> Result<Value, String> {
        let clean = t.replace('_', "");
        let n = if let Some(h) = clean.strip_prefix("0x") { i128::from_str_radix(h, 16) } else { clean.parse::<i128>() };
        match n {
            Ok(n) if (lo..=hi).contains(&n) => Ok(Value::Int(n)),
            Ok(n) => Err(format!("{n} is out of range for {ty} ({lo}..={hi})")),
            Err(_) => Err(format!("`{text}` is not a number")),
        }
    };
    match ty {
        "bool" => match t {
            "true" | "1" => Ok(Value::Bool(true)),
            "false" | "0" => Ok(Value::Bool(false)),
            _ => Err(format!("`{text}` is not true or false")),
        },
        "u32" => int(0, u32::MAX as i128),
        "u64" => int(0, u64::MAX as i128),
        "i32" => int(i32::MIN as i128, i32::MAX as i128),
        "i64" => int(i64::MIN as i128, i64::MAX as i128),
        // Floating-point flags (intervals, ratios) are kept as text; the
        // profile converts them with expressions if it needs them.
        "f64" => t.parse::<f64>().map(|_| Value::Str(t.to_string())).map_err(|_| format!("`{text}` is not a number")),
        _ => Ok(Value::Str(t.to_string())),
    }
}

/// Splits a command line into words, honouring '...' and "..." quotes.
pub(crate) fn split_words(line: &str) -> Result<Vec<String>, String> {
    let (mut out, mut cur, mut quote, mut any) = (Vec::new(), String::new(), None::<char>, false);
    for c in line.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => cur.push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                any = true;
            }
            (None, c) if c.is_whitespace() => {
                if any || !cur.is_empty() {
                    out.push(std::mem::take(&mut cur));
                }
                any = false;
            }
            (None, c) => cur.push(c),
        }
    }
    if quote.is_some() {
        return Err(format!("unclosed quote in `{line}`"));
    }
    if any || !cur.is_empty() {
        out.push(cur);
    }
    Ok(out)
}

/// One line per flag: `-s, --slice-us <u64> (default 1000)`.
pub fn usage(p: &Profile) -> String {
    p.def
        .flag
        .iter()
        .map(|f| {
            let short = f.short.as_ref().map_or(String::new(), |s| format!("-{}, ", s.get_ref()));
            let ty = f.ty.get_ref();
            let val = if ty == "bool" { String::new() } else { format!(" <{ty}>") };
            let def = f.default.as_ref().map_or(String::new(), |d| format!(" (default {})", toml_text(d.get_ref())));
            format!("{short}--{}{val}{def}", f.long.get_ref())
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// The flags' values: defaults, then `args` as the binary parses them.
/// Errors name the flag and list the ones the profile knows.
pub fn parse(p: &Profile, args: &[String]) -> Result<BTreeMap<String, Value>, ProfileError> {
    parse_all(p, args).map(|(vars, _)| vars)
}

/// [`parse`], and the positional arguments in order: a profile that
/// declares `profile.positional` (scx_layered's layer specs) takes them;
/// any other refuses them.
pub fn parse_all(p: &Profile, args: &[String]) -> Result<(BTreeMap<String, Value>, Vec<String>), ProfileError> {
    let mut positional = Vec::new();
    let sched = &p.def.profile.scheduler;
    let err = |msg: String| ProfileError { file: "--sched-args".into(), line: 0, field: sched.clone(), msg };
    let mut vals = BTreeMap::new();
    for f in &p.def.flag {
        let ty = f.ty.get_ref().as_str();
        let v = match &f.default {
            Some(d) => parse_value(ty, &toml_text(d.get_ref())).map_err(|m| p.err(d.span(), "flag.default", m))?,
            None if ty == "bool" => Value::Bool(false),
            None if ty == "string" || ty == "f64" => Value::Str(String::new()),
            None => Value::Int(0),
        };
        vals.insert(Profile::flag_var(f), v);
    }
    let unknown = |w: &str| err(format!("unknown flag `{w}` for {sched}; it accepts: {}", usage(p)));
    let by_short = |c: char| p.def.flag.iter().find(|f| f.short.as_ref().is_some_and(|s| s.get_ref().starts_with(c)));
    let set = |vals: &mut BTreeMap<String, Value>, f: &FlagDef, text: &str| -> Result<(), ProfileError> {
        let v = parse_value(f.ty.get_ref(), text).map_err(|m| err(format!("--{}: {m}", f.long.get_ref())))?;
        vals.insert(Profile::flag_var(f), v);
        Ok(())
    };
    let mut i = 0;
    while i < args.len() {
        let w = args[i].as_str();
        i += 1;
        if w == "--" {
            if p.def.profile.positional.is_some() {
                positional.extend(args[i..].iter().cloned());
            } else if i < args.len() {
                return Err(err(format!("{sched} takes no positional arguments (got `{}`)", args[i])));
            }
            break;
        }
        let mut next = |name: &str| -> Result<String, ProfileError> {
            let v = args.get(i).cloned().ok_or_else(|| err(format!("{name} needs a value")))?;
            i += 1;
            Ok(v)
        };
        if let Some(long) = w.strip_prefix("--") {
            let (name, inline) = match long.split_once('=') {
                Some((n, v)) => (n, Some(v.to_string())),
                None => (long, None),
            };
            let f = p.def.flag.iter().find(|f| f.long.get_ref() == name).ok_or_else(|| unknown(w))?;
            if f.ty.get_ref() == "bool" {
                set(&mut vals, f, inline.as_deref().unwrap_or("true"))?;
            } else {
                let v = match inline {
                    Some(v) => v,
                    None => next(w)?,
                };
                set(&mut vals, f, &v)?;
            }
        } else if let Some(shorts) = w.strip_prefix('-').filter(|s| !s.is_empty()) {
            let chars: Vec<char> = shorts.chars().collect();
            let mut k = 0;
            while k < chars.len() {
                let f = by_short(chars[k]).ok_or_else(|| unknown(&format!("-{}", chars[k])))?;
                k += 1;
                if f.ty.get_ref() == "bool" {
                    set(&mut vals, f, "true")?;
                    continue;
                }
                let rest: String = chars[k..].iter().collect();
                let rest = rest.strip_prefix('=').unwrap_or(&rest).to_string();
                let v = if rest.is_empty() { next(&format!("-{}", chars[k - 1]))? } else { rest };
                set(&mut vals, f, &v)?;
                break;
            }
        } else if p.def.profile.positional.is_some() {
            positional.push(w.to_string());
        } else {
            return Err(err(format!("{sched} takes no positional arguments (got `{w}`); flags are: {}", usage(p))));
        }
    }
    Ok((vals, positional))
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: &str = r#"
[profile]
scheduler = "scx_test"

[[flag]]
long = "slice-us"
short = "s"
type = "u64"
default = 1000

[[flag]]
long = "local-pcpu"
short = "p"
type = "bool"

[[flag]]
long = "keep"
short = "k"
type = "bool"

[[flag]]
long = "primary-domain"
short = "m"
type = "string"
default = "auto"

[[flag]]
long = "idle-resume-us"
short = "I"
type = "i64"
default = -1
"#;

    fn run(line: &str) -> Result<BTreeMap<String, Value>, ProfileError> {
        let p = Profile::parse("t.toml", P).unwrap();
        parse(&p, &split_words(line).unwrap())
    }

    #[test]
    fn defaults_and_every_spelling() {
        let v = run("").unwrap();
        assert_eq!(v["slice_us"], Value::Int(1000));
        assert_eq!(v["local_pcpu"], Value::Bool(false));
        assert_eq!(v["primary_domain"], Value::Str("auto".into()));
        assert_eq!(v["idle_resume_us"], Value::Int(-1));
        let v = run("-s 5000 -m performance -pk").unwrap();
        assert_eq!(v["slice_us"], Value::Int(5000));
        assert_eq!(v["primary_domain"], Value::Str("performance".into()));
        assert_eq!((v["local_pcpu"].clone(), v["keep"].clone()), (Value::Bool(true), Value::Bool(true)));
        assert_eq!(run("-s5000").unwrap()["slice_us"], Value::Int(5000));
        assert_eq!(run("--slice-us=7").unwrap()["slice_us"], Value::Int(7));
        assert_eq!(run("--slice-us 8 --local-pcpu").unwrap()["local_pcpu"], Value::Bool(true));
        assert_eq!(run("-I -5").unwrap()["idle_resume_us"], Value::Int(-5));
        assert_eq!(run("-m '0x3 '").unwrap()["primary_domain"], Value::Str("0x3".into()));
    }

    #[test]
    fn errors_list_the_known_flags() {
        let e = run("-x 1").unwrap_err().to_string();
        assert!(e.contains("unknown flag `-x` for scx_test"), "{e}");
        assert!(e.contains("-s, --slice-us <u64> (default 1000)") && e.contains("-p, --local-pcpu"), "{e}");
        assert!(run("--nope").unwrap_err().to_string().contains("unknown flag `--nope`"));
        assert!(run("-s").unwrap_err().to_string().contains("-s needs a value"));
        assert!(run("-s abc").unwrap_err().to_string().contains("--slice-us: `abc` is not a number"));
        assert!(run("-s -1").unwrap_err().to_string().contains("out of range"));
        assert!(run("stray").unwrap_err().to_string().contains("no positional arguments"));
        assert!(split_words("-m 'x").unwrap_err().contains("unclosed quote"));
    }
}
