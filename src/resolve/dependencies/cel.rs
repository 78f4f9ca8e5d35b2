//! The subset of CEL that OLM v0's `olm.constraint` `cel` rules use in practice
//! (docs/concepts/dependencies.md §3): `properties.exists(p, …)` / `properties.all(p, …)`
//! over a candidate bundle's properties, member access (`p.type`, `p.value.packageName`),
//! `&&`, `||`, `!`, parentheses, comparisons, string / integer / boolean literals, and
//! OLM's `semver_compare(a, b)` plus `semver(s)` for comparing versions. Anything else is
//! a parse error naming the position, so an unsupported rule is reported, never guessed.

use semver::Version;
use serde_json::Value;
use std::cmp::Ordering;

/// A parsed rule.
#[derive(Clone, Debug, PartialEq)]
pub enum Expr {
    Str(String),
    Int(i64),
    Bool(bool),
    /// A variable and a member path (`p.value.version` = `("p", ["value","version"])`).
    Path(String, Vec<String>),
    Not(Box<Expr>),
    And(Box<Expr>, Box<Expr>),
    Or(Box<Expr>, Box<Expr>),
    Cmp(Box<Expr>, CmpOp, Box<Expr>),
    /// `semver_compare(a, b)` (-1, 0, 1) or `semver(s)`.
    Call(String, Vec<Expr>),
    /// `properties.exists(var, body)` (`all` = false) / `properties.all(var, body)`.
    Quantifier {
        all: bool,
        var: String,
        body: Box<Expr>,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CmpOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Ident(String),
    Str(String),
    Int(i64),
    Sym(&'static str),
}

const SYMBOLS: [&str; 14] = [
    "&&", "||", "==", "!=", "<=", ">=", "<", ">", "!", "(", ")", ",", ".", "-",
];

fn tokenize(src: &str) -> Result<Vec<Tok>, String> {
    let mut out = Vec::new();
    let chars: Vec<char> = src.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
        } else if c == '"' || c == '\'' {
            let mut s = String::new();
            i += 1;
            loop {
                match chars.get(i) {
                    None => return Err("unterminated string".into()),
                    Some(&q) if q == c => break,
                    Some('\\') => {
                        s.extend(chars.get(i + 1));
                        i += 2;
                    }
                    Some(&ch) => {
                        s.push(ch);
                        i += 1;
                    }
                }
            }
            i += 1;
            out.push(Tok::Str(s));
        } else if c.is_ascii_digit() {
            let start = i;
            while i < chars.len() && chars[i].is_ascii_digit() {
                i += 1;
            }
            let text: String = chars[start..i].iter().collect();
            out.push(Tok::Int(text.parse().map_err(|e| format!("{text}: {e}"))?));
        } else if c.is_alphabetic() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            out.push(Tok::Ident(chars[start..i].iter().collect()));
        } else {
            let rest: String = chars[i..chars.len().min(i + 2)].iter().collect();
            let sym = SYMBOLS
                .iter()
                .find(|s| rest.starts_with(**s))
                .ok_or_else(|| format!("unsupported character {c:?} at {i}"))?;
            i += sym.len();
            out.push(Tok::Sym(sym));
        }
    }
    Ok(out)
}

struct Parser {
    toks: Vec<Tok>,
    pos: usize,
    /// Nesting depth, bounded (a rule is at most 64 KB in OLM v0).
    depth: usize,
}

const MAX_DEPTH: usize = 64;

/// Parses a rule.
pub fn parse(src: &str) -> Result<Expr, String> {
    let mut p = Parser {
        toks: tokenize(src)?,
        pos: 0,
        depth: 0,
    };
    let e = p.or()?;
    match p.toks.get(p.pos) {
        None => Ok(e),
        Some(t) => Err(format!("unexpected {t:?} after the expression")),
    }
}

impl Parser {
    fn peek_sym(&self, s: &str) -> bool {
        matches!(self.toks.get(self.pos), Some(Tok::Sym(x)) if *x == s)
    }

    fn expect(&mut self, s: &str) -> Result<(), String> {
        if self.peek_sym(s) {
            self.pos += 1;
            Ok(())
        } else {
            Err(format!("expected {s:?} at token {}", self.pos))
        }
    }

    fn ident(&mut self) -> Result<String, String> {
        match self.toks.get(self.pos) {
            Some(Tok::Ident(s)) => {
                self.pos += 1;
                Ok(s.clone())
            }
            other => Err(format!("expected a name, found {other:?}")),
        }
    }

