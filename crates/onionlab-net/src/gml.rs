//! Parser for network topologies in GML, the graph format Shadow uses.
//!
//! **Owns:** reading GML text (key–value pairs whose values are integers, reals, quoted
//! strings or nested `[ ... ]` lists, with `#` comments) into a [`GmlGraph`] of nodes with
//! optional bandwidths and edges with latency and loss, and rejecting files that do not
//! describe one with a line number and the offending field.
//!
//! **Must not touch:** what the graph means for routing. Shortest paths and the latency
//! matrix are [`crate::latency`]'s business; this module only checks that the file is
//! well formed and self-consistent (unique node ids, edges between known nodes).
//!
//! Shadow files carry many attributes onionlab has no use for (country codes, IP
//! addresses, ...); unknown keys inside `graph`, `node` and `edge` are ignored. An edge's
//! `jitter` is accepted and ignored too: the transport model has no per-packet delay
//! variation, so honouring it would need more than a parser.

use std::collections::BTreeMap;

use onionlab_core::units::{parse_bandwidth, parse_duration, UnitError};
use onionlab_core::SimDuration;

/// A network topology as read from a GML file.
#[derive(Debug, Clone, PartialEq)]
pub struct GmlGraph {
    /// `directed 1`; otherwise every edge goes both ways.
    pub directed: bool,
    /// In the order they appear in the file.
    pub nodes: Vec<GmlNode>,
    /// In the order they appear in the file.
    pub edges: Vec<GmlEdge>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct GmlNode {
    pub id: u64,
    /// From `host_bandwidth_up`, in bits per second.
    pub bandwidth_up_bits: Option<u64>,
    /// From `host_bandwidth_down`, in bits per second.
    pub bandwidth_down_bits: Option<u64>,
    pub label: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct GmlEdge {
    pub source: u64,
    pub target: u64,
    /// One-way latency of this edge.
    pub latency: SimDuration,
    /// Probability in [0, 1] that a packet on this edge is lost; 0 when absent.
    pub packet_loss: f64,
}

/// Why a GML file was rejected. Line numbers are 1-based; node and edge errors give the
/// line of their `node`/`edge` key unless a specific field is at fault.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum GmlError {
    #[error("GML line {line}: expected {expected}, found {found}")]
    Syntax { line: usize, expected: &'static str, found: String },
    #[error("GML line {line}: lists are nested more than {MAX_DEPTH} deep; a topology needs three levels (graph, node, attribute)")]
    TooDeep { line: usize },
    #[error("GML has no `graph [ ... ]` block; a topology file must hold exactly one")]
    MissingGraph,
    #[error("GML line {line}: second `graph` block; a topology file must hold exactly one")]
    DuplicateGraph { line: usize },
    #[error("GML line {line}: unknown top-level key `{key}`; only `graph [ ... ]` (and the `Creator`/`Version` header) may appear outside the graph")]
    UnknownTopLevel { line: usize, key: String },
    #[error("GML line {line}: {item} has no `{field}`; {hint}")]
    MissingField { line: usize, item: &'static str, field: &'static str, hint: &'static str },
    #[error("GML line {line}: `{field}` appears twice in one {item}; keep only one")]
    DuplicateField { line: usize, item: &'static str, field: &'static str },
    #[error("GML line {line}: `{field}` must be {expected}, found {found}")]
    WrongType { line: usize, field: &'static str, expected: &'static str, found: String },
    #[error("GML line {line}: `{field}` is the bare number {value}; {hint}")]
    BareNumber { line: usize, field: &'static str, value: String, hint: &'static str },
    #[error("GML line {line}: `{field}`: {source}")]
    Unit { line: usize, field: &'static str, source: UnitError },
    #[error("GML line {line}: `{field}` {value} is outside [0, 1]; loss is a probability, e.g. 0.01 for 1%")]
    LossOutOfRange { line: usize, field: &'static str, value: f64 },
    #[error("GML line {line}: node id {id} was already used by the node at line {first_line}; node ids must be unique")]
    DuplicateNode { line: usize, id: u64, first_line: usize },
    #[error("GML line {line}: edge {field} {id} is not the id of any node; declare `node [ id {id} ]` or fix the edge")]
    UnknownNode { line: usize, field: &'static str, id: u64 },
}

/// Deep enough for any topology; shallow enough that hostile input cannot overflow the stack.
const MAX_DEPTH: usize = 32;

/// Parses a Shadow-style GML topology. See the module docs for what is checked.
pub fn parse_gml(text: &str) -> Result<GmlGraph, GmlError> {
    let mut graph = None;
    for e in Lexer::new(text).document()? {
        match (e.key, e.value) {
            ("graph", Value::List(items)) if graph.is_none() => graph = Some(items),
            ("graph", Value::List(_)) => return Err(GmlError::DuplicateGraph { line: e.line }),
            ("graph", v) => return Err(wrong_type(e.line, "graph", "a `[ ... ]` list", &v)),
            // Standard GML header that graph tools (igraph, ...) write.
            ("Creator" | "Version", _) => {}
            (key, _) => return Err(GmlError::UnknownTopLevel { line: e.line, key: key.to_string() }),
        }
    }
    build_graph(graph.ok_or(GmlError::MissingGraph)?)
}

fn build_graph(items: Vec<Entry<'_>>) -> Result<GmlGraph, GmlError> {
    let mut directed = None;
    let (mut nodes, mut edges) = (Vec::new(), Vec::new());
    let mut first_line = BTreeMap::new();
    let mut edge_lines = Vec::new();
    for e in items {
        let line = e.line;
        match e.key {
            "directed" => {
                let d = match e.value {
                    Value::Int(0) => false,
                    Value::Int(1) => true,
                    ref v => return Err(wrong_type(line, "directed", "0 or 1", v)),
                };
                set(&mut directed, d, line, "graph", "directed")?;
            }
            "node" => {
                let node = node(line, list(e, "node")?)?;
                if let Some(&first) = first_line.get(&node.id) {
                    return Err(GmlError::DuplicateNode { line, id: node.id, first_line: first });
                }
                first_line.insert(node.id, line);
                nodes.push(node);
            }
            "edge" => {
                edge_lines.push(line);
                edges.push(edge(line, list(e, "edge")?)?);
            }
            _ => {}
        }
    }
    // Checked after the whole graph is read: GML does not require nodes before edges.
    for (edge, &line) in edges.iter().zip(&edge_lines) {
        for (field, id) in [("source", edge.source), ("target", edge.target)] {
            if !first_line.contains_key(&id) {
                return Err(GmlError::UnknownNode { line, field, id });
            }
        }
    }
    Ok(GmlGraph { directed: directed.unwrap_or(false), nodes, edges })
}

fn node(line: usize, items: Vec<Entry<'_>>) -> Result<GmlNode, GmlError> {
    let (mut id, mut up, mut down, mut label) = (None, None, None, None);
    for e in items {
        match e.key {
            "id" => set(&mut id, node_id(&e, "id")?, e.line, "node", "id")?,
            "host_bandwidth_up" => set(&mut up, bandwidth(&e, "host_bandwidth_up")?, e.line, "node", "host_bandwidth_up")?,
            "host_bandwidth_down" => set(&mut down, bandwidth(&e, "host_bandwidth_down")?, e.line, "node", "host_bandwidth_down")?,
            "label" => match e.value {
                Value::Str(s) => set(&mut label, s.to_string(), e.line, "node", "label")?,
                ref v => return Err(wrong_type(e.line, "label", "a quoted string", v)),
            },
            _ => {}
        }
    }
    let id = id.ok_or(GmlError::MissingField { line, item: "node", field: "id", hint: "add e.g. `id 0`" })?;
    Ok(GmlNode { id, bandwidth_up_bits: up, bandwidth_down_bits: down, label })
}

fn edge(line: usize, items: Vec<Entry<'_>>) -> Result<GmlEdge, GmlError> {
    let (mut source, mut target, mut latency, mut loss) = (None, None, None, None);
    for e in items {
        match e.key {
            "source" => set(&mut source, node_id(&e, "source")?, e.line, "edge", "source")?,
            "target" => set(&mut target, node_id(&e, "target")?, e.line, "edge", "target")?,
            "latency" => set(&mut latency, duration(&e, "latency")?, e.line, "edge", "latency")?,
            "packet_loss" => set(&mut loss, probability(&e, "packet_loss")?, e.line, "edge", "packet_loss")?,
            // `jitter` is ignored on purpose (see the module docs), as are all other keys.
            _ => {}
        }
    }
    let missing = |field, hint| GmlError::MissingField { line, item: "edge", field, hint };
    Ok(GmlEdge {
        source: source.ok_or_else(|| missing("source", "add e.g. `source 0`"))?,
        target: target.ok_or_else(|| missing("target", "add e.g. `target 1`"))?,
        latency: latency.ok_or_else(|| missing("latency", "add e.g. `latency \"50 ms\"`"))?,
        packet_loss: loss.unwrap_or(0.0),
    })
}

fn set<T>(slot: &mut Option<T>, v: T, line: usize, item: &'static str, field: &'static str) -> Result<(), GmlError> {
    match slot.replace(v) {
        Some(_) => Err(GmlError::DuplicateField { line, item, field }),
        None => Ok(()),
    }
}

fn list<'a>(e: Entry<'a>, field: &'static str) -> Result<Vec<Entry<'a>>, GmlError> {
    match e.value {
        Value::List(items) => Ok(items),
        v => Err(wrong_type(e.line, field, "a `[ ... ]` list", &v)),
    }
}

fn node_id(e: &Entry<'_>, field: &'static str) -> Result<u64, GmlError> {
    match e.value {
        Value::Int(i) if i >= 0 => Ok(i as u64),
        ref v => Err(wrong_type(e.line, field, "a non-negative integer node id", v)),
    }
}

fn bandwidth(e: &Entry<'_>, field: &'static str) -> Result<u64, GmlError> {
    const HINT: &str = "old Shadow files meant KiB/s, which onionlab does not guess; write the unit, e.g. \"1024 KiB/s\" or \"10 Mbit\"";
    unit_string(e, field, HINT, parse_bandwidth)
}

fn duration(e: &Entry<'_>, field: &'static str) -> Result<SimDuration, GmlError> {
    unit_string(e, field, "write it as a quoted string with a unit, e.g. \"50 ms\"", parse_duration)
}

fn unit_string<T>(
    e: &Entry<'_>,
    field: &'static str,
    bare_hint: &'static str,
    parse: fn(&str) -> Result<T, UnitError>,
) -> Result<T, GmlError> {
    match e.value {
        Value::Str(s) => parse(s).map_err(|source| GmlError::Unit { line: e.line, field, source }),
        Value::Int(_) | Value::Real(_) => Err(GmlError::BareNumber { line: e.line, field, value: describe(&e.value), hint: bare_hint }),
        ref v => Err(wrong_type(e.line, field, "a quoted string with a unit", v)),
    }
}

fn probability(e: &Entry<'_>, field: &'static str) -> Result<f64, GmlError> {
    let p = match e.value {
        Value::Int(i) => i as f64,
        Value::Real(r) => r,
        ref v => return Err(wrong_type(e.line, field, "a number between 0 and 1", v)),
    };
    if (0.0..=1.0).contains(&p) {
        Ok(p)
    } else {
        Err(GmlError::LossOutOfRange { line: e.line, field, value: p })
    }
}

fn wrong_type(line: usize, field: &'static str, expected: &'static str, v: &Value<'_>) -> GmlError {
    GmlError::WrongType { line, field, expected, found: describe(v) }
}

fn describe(v: &Value<'_>) -> String {
    match v {
        Value::Int(i) => i.to_string(),
        Value::Real(r) => r.to_string(),
        Value::Str(s) => format!("\"{s}\""),
        Value::List(_) => "a `[ ... ]` list".to_string(),
    }
}

/// One `key value` pair; `line` is where the key is.
#[derive(Debug)]
struct Entry<'a> {
    key: &'a str,
    line: usize,
    value: Value<'a>,
}

#[derive(Debug)]
enum Value<'a> {
    Int(i64),
    Real(f64),
    /// GML strings have no escapes (quotes are written `&quot;`), so this is a slice of the input.
    Str(&'a str),
    List(Vec<Entry<'a>>),
}

/// A hand-written lexer and recursive-descent parser in one: GML's grammar is just
/// `list := (key value)*`, `value := int | real | string | '[' list ']'`.
struct Lexer<'a> {
    text: &'a str,
    pos: usize,
    line: usize,
}

impl<'a> Lexer<'a> {
    fn new(text: &'a str) -> Self {
        Lexer { text, pos: 0, line: 1 }
    }

    fn document(mut self) -> Result<Vec<Entry<'a>>, GmlError> {
        let items = self.list(0)?;
        match self.peek() {
            None => Ok(items),
            Some(_) => Err(self.syntax("a key or the end of the file")),
        }
    }

    /// Entries up to (not including) a `]` or the end of input.
    fn list(&mut self, depth: usize) -> Result<Vec<Entry<'a>>, GmlError> {
        let mut items = Vec::new();
        while let Some(c) = self.peek() {
            if c == ']' {
                break;
            }
            if !(c.is_ascii_alphabetic() || c == '_') {
                return Err(self.syntax("a key (a name such as `node` or `id`)"));
            }
            let line = self.line;
            let key = self.take_while(|c| c.is_ascii_alphanumeric() || c == '_');
            let value = self.value(key, depth)?;
            items.push(Entry { key, line, value });
        }
        Ok(items)
    }

    fn value(&mut self, key: &str, depth: usize) -> Result<Value<'a>, GmlError> {
        match self.peek() {
            Some('[') => {
                if depth >= MAX_DEPTH {
                    return Err(GmlError::TooDeep { line: self.line });
                }
                self.pos += 1;
                let items = self.list(depth + 1)?;
                match self.peek() {
                    Some(']') => {
                        self.pos += 1;
                        Ok(Value::List(items))
                    }
                    _ => Err(self.syntax("`]` to close the list")),
                }
            }
            Some('"') => {
                let start_line = self.line;
                self.pos += 1;
                let s = self.take_while(|c| c != '"');
                if self.text[self.pos..].starts_with('"') {
                    self.pos += 1;
                    Ok(Value::Str(s))
                } else {
                    Err(GmlError::Syntax {
                        line: start_line,
                        expected: "a closing `\"` for the string that starts here",
                        found: "the end of the file".to_string(),
                    })
                }
            }
            Some(c) if c.is_ascii_digit() || matches!(c, '+' | '-' | '.') => {
                let line = self.line;
                let num = self.take_while(|c| c.is_ascii_digit() || matches!(c, '+' | '-' | '.' | 'e' | 'E'));
                if let Ok(i) = num.parse::<i64>() {
                    return Ok(Value::Int(i));
                }
                match num.parse::<f64>() {
                    Ok(r) if r.is_finite() && !num.bytes().all(|b| b.is_ascii_digit() || b == b'+' || b == b'-') => Ok(Value::Real(r)),
                    _ => Err(GmlError::Syntax {
                        line,
                        expected: "a number (an integer within 64 bits or a finite real)",
                        found: format!("`{num}` as the value of `{key}`"),
                    }),
                }
            }
            _ => Err(self.syntax("a value (a number, a quoted string or `[`)")),
        }
    }

    /// Skips whitespace and comments, then returns the next character without consuming it.
    fn peek(&mut self) -> Option<char> {
        loop {
            let c = self.text[self.pos..].chars().next()?;
            if c == '#' {
                self.take_while(|c| c != '\n');
            } else if c.is_whitespace() {
                self.take_while(char::is_whitespace);
            } else {
                return Some(c);
            }
        }
    }

    /// Consumes characters while `f` holds, counting newlines.
    fn take_while(&mut self, f: impl Fn(char) -> bool) -> &'a str {
        let rest = &self.text[self.pos..];
        let len = rest.find(|c| !f(c)).unwrap_or(rest.len());
        let s = &rest[..len];
        self.line += s.matches('\n').count();
        self.pos += len;
        s
    }

    fn syntax(&mut self, expected: &'static str) -> GmlError {
        let found = match self.peek() {
            None => "the end of the file".to_string(),
            Some(_) => {
                let rest = &self.text[self.pos..];
                let word = rest.split_whitespace().next().unwrap_or(rest);
                format!("`{}`", word.chars().take(20).collect::<String>())
            }
        };
        GmlError::Syntax { line: self.line, expected, found }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const EXAMPLE: &str = r#"
# A Shadow-style topology.
graph [
  directed 0
  node [
    id 0
    host_bandwidth_down "140 Mbit"
    host_bandwidth_up "18 Mbit"
    country_code "US"  # ignored
  ]
  node [ id 1 label "x" ]
  edge [
    source 0
    target 1
    latency "50 ms"
    jitter "0 ms"
    packet_loss 0.01
  ]
]
"#;

    #[test]
    fn parses_the_shadow_example() {
        let g = parse_gml(EXAMPLE).unwrap();
        assert!(!g.directed);
        assert_eq!(
            g.nodes,
            vec![
                GmlNode { id: 0, bandwidth_up_bits: Some(18_000_000), bandwidth_down_bits: Some(140_000_000), label: None },
                GmlNode { id: 1, bandwidth_up_bits: None, bandwidth_down_bits: None, label: Some("x".into()) },
            ]
        );
        assert_eq!(g.edges, vec![GmlEdge { source: 0, target: 1, latency: SimDuration::from_millis(50), packet_loss: 0.01 }]);
    }

    #[test]
    fn accepts_header_directed_nested_lists_and_late_nodes() {
        let g = parse_gml(
            "Creator \"igraph\"\ngraph [ directed 1 meta [ a [ b 1 ] c -2.5e3 ] \
             edge [ source 7 target 7 latency \"1 s\" packet_loss 1 ] node [ id 7 ] ]",
        )
        .unwrap();
        assert!(g.directed);
        assert_eq!(g.edges[0].latency, SimDuration::from_secs(1));
        assert_eq!(g.edges[0].packet_loss, 1.0);
    }

    fn err(text: &str) -> GmlError {
        parse_gml(text).unwrap_err()
    }

    #[test]
    fn errors_carry_line_and_field() {
        let e = err("graph [\n node [ id 0 ]\n node [ id 1 ]\n edge [\n source 0 target 1\n ]\n]");
        assert_eq!(e, GmlError::MissingField { line: 4, item: "edge", field: "latency", hint: "add e.g. `latency \"50 ms\"`" });
        assert!(e.to_string().contains("line 4") && e.to_string().contains("`latency`"), "{e}");

        let e = err("graph [\n node [ id 0 ]\n edge [ source 0 target 0\n latency \"5 parsecs\" ] ]");
        assert!(matches!(e, GmlError::Unit { line: 4, field: "latency", source: UnitError::UnknownUnit { .. } }), "{e}");
        assert!(e.to_string().contains("\"5 parsecs\""), "{e}");

        let e = err("graph [ node [ id 0\n host_bandwidth_up 1024 ] ]");
        assert!(matches!(e, GmlError::BareNumber { line: 2, field: "host_bandwidth_up", .. }), "{e}");
        assert!(e.to_string().contains("KiB/s"), "{e}");
        let e = err("graph [ node [ id 0 ] edge [ source 0 target 0 latency 50 ] ]");
        assert!(matches!(e, GmlError::BareNumber { field: "latency", .. }), "{e}");

        assert_eq!(err("graph [\n node [ id 3 ]\n node [ id 3 ] ]"), GmlError::DuplicateNode { line: 3, id: 3, first_line: 2 });
        assert_eq!(
            err("graph [ node [ id 0 ]\n edge [ source 0 target 9 latency \"1 ms\" ] ]"),
            GmlError::UnknownNode { line: 2, field: "target", id: 9 }
        );
        assert!(matches!(
            err("graph [ node [ id 0 ] edge [ source 0 target 0 latency \"1 ms\"\n packet_loss 1.5 ] ]"),
            GmlError::LossOutOfRange { line: 2, value, .. } if value == 1.5
        ));
        assert!(matches!(
            err("graph [ node [ id 0 ] edge [ source 0 target 0 latency \"1 ms\" packet_loss -0.1 ] ]"),
            GmlError::LossOutOfRange { .. }
        ));
        assert_eq!(err("\n\nnetwork [ ]"), GmlError::UnknownTopLevel { line: 3, key: "network".into() });
        assert_eq!(err("# nothing\n"), GmlError::MissingGraph);
        assert_eq!(err("graph [ ]\ngraph [ ]"), GmlError::DuplicateGraph { line: 2 });
        assert!(matches!(err("graph [ node [ label \"a\" ] ]"), GmlError::MissingField { field: "id", .. }));
        assert!(matches!(err("graph [ node [ id -1 ] ]"), GmlError::WrongType { field: "id", .. }));
        assert!(matches!(err("graph [ node [ id \"a\" ] ]"), GmlError::WrongType { field: "id", .. }));
        assert!(matches!(err("graph [ directed 2 ]"), GmlError::WrongType { field: "directed", .. }));
        assert!(matches!(err("graph [ node [ id 0 id 1 ] ]"), GmlError::DuplicateField { field: "id", .. }));
        assert!(matches!(err("graph [ node 5 ]"), GmlError::WrongType { field: "node", .. }));
    }

    #[test]
    fn syntax_errors() {
        let e = err("graph [\n node [ id 0 ]\n");
        assert!(matches!(e, GmlError::Syntax { line: 3, .. }), "{e}");
        assert!(e.to_string().contains("`]`"), "{e}");
        assert!(matches!(err("graph [ node [ label \"abc\n\n ] ]"), GmlError::Syntax { line: 1, .. }));
        assert!(matches!(err("graph [ ] ]"), GmlError::Syntax { line: 1, .. }));
        assert!(matches!(err("graph [ id ]"), GmlError::Syntax { .. }));
        assert!(matches!(err("graph [ 5 ]"), GmlError::Syntax { .. }));
        assert!(matches!(err("graph [ x 1.2.3 ]"), GmlError::Syntax { .. }));
        assert!(matches!(err("graph [ x 99999999999999999999 ]"), GmlError::Syntax { .. }));
        assert!(matches!(err("graph [ x 1e999 ]"), GmlError::Syntax { .. }));
        let deep = format!("graph [ {} {} ]", "a [ ".repeat(100), "] ".repeat(100));
        assert!(matches!(err(&deep), GmlError::TooDeep { .. }));
    }

    /// Lists nest up to `MAX_DEPTH` levels, the graph's own included.
    #[test]
    fn lists_nest_exactly_max_depth_deep() {
        let nested = |n: usize| format!("graph [ {} {} ]", "a [ ".repeat(n - 1), "] ".repeat(n - 1));
        assert!(parse_gml(&nested(MAX_DEPTH)).is_ok());
        assert!(matches!(err(&nested(MAX_DEPTH + 1)), GmlError::TooDeep { line: 1 }));
    }

    #[test]
    fn an_edge_without_packet_loss_loses_nothing() {
        let g = parse_gml("graph [ node [ id 0 ] edge [ source 0 target 0 latency \"1 ms\" ] ]").unwrap();
        assert_eq!(g.edges[0].packet_loss, 0.0);
    }

    proptest! {
        #[test]
        fn never_panics(s in "[\\[\\]a-z0-9 \"#.\\-\n]{0,60}") {
            let _ = parse_gml(&s);
        }

        #[test]
        fn never_panics_in_graph(s in "\\PC{0,40}") {
            let _ = parse_gml(&format!("graph [ node [ id 0 {s} ] ]"));
        }
    }
}
