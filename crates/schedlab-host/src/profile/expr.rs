//! The expression language of loader profiles.
//!
//! A loader computes what it writes from its flags and the machine:
//! `slice_us * 1000`, `!disable_numa && nr_nodes > 1`,
//! `in_mask(cpu, primary_domain)`. Profiles write these as C-like
//! expressions over integers (128-bit while computing, range-checked when
//! written), booleans and strings:
//!
//! - literals: `12`, `0x1f`, `20_000`, `true`, `false`, `'text'` / `"text"`;
//! - variables: the scheduler's flags, `let` bindings, machine facts and
//!   loop variables (see [`super::machine`]);
//! - calls: `name(a, b)`, resolved by the environment;
//! - operators, loosest first: `c ? a : b`, `||`, `&&`, `== != < <= > >=`,
//!   `| ^ &`, `<< >>`, `+ -`, `* / %`, unary `! - ~`.

use std::fmt;

/// A value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Value {
    /// An integer.
    Int(i128),
    /// A boolean.
    Bool(bool),
    /// A string.
    Str(String),
}

impl Value {
    /// The value as a condition: booleans, or integers (non-zero is true).
    pub fn truthy(&self) -> Result<bool, ExprError> {
        match self {
            Value::Bool(b) => Ok(*b),
            Value::Int(i) => Ok(*i != 0),
            Value::Str(s) => Err(ExprError::Type(format!("the string '{s}' is not a condition"))),
        }
    }

    /// The value as an integer (booleans are 0 and 1).
    pub fn int(&self) -> Result<i128, ExprError> {
        match self {
            Value::Int(i) => Ok(*i),
            Value::Bool(b) => Ok(*b as i128),
            Value::Str(s) => Err(ExprError::Type(format!("the string '{s}' is not a number"))),
        }
    }
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Int(i) => write!(f, "{i}"),
            Value::Bool(b) => write!(f, "{b}"),
            Value::Str(s) => f.write_str(s),
        }
    }
}

/// Why an expression does not parse or evaluate. The profile reports it
/// with the file, line and field it came from.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ExprError {
    /// The text is not an expression.
    #[error("{0}")]
    Syntax(String),
    /// A value of the wrong type: a string used as a number or condition.
    #[error("{0}")]
    Type(String),
    /// Overflow or division by zero.
    #[error("{0}")]
    Arith(String),
    /// A name the environment does not know.
    #[error("unknown name `{name}`; known: {known}")]
    Name {
        /// The name used.
        name: String,
        /// The names there are, comma-separated.
        known: String,
    },
    /// A function is unknown or refused its arguments.
    #[error("{0}")]
    Function(String),
}

/// A parsed expression.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Expr {
    /// A literal.
    Lit(Value),
    /// A variable (`nr_cpus`, a loop variable, ...).
    Var(String),
    /// A function call: name and arguments.
    Call(String, Vec<Expr>),
    /// A unary operator (`-`, `!`) and its operand.
    Unary(char, Box<Expr>),
    /// A binary operator and its operands.
    Binary(&'static str, Box<Expr>, Box<Expr>),
    /// `cond ? then : else`.
    Cond(Box<Expr>, Box<Expr>, Box<Expr>),
}

/// What an expression can read.
pub(crate) trait Env {
    /// A variable's value, or None if there is no such name.
    fn var(&self, name: &str) -> Option<Value>;
    /// A function call; Err for an unknown function or bad arguments.
    fn call(&self, name: &str, args: &[Value]) -> Result<Value, ExprError>;
    /// The names `var` knows, for messages.
    fn names(&self) -> Vec<String>;
}

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Int(i128),
    Str(String),
    Ident(String),
    Op(&'static str),
}

const OPS: &[&str] = &[
    "<<", ">>", "<=", ">=", "==", "!=", "&&", "||", "(", ")", ",", "?", ":", "+", "-", "*", "/", "%", "<", ">", "!", "~",
    "&", "|", "^",
];

fn lex(src: &str) -> Result<Vec<Tok>, ExprError> {
    let b = src.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c.is_ascii_whitespace() {
            i += 1;
        } else if c.is_ascii_digit() {
            let start = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            let text = src[start..i].replace('_', "");
            let n = if let Some(h) = text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
                i128::from_str_radix(h, 16)
            } else {
                text.parse::<i128>()
            };
            out.push(Tok::Int(n.map_err(|_| ExprError::Syntax(format!("`{}` is not a number", &src[start..i])))?));
        } else if c.is_ascii_alphabetic() || c == b'_' {
            let start = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_' || b[i] == b'.') {
                i += 1;
            }
            out.push(Tok::Ident(src[start..i].to_string()));
        } else if c == b'\'' || c == b'"' {
            let end = src[i + 1..].find(c as char).ok_or_else(|| ExprError::Syntax("a string is not closed".into()))?;
            out.push(Tok::Str(src[i + 1..i + 1 + end].to_string()));
            i += end + 2;
        } else {
            let op = OPS.iter().find(|o| src[i..].starts_with(**o)).ok_or_else(|| ExprError::Syntax(format!("unexpected `{}`", c as char)))?;
            out.push(Tok::Op(op));
            i += op.len();
        }
    }
    Ok(out)
}

