//! Bounded YAML reading for everything that comes from outside the process: bundle
//! manifests and metadata, catalog files (and the manifests embedded in them), CRD files
//! given to `crd-diff`, and files given to the command-line tools. Every such reader calls
//! [`from_multiple`] or [`from_str`] here instead of `serde_saphyr` directly.
//!
//! What this module owns is the bound on alias expansion. YAML aliases (`*name`) repeat
//! the node an anchor (`&name`) names, so a file of a few hundred bytes can describe
//! billions of nodes ("billion laughs"); `serde_saphyr` counts replayed events as it goes
//! and stops only after materialising about a million of them (hundreds of megabytes).
//! Here the text is first scanned with the YAML parser alone ([`check_aliases`]):
//! for every anchor the scan records the size of its node (nodes and scalar bytes, with
//! the aliases inside it already expanded), so an alias costs one table look-up and
//! nothing is ever expanded or copied. The input is refused when the nodes that aliases
//! add *plus* the nodes that anchors retain (the deserializer keeps a copy of every
//! anchored node to replay it) exceed twice the nodes written in the input plus
//! [`ALIAS_NODE_ALLOWANCE`] (scalar bytes likewise, plus [`ALIAS_BYTE_ALLOWANCE`]): an
//! anchor may hold the whole document and be aliased once. So aliases can at most triple
//! what the same text would cost without them, plus about a megabyte; a bomb is refused
//! during one pass over its own text, in microseconds. Text without a `&` has no anchor,
//! hence nothing to expand, and skips the scan. Deserialization then runs with
//! `serde_saphyr`'s replay limit set to the same budget, as a second line of defence.
//! `serde_saphyr`'s own alias-to-anchor ratio check (more than ten aliases per anchor) is
//! turned off: it refuses real files (a CRD with 605 aliases of 11 anchors, each a small
//! schema) whose expansion is cheap, while the cost bound above is both a ratio (twice
//! the written amount) and an absolute allowance, and `max_aliases` still caps the count.
//!
//! Quoted scalars: Go's reader (go-yaml, like PyYAML) accepts continuation lines of a
//! multi-line quoted scalar at any indentation, where the YAML 1.2 parser here refuses
//! lines not indented past the enclosing block (`invalid indentation in multiline quoted
//! scalar`). Leading white space of a continuation line is not part of the value, so on
//! that error the reported line is indented further and the text read again
//! ([`reindent_line`]), until it reads or [`MAX_REINDENTS`] attempts were made.

use serde::de::DeserializeOwned;
use serde_saphyr::granit_parser::{Event, Parser};
use std::collections::HashMap;

/// Nodes that aliases may add (and anchors retain) beyond twice the nodes written.
pub const ALIAS_NODE_ALLOWANCE: u64 = 10_000;
/// Scalar bytes that aliases may add (and anchors retain) beyond twice those written.
pub const ALIAS_BYTE_ALLOWANCE: u64 = 1 << 20;
/// Most anchor definitions accepted in one input (`serde_saphyr`'s default budget too).
pub const MAX_ANCHORS: usize = 50_000;

/// Why an input was refused before deserialization.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AliasError {
    #[error(
        "YAML alias expansion too large at line {line}: aliases (*name) and anchors (&name) would add at least {added_nodes} nodes / {added_bytes} bytes, against {written_nodes} nodes / {written_bytes} bytes written in the input up to there (allowed: twice the written amount plus {ALIAS_NODE_ALLOWANCE} nodes / {ALIAS_BYTE_ALLOWANCE} bytes); write the repeated content out instead of using aliases"
    )]
    Expansion {
        /// Line (1-based) of the alias or anchored node at which the budget was exceeded.
        line: usize,
        added_nodes: u64,
        added_bytes: u64,
        written_nodes: u64,
        written_bytes: u64,
    },
    #[error(
        "YAML alias expansion refused at line {line}: more than {MAX_ANCHORS} anchors (&name) in one input"
    )]
    TooManyAnchors { line: usize },
}

impl AliasError {
    /// Line (1-based) where the problem was found.
    pub fn line(&self) -> usize {
        match self {
            AliasError::Expansion { line, .. } | AliasError::TooManyAnchors { line } => *line,
        }
    }
}