    fn or(&mut self) -> Result<Expr, String> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err("expression nested too deeply".into());
        }
        let mut e = self.and()?;
        while self.peek_sym("||") {
            self.pos += 1;
            e = Expr::Or(Box::new(e), Box::new(self.and()?));
        }
        self.depth -= 1;
        Ok(e)
    }

    fn and(&mut self) -> Result<Expr, String> {
        let mut e = self.unary()?;
        while self.peek_sym("&&") {
            self.pos += 1;
            e = Expr::And(Box::new(e), Box::new(self.unary()?));
        }
        Ok(e)
    }

    fn unary(&mut self) -> Result<Expr, String> {
        if self.peek_sym("!") {
            self.pos += 1;
            self.depth += 1;
            if self.depth > MAX_DEPTH {
                return Err("expression nested too deeply".into());
            }
            let e = Expr::Not(Box::new(self.unary()?));
            self.depth -= 1;
            return Ok(e);
        }
        self.comparison()
    }

    fn comparison(&mut self) -> Result<Expr, String> {
        let left = self.primary()?;
        let op = match self.toks.get(self.pos) {
            Some(Tok::Sym("==")) => CmpOp::Eq,
            Some(Tok::Sym("!=")) => CmpOp::Ne,
            Some(Tok::Sym("<")) => CmpOp::Lt,
            Some(Tok::Sym("<=")) => CmpOp::Le,
            Some(Tok::Sym(">")) => CmpOp::Gt,
            Some(Tok::Sym(">=")) => CmpOp::Ge,
            _ => return Ok(left),
        };
        self.pos += 1;
        let right = self.primary()?;
        Ok(Expr::Cmp(Box::new(left), op, Box::new(right)))
    }

    fn primary(&mut self) -> Result<Expr, String> {
        let tok = self.toks.get(self.pos).cloned();
        self.pos += 1;
        match tok {
            Some(Tok::Str(s)) => Ok(Expr::Str(s)),
            Some(Tok::Int(n)) => Ok(Expr::Int(n)),
            Some(Tok::Sym("-")) => match self.toks.get(self.pos) {
                Some(Tok::Int(n)) => {
                    let n = -*n;
                    self.pos += 1;
                    Ok(Expr::Int(n))
                }
                other => Err(format!("expected a number after '-', found {other:?}")),
            },
            Some(Tok::Sym("(")) => {
                let e = self.or()?;
                self.expect(")")?;
                Ok(e)
            }
            Some(Tok::Ident(name)) => self.name(name),
            other => Err(format!("unexpected {other:?}")),
        }
    }

    /// After a name: a literal, a call, a quantifier over `properties`, or a path.
    fn name(&mut self, name: String) -> Result<Expr, String> {
        match name.as_str() {
            "true" => return Ok(Expr::Bool(true)),
            "false" => return Ok(Expr::Bool(false)),
            _ => {}
        }
        if self.peek_sym("(") {
            self.pos += 1;
            let mut args = vec![self.or()?];
            while self.peek_sym(",") {
                self.pos += 1;
                args.push(self.or()?);
            }
            self.expect(")")?;
            return match (name.as_str(), args.len()) {
                ("semver_compare", 2) | ("semver", 1) => Ok(Expr::Call(name, args)),
                _ => Err(format!(
                    "unsupported function {name}/{} (supported: semver_compare/2, semver/1)",
                    args.len()
                )),
            };
        }
        let mut path = Vec::new();
        while self.peek_sym(".") {
            self.pos += 1;
            path.push(self.ident()?);
        }
        if name == "properties" && path.len() == 1 && self.peek_sym("(") {
            let all = match path[0].as_str() {
                "exists" => false,
                "all" => true,
                m => return Err(format!("unsupported macro properties.{m}")),
            };
            self.pos += 1;
            let var = self.ident()?;
            self.expect(",")?;
            let body = Box::new(self.or()?);
            self.expect(")")?;
            return Ok(Expr::Quantifier { all, var, body });
        }
        Ok(Expr::Path(name, path))
    }
}

#[derive(Clone, Debug, PartialEq)]
enum Val {
    Json(Value),
    Version(Version),
}

fn truthy(v: &Val) -> bool {
    matches!(v, Val::Json(Value::Bool(true)))
}

fn version_of(v: &Val) -> Result<Version, String> {
    match v {
        Val::Version(v) => Ok(v.clone()),
        Val::Json(Value::String(s)) => {
            Version::parse(s.trim_start_matches('v')).map_err(|e| format!("semver({s:?}): {e}"))
        }
        other => Err(format!("not a version: {other:?}")),
    }
}