struct Parser {
    toks: Vec<Tok>,
    at: usize,
}

/// Binary operator levels, loosest first.
const LEVELS: &[&[&str]] =
    &[&["||"], &["&&"], &["==", "!=", "<", "<=", ">", ">="], &["|", "^", "&"], &["<<", ">>"], &["+", "-"], &["*", "/", "%"]];

impl Parser {
    fn peek_op(&self) -> Option<&'static str> {
        match self.toks.get(self.at) {
            Some(Tok::Op(o)) => Some(o),
            _ => None,
        }
    }

    fn expect(&mut self, op: &str) -> Result<(), ExprError> {
        if self.peek_op() == Some(op) {
            self.at += 1;
            Ok(())
        } else {
            Err(ExprError::Syntax(format!("expected `{op}`")))
        }
    }

    fn cond(&mut self) -> Result<Expr, ExprError> {
        let c = self.level(0)?;
        if self.peek_op() == Some("?") {
            self.at += 1;
            let a = self.cond()?;
            self.expect(":")?;
            let b = self.cond()?;
            return Ok(Expr::Cond(Box::new(c), Box::new(a), Box::new(b)));
        }
        Ok(c)
    }

    fn level(&mut self, n: usize) -> Result<Expr, ExprError> {
        if n == LEVELS.len() {
            return self.unary();
        }
        let mut lhs = self.level(n + 1)?;
        while let Some(op) = self.peek_op().filter(|o| LEVELS[n].contains(o)) {
            self.at += 1;
            let rhs = self.level(n + 1)?;
            lhs = Expr::Binary(op, Box::new(lhs), Box::new(rhs));
        }
        Ok(lhs)
    }

    fn unary(&mut self) -> Result<Expr, ExprError> {
        match self.peek_op() {
            Some(op @ ("!" | "-" | "~")) => {
                self.at += 1;
                Ok(Expr::Unary(op.chars().next().unwrap_or('!'), Box::new(self.unary()?)))
            }
            _ => self.primary(),
        }
    }

    fn primary(&mut self) -> Result<Expr, ExprError> {
        let t = self.toks.get(self.at).cloned().ok_or_else(|| ExprError::Syntax("the expression ends too early".into()))?;
        self.at += 1;
        match t {
            Tok::Int(i) => Ok(Expr::Lit(Value::Int(i))),
            Tok::Str(s) => Ok(Expr::Lit(Value::Str(s))),
            Tok::Ident(name) if name == "true" || name == "false" => Ok(Expr::Lit(Value::Bool(name == "true"))),
            Tok::Ident(name) => {
                if self.peek_op() != Some("(") {
                    return Ok(Expr::Var(name));
                }
                self.at += 1;
                let mut args = Vec::new();
                if self.peek_op() == Some(")") {
                    self.at += 1;
                    return Ok(Expr::Call(name, args));
                }
                loop {
                    args.push(self.cond()?);
                    match self.peek_op() {
                        Some(",") => self.at += 1,
                        Some(")") => {
                            self.at += 1;
                            return Ok(Expr::Call(name, args));
                        }
                        _ => return Err(ExprError::Syntax(format!("expected `,` or `)` in the arguments of {name}()"))),
                    }
                }
            }
            Tok::Op("(") => {
                let e = self.cond()?;
                self.expect(")")?;
                Ok(e)
            }
            Tok::Op(o) => Err(ExprError::Syntax(format!("unexpected `{o}`"))),
        }
    }
}

/// Parses `src`.
pub(crate) fn parse(src: &str) -> Result<Expr, ExprError> {
    let toks = lex(src)?;
    if toks.is_empty() {
        return Err(ExprError::Syntax("the expression is empty".into()));
    }
    let mut p = Parser { toks, at: 0 };
    let e = p.cond()?;
    if p.at != p.toks.len() {
        return Err(ExprError::Syntax(format!("unexpected `{}` after the expression", tok_text(&p.toks[p.at]))));
    }
    Ok(e)
}

fn tok_text(t: &Tok) -> String {
    match t {
        Tok::Int(i) => i.to_string(),
        Tok::Str(s) => format!("'{s}'"),
        Tok::Ident(s) => s.clone(),
        Tok::Op(o) => o.to_string(),
    }
}