/// Why YAML text could not be read.
#[derive(Debug, thiserror::Error)]
pub enum YamlError {
    /// Refused by the alias-expansion bound before anything was materialised.
    #[error(transparent)]
    Alias(#[from] AliasError),
    /// Syntax, type or budget error from the deserializer.
    #[error(transparent)]
    Parse(#[from] serde_saphyr::Error),
}

impl YamlError {
    /// Line (1-based) of the error in the text, when known.
    pub fn line(&self) -> Option<u64> {
        match self {
            YamlError::Alias(a) => Some(a.line() as u64),
            YamlError::Parse(e) => e.location().map(|l| l.line()),
        }
    }
}

/// What [`check_aliases`] measured.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AliasCost {
    /// Nodes (scalars, sequences, mappings) written in the input, aliases excluded.
    pub written_nodes: u64,
    /// Scalar bytes written in the input.
    pub written_bytes: u64,
    /// Nodes added by alias expansion plus nodes retained by anchors.
    pub added_nodes: u64,
    /// Scalar bytes added by alias expansion plus bytes retained by anchors.
    pub added_bytes: u64,
}

/// Size of a node once expanded: nodes and scalar bytes.
#[derive(Clone, Copy, Default)]
struct Size {
    nodes: u64,
    bytes: u64,
}

impl Size {
    fn add(&mut self, other: Size) {
        self.nodes = self.nodes.saturating_add(other.nodes);
        self.bytes = self.bytes.saturating_add(other.bytes);
    }
}

/// An open sequence or mapping: its anchor (0 = none) and expanded size so far.
struct Open {
    anchor: usize,
    size: Size,
}

/// Scans `text` with the YAML parser only and refuses it when alias expansion (and anchor
/// retention) would cost more than the text itself plus the allowances (see the module
/// documentation). Syntax errors end the scan without an error: the deserializer reports
/// them with its usual message.
pub fn check_aliases(text: &str) -> Result<AliasCost, AliasError> {
    if memchr::memchr(b'&', text.as_bytes()).is_none() {
        return Ok(AliasCost::default());
    }
    // Written nodes can never exceed two per input byte, nor written bytes one per byte:
    // past these bounds the final check cannot pass, so refuse at once.
    let len = text.len() as u64;
    let hard_nodes = ALIAS_NODE_ALLOWANCE.saturating_add(len.saturating_mul(4));
    let hard_bytes = ALIAS_BYTE_ALLOWANCE.saturating_add(len.saturating_mul(2));
    let mut cost = AliasCost::default();
    let mut anchors: HashMap<usize, Size> = HashMap::new();
    let mut stack: Vec<Open> = Vec::new();
    // Line where the running cost first exceeded the running allowance.
    let mut first_over: Option<usize> = None;
    for item in Parser::new_from_str(text) {
        let Ok((event, span)) = item else { break };
        let line = span.start.line();
        // The expanded size of a completed node, and the anchor it defines (0 = none).
        let (node, anchor) = match event {
            Event::Scalar(value, _, anchor, _) => {
                let size = Size {
                    nodes: 1,
                    bytes: value.len() as u64,
                };
                cost.written_nodes += 1;
                cost.written_bytes = cost.written_bytes.saturating_add(size.bytes);
                (size, anchor)
            }
            Event::SequenceStart(_, anchor, _) | Event::MappingStart(_, anchor, _) => {
                cost.written_nodes += 1;
                stack.push(Open {
                    anchor,
                    size: Size { nodes: 1, bytes: 0 },
                });
                continue;
            }
            Event::SequenceEnd | Event::MappingEnd => match stack.pop() {
                Some(open) => (open.size, open.anchor),
                None => break,
            },
            Event::Alias(id) => {
                // An alias to an unknown or still open anchor (recursion) counts as one
                // node; the deserializer refuses it.
                let size = anchors
                    .get(&id)
                    .copied()
                    .unwrap_or(Size { nodes: 1, bytes: 0 });
                cost.added_nodes = cost.added_nodes.saturating_add(size.nodes);
                cost.added_bytes = cost.added_bytes.saturating_add(size.bytes);
                (size, 0)
            }
            _ => continue,
        };
        if anchor != 0 {
            if anchors.len() >= MAX_ANCHORS {
                return Err(AliasError::TooManyAnchors { line });
            }
            anchors.insert(anchor, node);
            cost.added_nodes = cost.added_nodes.saturating_add(node.nodes);
            cost.added_bytes = cost.added_bytes.saturating_add(node.bytes);
        }
        if let Some(parent) = stack.last_mut() {
            parent.size.add(node);
        }
        if first_over.is_none() && over(&cost, cost.written_nodes, cost.written_bytes) {
            first_over = Some(line);
        }
        if cost.added_nodes > hard_nodes || cost.added_bytes > hard_bytes {
            return Err(expansion(line, &cost));
        }
    }
    if over(&cost, cost.written_nodes, cost.written_bytes) {
        return Err(expansion(first_over.unwrap_or(1), &cost));
    }
    Ok(cost)
}

fn over(cost: &AliasCost, written_nodes: u64, written_bytes: u64) -> bool {
    cost.added_nodes
        > written_nodes
            .saturating_mul(2)
            .saturating_add(ALIAS_NODE_ALLOWANCE)
        || cost.added_bytes
            > written_bytes
                .saturating_mul(2)
                .saturating_add(ALIAS_BYTE_ALLOWANCE)
}

fn expansion(line: usize, cost: &AliasCost) -> AliasError {
    AliasError::Expansion {
        line,
        added_nodes: cost.added_nodes,
        added_bytes: cost.added_bytes,
        written_nodes: cost.written_nodes,
        written_bytes: cost.written_bytes,
    }
}

/// `options` with the deserializer's alias replay limit lowered to the budget
/// [`check_aliases`] enforces (two events per node, start and end), as a second line of
/// defence should the two ever count differently.
fn bounded(mut options: serde_saphyr::Options, cost: &AliasCost) -> serde_saphyr::Options {
    let nodes = cost
        .written_nodes
        .saturating_mul(2)
        .saturating_add(ALIAS_NODE_ALLOWANCE);
    let events =
        usize::try_from(nodes.saturating_mul(2).saturating_add(1024)).unwrap_or(usize::MAX);
    if let Some(budget) = options.budget.as_mut() {
        budget.enforce_alias_anchor_ratio = false;
    }
    let limits = &mut options.alias_limits;
    limits.max_total_replayed_events = limits.max_total_replayed_events.min(events);
    options
}

/// Most re-indented continuation lines tried for one input (see the module documentation).
pub const MAX_REINDENTS: usize = 4096;

const QUOTED_INDENT: &str = "invalid indentation in multiline quoted scalar";

/// `text` with line `line` (1-based) indented one column past both its own indentation
/// and that of the nearest non-blank line above it; `None` when there is no such line
/// or it starts with a document marker (`---`, `...`), which Go refuses there too.
pub fn reindent_line(text: &str, line: usize) -> Option<String> {
    let index = line.checked_sub(1)?;
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let target = lines.get(index)?;
    let marker = |m: &str| {
        target
            .strip_prefix(m)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with([' ', '\t', '\r', '\n']))
    };
    if marker("---") || marker("...") {
        return None;
    }
    let indent = |l: &str| l.len() - l.trim_start_matches(' ').len();
    let above = lines[..index]
        .iter()
        .rev()
        .find(|l| !l.trim().is_empty())
        .map_or(0, |l| indent(l));
    let pad = indent(target).max(above) + 1 - indent(target);
    let mut out = String::with_capacity(text.len() + pad);
    for (i, l) in lines.iter().enumerate() {
        if i == index {
            out.extend(std::iter::repeat_n(' ', pad));
        }
        out.push_str(l);
    }
    Some(out)
}