fn compare(a: &Val, b: &Val) -> Option<Ordering> {
    match (a, b) {
        (Val::Version(_), _) | (_, Val::Version(_)) => {
            Some(version_of(a).ok()?.cmp_precedence(&version_of(b).ok()?))
        }
        (Val::Json(Value::Number(x)), Val::Json(Value::Number(y))) => {
            x.as_f64()?.partial_cmp(&y.as_f64()?)
        }
        (Val::Json(Value::String(x)), Val::Json(Value::String(y))) => Some(x.cmp(y)),
        (Val::Json(x), Val::Json(y)) => (x == y).then_some(Ordering::Equal),
    }
}

/// One bound variable: its name and the property (`{type, value}`) it stands for.
type Scope<'a> = Option<(&'a str, &'a Value)>;

fn eval(e: &Expr, props: &[Value], scope: Scope<'_>) -> Result<Val, String> {
    Ok(match e {
        Expr::Str(s) => Val::Json(Value::String(s.clone())),
        Expr::Int(n) => Val::Json(Value::from(*n)),
        Expr::Bool(b) => Val::Json(Value::Bool(*b)),
        Expr::Path(var, path) => {
            let (name, value) = scope.ok_or_else(|| format!("unknown name {var:?}"))?;
            if name != var {
                return Err(format!("unknown name {var:?}"));
            }
            let found = path.iter().try_fold(value, |v, seg| v.get(seg.as_str()));
            Val::Json(found.cloned().unwrap_or(Value::Null))
        }
        Expr::Not(x) => Val::Json(Value::Bool(!truthy(&eval(x, props, scope)?))),
        Expr::And(a, b) => Val::Json(Value::Bool(
            truthy(&eval(a, props, scope)?) && truthy(&eval(b, props, scope)?),
        )),
        Expr::Or(a, b) => Val::Json(Value::Bool(
            truthy(&eval(a, props, scope)?) || truthy(&eval(b, props, scope)?),
        )),
        Expr::Cmp(a, op, b) => {
            let ord = compare(&eval(a, props, scope)?, &eval(b, props, scope)?);
            let r = match op {
                CmpOp::Eq => ord == Some(Ordering::Equal),
                CmpOp::Ne => ord != Some(Ordering::Equal),
                CmpOp::Lt => ord == Some(Ordering::Less),
                CmpOp::Le => matches!(ord, Some(Ordering::Less | Ordering::Equal)),
                CmpOp::Gt => ord == Some(Ordering::Greater),
                CmpOp::Ge => matches!(ord, Some(Ordering::Greater | Ordering::Equal)),
            };
            Val::Json(Value::Bool(r))
        }
        Expr::Call(f, args) => {
            let vals = args
                .iter()
                .map(|a| eval(a, props, scope))
                .collect::<Result<Vec<_>, _>>()?;
            let versions = vals.iter().map(version_of).collect::<Result<Vec<_>, _>>();
            match (f.as_str(), versions) {
                ("semver", Ok(mut v)) => Val::Version(v.remove(0)),
                ("semver_compare", Ok(v)) => {
                    Val::Json(Value::from(match v[0].cmp_precedence(&v[1]) {
                        Ordering::Less => -1,
                        Ordering::Equal => 0,
                        Ordering::Greater => 1,
                    }))
                }
                // A property without a parseable version does not match.
                _ => Val::Json(Value::Null),
            }
        }
        Expr::Quantifier { all, var, body } => {
            let mut hit = *all;
            for p in props {
                let r = truthy(&eval(body, props, Some((var, p)))?);
                if r != *all {
                    hit = !*all;
                    break;
                }
            }
            Val::Json(Value::Bool(hit))
        }
    })
}

/// Whether a bundle with `properties` (each `{"type": …, "value": …}`) satisfies `rule`.
pub fn matches(rule: &Expr, properties: &[Value]) -> Result<bool, String> {
    Ok(truthy(&eval(rule, properties, None)?))
}

/// The package names a rule compares `….packageName` with: where to look for bundles
/// that could satisfy it.
pub fn package_names(rule: &Expr, out: &mut Vec<String>) {
    match rule {
        Expr::Cmp(a, CmpOp::Eq, b) => {
            if let (Expr::Path(_, p), Expr::Str(s)) | (Expr::Str(s), Expr::Path(_, p)) =
                (a.as_ref(), b.as_ref())
                && p.last().is_some_and(|l| l == "packageName")
                && !out.contains(s)
            {
                out.push(s.clone());
            }
        }
        Expr::Not(x) => package_names(x, out),
        Expr::And(a, b) | Expr::Or(a, b) => {
            package_names(a, out);
            package_names(b, out);
        }
        Expr::Quantifier { body, .. } => package_names(body, out),
        _ => {}
    }
}