impl Expr {
    /// Evaluates the expression in `env`.
    pub(crate) fn eval(&self, env: &dyn Env) -> Result<Value, ExprError> {
        match self {
            Expr::Lit(v) => Ok(v.clone()),
            Expr::Var(name) => env.var(name).ok_or_else(|| {
                let mut names = env.names();
                names.sort();
                ExprError::Name { name: name.clone(), known: names.join(", ") }
            }),
            Expr::Call(name, args) => {
                let vals = args.iter().map(|a| a.eval(env)).collect::<Result<Vec<_>, _>>()?;
                env.call(name, &vals)
            }
            Expr::Unary(op, e) => {
                let v = e.eval(env)?;
                match op {
                    '!' => Ok(Value::Bool(!v.truthy()?)),
                    '-' => Ok(Value::Int(v.int()?.checked_neg().ok_or_else(|| ExprError::Arith("overflow".into()))?)),
                    _ => Ok(Value::Int(!v.int()?)),
                }
            }
            Expr::Cond(c, a, b) => {
                if c.eval(env)?.truthy()? {
                    a.eval(env)
                } else {
                    b.eval(env)
                }
            }
            Expr::Binary(op, a, b) => {
                // Short-circuit, as in C.
                if *op == "&&" || *op == "||" {
                    let l = a.eval(env)?.truthy()?;
                    if (*op == "&&") != l {
                        return Ok(Value::Bool(l));
                    }
                    return Ok(Value::Bool(b.eval(env)?.truthy()?));
                }
                let (l, r) = (a.eval(env)?, b.eval(env)?);
                if matches!(op, &"==" | &"!=") {
                    let eq = match (&l, &r) {
                        (Value::Str(x), Value::Str(y)) => x == y,
                        (Value::Str(_), _) | (_, Value::Str(_)) => {
                            return Err(ExprError::Type(format!("cannot compare '{l}' with {r}: one is a string")))
                        }
                        _ => l.int()? == r.int()?,
                    };
                    return Ok(Value::Bool(eq == (*op == "==")));
                }
                let (x, y) = (l.int()?, r.int()?);
                let ovf = || ExprError::Arith(format!("overflow in {x} {op} {y}"));
                let v = match *op {
                    "<" => return Ok(Value::Bool(x < y)),
                    "<=" => return Ok(Value::Bool(x <= y)),
                    ">" => return Ok(Value::Bool(x > y)),
                    ">=" => return Ok(Value::Bool(x >= y)),
                    "+" => x.checked_add(y).ok_or_else(ovf)?,
                    "-" => x.checked_sub(y).ok_or_else(ovf)?,
                    "*" => x.checked_mul(y).ok_or_else(ovf)?,
                    "/" | "%" if y == 0 => return Err(ExprError::Arith(format!("division by zero in {x} {op} {y}"))),
                    "/" => x / y,
                    "%" => x % y,
                    "&" => x & y,
                    "|" => x | y,
                    "^" => x ^ y,
                    "<<" | ">>" if !(0..127).contains(&y) => return Err(ovf()),
                    "<<" => x.checked_shl(y as u32).ok_or_else(ovf)?,
                    _ => x >> y,
                };
                Ok(Value::Int(v))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct E;
    impl Env for E {
        fn var(&self, name: &str) -> Option<Value> {
            match name {
                "x" => Some(Value::Int(5)),
                "on" => Some(Value::Bool(true)),
                "mode" => Some(Value::Str("auto".into())),
                _ => None,
            }
        }
        fn call(&self, name: &str, args: &[Value]) -> Result<Value, ExprError> {
            match name {
                "twice" => Ok(Value::Int(args[0].int()? * 2)),
                _ => Err(ExprError::Function(format!("unknown function {name}()"))),
            }
        }
        fn names(&self) -> Vec<String> {
            vec!["x".into(), "on".into(), "mode".into()]
        }
    }

    fn ev(s: &str) -> Result<Value, ExprError> {
        parse(s)?.eval(&E)
    }

    #[test]
    fn arithmetic_logic_and_precedence() {
        assert_eq!(ev("x * 1000 + 1").unwrap(), Value::Int(5001));
        assert_eq!(ev("1 + 2 * 3 == 7 && !false").unwrap(), Value::Bool(true));
        assert_eq!(ev("0x10 | 1 << 2").unwrap(), Value::Int(20));
        assert_eq!(ev("-x").unwrap(), Value::Int(-5));
        assert_eq!(ev("on ? twice(x) : 0").unwrap(), Value::Int(10));
        assert_eq!(ev("mode == 'auto' || mode == \"all\"").unwrap(), Value::Bool(true));
        assert_eq!(ev("20_000 / 3 % 7").unwrap(), Value::Int(6666 % 7));
        // Short-circuit: the unknown name on the right is never read.
        assert_eq!(ev("false && nope").unwrap(), Value::Bool(false));
    }

    #[test]
    fn errors_name_the_problem() {
        assert!(ev("y + 1").unwrap_err().to_string().contains("unknown name `y`; known: mode, on, x"));
        assert!(ev("1 / 0").unwrap_err().to_string().contains("division by zero"));
        assert!(ev("(1 + 2").unwrap_err().to_string().contains("expected `)`"));
        assert!(ev("1 2").unwrap_err().to_string().contains("unexpected `2`"));
        assert!(ev("mode + 1").unwrap_err().to_string().contains("not a number"));
        assert!(ev("nope(1)").unwrap_err().to_string().contains("unknown function nope()"));
        assert!(ev("'open").unwrap_err().to_string().contains("not closed"));
        assert!(ev("").unwrap_err().to_string().contains("empty"));
        assert!(ev("1 << 200").unwrap_err().to_string().contains("overflow"));
    }
}