/// Runs `read` on `text`, re-indenting continuation lines of quoted scalars as Go's
/// reader tolerates them (see the module documentation).
fn go_tolerant<T>(text: &str, read: impl Fn(&str) -> Result<T, YamlError>) -> Result<T, YamlError> {
    let mut err = match read(text) {
        Ok(v) => return Ok(v),
        Err(e) => e,
    };
    let mut current: Option<String> = None;
    for _ in 0..MAX_REINDENTS {
        let YamlError::Parse(e) = &err else { break };
        if !e.to_string().contains(QUOTED_INDENT) {
            break;
        }
        let Some(line) = e.location().and_then(|l| usize::try_from(l.line()).ok()) else {
            break;
        };
        let Some(next) = reindent_line(current.as_deref().unwrap_or(text), line) else {
            break;
        };
        match read(&next) {
            Ok(v) => return Ok(v),
            Err(e) => err = e,
        }
        current = Some(next);
    }
    Err(err)
}

/// Reads every document of `text` (bounded: see the module documentation).
pub fn from_multiple<T: DeserializeOwned>(
    text: &str,
    options: serde_saphyr::Options,
) -> Result<Vec<T>, YamlError> {
    go_tolerant(text, |t| {
        let cost = check_aliases(t)?;
        Ok(serde_saphyr::from_multiple_with_options(
            t,
            bounded(options.clone(), &cost),
        )?)
    })
}

/// Reads the single document of `text` (bounded: see the module documentation).
pub fn from_str<T: DeserializeOwned>(
    text: &str,
    options: serde_saphyr::Options,
) -> Result<T, YamlError> {
    go_tolerant(text, |t| {
        let cost = check_aliases(t)?;
        Ok(serde_saphyr::from_str_with_options(
            t,
            bounded(options.clone(), &cost),
        )?)
    })
}

#[cfg(test)]
mod tests;
