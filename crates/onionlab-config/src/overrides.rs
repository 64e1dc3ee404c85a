//! Command-line overrides: `PATH=VALUE` settings applied to a config's TOML tree before
//! validation (`onionlab run --set`, `onionlab sweep --vary`).
//!
//! **Owns:** parsing an override (its field path and its TOML value) and writing it into the
//! raw tree, with a problem naming the override when its path does not lead anywhere.
//! **Must not touch:** validation. An override only edits the tree; the result goes through
//! the same checks as a hand-written file, so a bad value is reported at its field path
//! exactly as it would be in the file.
//!
//! A path is the field path that `onionlab check` prints: keys joined by dots, arrays of
//! tables indexed by position, by `name`, or all at once:
//!
//! | override | sets |
//! |---|---|
//! | `mechanisms.scheduler=ewma` | a string (a bare word needs no quotes) |
//! | `experiment.duration=5 min` | a string: anything that is not a TOML value is one |
//! | `tor.circ_window=500` | an integer (`"500"` for the string) |
//! | `clients[bulk].count=100` | the client group named `bulk` |
//! | `relays[3].bandwidth=2 MiB/s` | the fourth relay of the config's own `[[relays]]` |
//! | `relays[*].link_up=100 Mbit` | every relay of the config's own `[[relays]]` |
//! | `network.latency={ constant = "30 ms" }` | an inline table (replaces the whole key) |
//!
//! Tables on the way are created when missing, so `mechanisms.throttling.kind=static` works
//! on a config without `[mechanisms]`. Overrides apply in order, after a `network_file` is
//! merged (so they reach its clients and workloads) but not inside a `relays_file`, which is
//! read during validation: relays from such a file are changed through `[mechanisms]`
//! defaults, or by generating the file anew.

use toml::{Table, Value};

use crate::parse::ConfigError;

/// One step of an override's path.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Step {
    /// A key of a table.
    Key(String),
    /// The element at a position of an array.
    Index(usize),
    /// The table of an array of tables whose `name` is this.
    Name(String),
    /// Every element of an array.
    All,
}

impl Step {
    /// The key of a key step (a path's first step always is one).
    fn key(&self) -> &str {
        match self {
            Step::Key(k) => k,
            _ => unreachable!("parse_path starts with a key"),
        }
    }
}

/// A parsed `PATH=VALUE` setting.
#[derive(Clone, Debug, PartialEq)]
pub struct Override {
    /// The path as given (for messages).
    pub path: String,
    steps: Vec<Step>,
    /// The value written at the path.
    pub value: Value,
}

impl Override {
    /// Parses `PATH=VALUE`. The value is read as TOML (`500`, `true`, `"x"`, `[1, 2]`,
    /// `{ constant = "30 ms" }`); anything else is taken as a string, so `5 min` and `ewma`
    /// need no quotes. A value that starts like a TOML string, array or inline table but
    /// does not parse is an error rather than a string.
    pub fn parse(text: &str) -> Result<Override, ConfigError> {
        let Some((path, value)) = text.split_once('=') else {
            return Err(ConfigError::new(text.trim(), format!("override {text:?} has no `=`"))
                .with_hint("give PATH=VALUE, e.g. tor.circ_window=500 or mechanisms.scheduler=ewma"));
        };
        let path = path.trim();
        let steps = parse_path(path)?;
        let value = parse_value(path, value.trim())?;
        Ok(Override { path: path.to_string(), steps, value })
    }

    /// Writes the value into `root`. A problem names the override and what its path met.
    pub fn apply(&self, root: &mut Table) -> Result<(), ConfigError> {
        let from_file = self.steps[0] == Step::Key("relays".into()) && !root.contains_key("relays") && root.contains_key("relays_file");
        self.write(root).map_err(|e| {
            if from_file {
                e.with_hint(
                    "this config's relays come from its relays_file, which overrides do not reach; set relays' defaults in [mechanisms]",
                )
            } else {
                e
            }
        })
    }

    fn write(&self, root: &mut Table) -> Result<(), ConfigError> {
        if !self.steps.contains(&Step::All) {
            return self.write_counting(root).map(|_| ());
        }
        // [*] over nothing would set nothing and let the run go on unchanged; tried on a copy
        // so that such an override leaves no empty arrays behind.
        let mut trial = root.clone();
        if self.write_counting(&mut trial)? == 0 {
            let last_all = self.steps.iter().rposition(|s| *s == Step::All).expect("checked above");
            let prefix = self.steps[1..=last_all].iter().fold(self.steps[0].key().to_string(), |p, s| extend_path(&p, s));
            return Err(self.error(format!("`{prefix}` matches no element, so this sets nothing")));
        }
        *root = trial;
        Ok(())
    }

    /// Writes the value at every place the path leads to and returns how many there were.
    fn write_counting(&self, root: &mut Table) -> Result<usize, ConfigError> {
        let (last, init) = self.steps.split_last().expect("a parsed path has at least one step");
        let Step::Key(first) = &self.steps[0] else { unreachable!("parse_path starts with a key") };
        if init.is_empty() {
            root.insert(first.clone(), self.value.clone());
            return Ok(1);
        }
        let mut here: Vec<&mut Value> = Vec::new();
        let mut walked = first.clone();
        if self.steps[1] != Step::All || root.contains_key(first) {
            here.push(root.entry(first.clone()).or_insert_with(|| new_container(&self.steps[1])));
        }
        for (i, step) in init.iter().enumerate().skip(1) {
            let next_step = &self.steps[i + 1];
            let mut next = Vec::new();
            for v in here {
                next.extend(self.descend(v, step, next_step, &walked)?);
            }
            walked = extend_path(&walked, step);
            here = next;
        }
        let mut set = 0;
        for v in here {
            match (last, v) {
                (Step::Key(k), Value::Table(t)) => {
                    t.insert(k.clone(), self.value.clone());
                    set += 1;
                }
                (Step::Index(_) | Step::Name(_) | Step::All, v @ Value::Array(_)) => {
                    for slot in self.descend(v, last, last, &walked)? {
                        *slot = self.value.clone();
                        set += 1;
                    }
                }
                (_, v) => return Err(self.mismatch(&walked, last, v)),
            }
        }
        Ok(set)
    }

    /// The values one step below `v` (several for `[*]`), creating a missing table key.
    fn descend<'a>(&self, v: &'a mut Value, step: &Step, next: &Step, walked: &str) -> Result<Vec<&'a mut Value>, ConfigError> {
        match (step, v) {
            // Nothing to walk into with [*]: a missing array is not created empty.
            (Step::Key(k), Value::Table(t)) if *next == Step::All && !t.contains_key(k) => Ok(Vec::new()),
            (Step::Key(k), Value::Table(t)) => Ok(vec![t.entry(k.clone()).or_insert_with(|| new_container(next))]),
            (Step::Index(i), Value::Array(a)) => {
                let n = a.len();
                match a.get_mut(*i) {
                    Some(x) => Ok(vec![x]),
                    None => Err(self.error(format!("`{walked}` has {n} element{}, so there is no [{i}]", plural(n)))),
                }
            }
            (Step::Name(name), Value::Array(a)) => {
                let names: Vec<String> = a.iter().filter_map(|x| x.get("name").and_then(Value::as_str)).map(|s| format!("{s:?}")).collect();
                match a.iter_mut().find(|x| x.get("name").and_then(Value::as_str) == Some(name.as_str())) {
                    Some(x) => Ok(vec![x]),
                    None => Err(self.error(format!("`{walked}` has no element named {name:?}")).with_hint(if names.is_empty() {
                        "its elements have no `name`; select one by position, e.g. [0]".to_string()
                    } else {
                        format!("its names are {}", names.join(", "))
                    })),
                }
            }
            (Step::All, Value::Array(a)) => Ok(a.iter_mut().collect()),
            (step, v) => Err(self.mismatch(walked, step, v)),
        }
    }

    fn error(&self, message: String) -> ConfigError {
        ConfigError::new(self.path.clone(), format!("override: {message}"))
    }

    fn mismatch(&self, walked: &str, step: &Step, v: &Value) -> ConfigError {
        let (want, hint) = match step {
            Step::Key(_) => ("a table", format!("`{walked}` is set whole: {walked}=VALUE")),
            _ => ("an array", format!("only arrays are indexed; use {walked}.KEY for a table")),
        };
        self.error(format!("`{walked}` is {}, not {want}", kind(v))).with_hint(hint)
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::String(_) => "a string",
        Value::Integer(_) => "an integer",
        Value::Float(_) => "a float",
        Value::Boolean(_) => "a boolean",
        Value::Datetime(_) => "a date-time",
        Value::Array(_) => "an array",
        Value::Table(_) => "a table",
    }
}

/// What a missing key becomes when the path goes on below it: a table for `.key`; for an
/// index an empty array, which then reports that it has no such element.
fn new_container(next: &Step) -> Value {
    match next {
        Step::Key(_) => Value::Table(Table::new()),
        _ => Value::Array(Vec::new()),
    }
}

fn extend_path(walked: &str, step: &Step) -> String {
    match step {
        Step::Key(k) => format!("{walked}.{k}"),
        Step::Index(i) => format!("{walked}[{i}]"),
        Step::Name(n) => format!("{walked}[{n}]"),
        Step::All => format!("{walked}[*]"),
    }
}

fn is_bare(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '-'
}

/// `a.b[2].c`, `clients[web].count`, `workloads."my.web".size`.
fn parse_path(path: &str) -> Result<Vec<Step>, ConfigError> {
    let bad = |why: &str| {
        ConfigError::new(path, format!("override: bad field path ({why})"))
            .with_hint("keys joined by dots, arrays indexed as [3], [name] or [*], e.g. clients[web].count")
    };
    if path.is_empty() {
        return Err(bad("it is empty"));
    }
    let chars: Vec<char> = path.chars().collect();
    let mut steps = Vec::new();
    let mut i = 0;
    let mut want_key = true;
    while i < chars.len() {
        let c = chars[i];
        if want_key {
            if c == '"' {
                let end = chars[i + 1..].iter().position(|&c| c == '"').ok_or_else(|| bad("an unclosed quote"))?;
                steps.push(Step::Key(chars[i + 1..i + 1 + end].iter().collect()));
                i += end + 2;
            } else {
                let len = chars[i..].iter().take_while(|&&c| is_bare(c)).count();
                if len == 0 {
                    return Err(bad(&format!("a key expected at {:?}", chars[i..].iter().collect::<String>())));
                }
                steps.push(Step::Key(chars[i..i + len].iter().collect()));
                i += len;
            }
            want_key = false;
        } else if c == '.' {
            want_key = true;
            i += 1;
        } else if c == '[' {
            let end = chars[i + 1..].iter().position(|&c| c == ']').ok_or_else(|| bad("an unclosed ["))?;
            let inner: String = chars[i + 1..i + 1 + end].iter().collect();
            let inner = inner.trim();
            steps.push(if inner == "*" {
                Step::All
            } else if let Ok(n) = inner.parse::<usize>() {
                Step::Index(n)
            } else if !inner.is_empty() {
                Step::Name(inner.trim_matches('"').to_string())
            } else {
                return Err(bad("an empty []"));
            });
            i += end + 2;
        } else {
            return Err(bad(&format!("unexpected {c:?}")));
        }
    }
    if want_key {
        return Err(bad("it ends with a dot"));
    }
    Ok(steps)
}

fn parse_value(path: &str, text: &str) -> Result<Value, ConfigError> {
    if text.is_empty() {
        return Err(ConfigError::new(path, "override: no value after `=`").with_hint(format!("{path}=VALUE")));
    }
    match format!("v = {text}").parse::<Table>() {
        Ok(mut t) => Ok(t.remove("v").expect("parsed `v = ...`")),
        Err(e) if text.starts_with(['"', '\'', '[', '{']) => {
            let msg = e.message().trim().replace('\n', " ");
            Err(ConfigError::new(path, format!("override: the value {text} is not valid TOML: {msg}"))
                .with_hint("strings may go unquoted; arrays as [1, 2], tables as { key = \"value\" }"))
        }
        Err(_) => Ok(Value::String(text.to_string())),
    }
}

/// Applies every override in order; returns every problem (each override on its own).
pub fn apply_all(root: &mut Table, overrides: &[Override]) -> Vec<ConfigError> {
    overrides.iter().filter_map(|o| o.apply(root).err()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(text: &str) -> Table {
        text.parse().unwrap()
    }

    fn set(root: &mut Table, o: &str) -> Result<(), ConfigError> {
        Override::parse(o)?.apply(root)
    }

    const CFG: &str = r#"
        [experiment]
        duration = "10 min"
        [[clients]]
        name = "web"
        count = 950
        [[clients]]
        name = "bulk"
        count = 50
        [[relays]]
        name = "a"
        bandwidth = "1 MiB/s"
        [[relays]]
        name = "b"
        bandwidth = "2 MiB/s"
    "#;

    #[test]
    fn values_are_toml_or_else_strings() {
        let v = |s: &str| Override::parse(s).unwrap().value;
        assert_eq!(v("tor.circ_window=500"), Value::Integer(500));
        assert_eq!(v("tor.circ_window=\"500\""), Value::String("500".into()));
        assert_eq!(v("x=true"), Value::Boolean(true));
        assert_eq!(v("x=0.5"), Value::Float(0.5));
        assert_eq!(v("experiment.duration=5 min"), Value::String("5 min".into()));
        assert_eq!(v("mechanisms.scheduler = ewma"), Value::String("ewma".into()));
        assert_eq!(v("x=[1, 2]"), Value::Array(vec![Value::Integer(1), Value::Integer(2)]));
        let t = v(r#"network.latency={ constant = "30 ms" }"#);
        assert_eq!(t.get("constant").and_then(Value::as_str), Some("30 ms"));
        // An `=` inside the value belongs to the value.
        assert_eq!(v("a.b=x=y"), Value::String("x=y".into()));
    }

    #[test]
    fn sets_keys_creating_tables_on_the_way() {
        let mut t = tree(CFG);
        set(&mut t, "experiment.duration=5 min").unwrap();
        set(&mut t, "mechanisms.throttling.kind=static").unwrap();
        set(&mut t, "seedless=1").unwrap();
        assert_eq!(t["experiment"]["duration"].as_str(), Some("5 min"));
        assert_eq!(t["mechanisms"]["throttling"]["kind"].as_str(), Some("static"));
        assert_eq!(t["seedless"].as_integer(), Some(1));
    }

    #[test]
    fn selects_array_elements_by_position_name_or_all() {
        let mut t = tree(CFG);
        set(&mut t, "clients[bulk].count=100").unwrap();
        set(&mut t, "relays[0].bandwidth=3 MiB/s").unwrap();
        set(&mut t, "relays[*].link_up=100 Mbit").unwrap();
        set(&mut t, "clients[\"web\"].count=10").unwrap();
        // Positions count from 0: [1] is the second element.
        set(&mut t, "relays[1].name=second").unwrap();
        let clients = t["clients"].as_array().unwrap();
        assert_eq!(clients[0]["count"].as_integer(), Some(10));
        assert_eq!(clients[1]["count"].as_integer(), Some(100));
        let relays = t["relays"].as_array().unwrap();
        assert_eq!(relays[0]["bandwidth"].as_str(), Some("3 MiB/s"));
        assert_eq!(relays[1]["bandwidth"].as_str(), Some("2 MiB/s"));
        assert_eq!((relays[0]["name"].as_str(), relays[1]["name"].as_str()), (Some("a"), Some("second")));
        assert!(relays.iter().all(|r| r["link_up"].as_str() == Some("100 Mbit")));
    }

    #[test]
    fn quoted_keys_hold_dots() {
        let mut t = tree("[workloads.\"my.web\"]\nsize = \"1 KiB\"\n");
        set(&mut t, "workloads.\"my.web\".size=2 KiB").unwrap();
        assert_eq!(t["workloads"]["my.web"]["size"].as_str(), Some("2 KiB"));
    }

    #[test]
    fn problems_name_the_override_and_what_it_met() {
        let mut t = tree(CFG);
        let e = set(&mut t, "clients[heavy].count=1").unwrap_err();
        assert_eq!(e.path, "clients[heavy].count");
        assert!(e.message.contains("no element named \"heavy\""), "{e}");
        assert!(e.hint.as_deref().unwrap().contains("\"web\", \"bulk\""), "{e}");

        let e = set(&mut t, "relays[5].bandwidth=1 MiB/s").unwrap_err();
        assert!(e.message.contains("`relays` has 2 elements, so there is no [5]"), "{e}");

        let e = set(&mut t, "experiment.duration.value=1").unwrap_err();
        assert!(e.message.contains("`experiment.duration` is a string, not a table"), "{e}");

        let e = set(&mut t, "experiment[0].duration=1").unwrap_err();
        assert!(e.message.contains("`experiment` is a table, not an array"), "{e}");

        // A config whose relays come from a relays_file has no `relays` to index.
        let mut t = tree("relays_file = \"r.toml\"\n");
        let e = set(&mut t, "relays[0].bandwidth=1 MiB/s").unwrap_err();
        assert!(e.message.contains("`relays` has 0 elements"), "{e}");
        assert!(e.hint.as_deref().unwrap().contains("relays_file"), "{e}");
    }

    #[test]
    fn malformed_overrides_are_problems_not_strings() {
        for (text, says) in [
            ("tor.circ_window", "has no `=`"),
            ("=1", "it is empty"),
            ("a..b=1", "a key expected"),
            ("a.=1", "ends with a dot"),
            ("a[0=1", "unclosed ["),
            ("a[]=1", "empty []"),
            ("a b=1", "unexpected ' '"),
            ("a=", "no value"),
            ("a=[1, ", "not valid TOML"),
            ("a=\"x", "not valid TOML"),
        ] {
            let e = Override::parse(text).unwrap_err();
            assert!(e.message.contains(says), "{text}: {e}");
        }
    }

    #[test]
    fn every_element_of_nothing_is_an_error() {
        // `relays[*]` on a config whose relays come from a relays_file once set nothing and
        // the run went on unchanged.
        let mut t = tree("relays_file = \"relays.toml\"\n[experiment]\nduration = \"1 min\"\n");
        let e = set(&mut t, "relays[*].scheduler=ewma").unwrap_err();
        assert_eq!(e.path, "relays[*].scheduler");
        assert!(e.message.contains("`relays[*]` matches no element, so this sets nothing"), "{e}");
        assert!(e.hint.as_deref().is_some_and(|h| h.contains("relays_file")), "{e}");
        assert!(!t.contains_key("relays"), "a refused override leaves no empty array behind");
        let mut t = tree("clients = []\n");
        let e = set(&mut t, "clients[*]={ name = \"x\" }").unwrap_err();
        assert!(e.message.contains("`clients[*]` matches no element"), "{e}");
        // Nested: one element's empty inner array is no problem while another's is set, and
        // nothing is created where the path found nothing.
        let mut t = tree("[[clients]]\nname = \"a\"\npath = [\"g\", \"m\", \"e\"]\n[[clients]]\nname = \"b\"\n");
        set(&mut t, "clients[*].path[*]=x").unwrap();
        assert_eq!(t["clients"][0]["path"].as_array().unwrap().len(), 3);
        assert!(t["clients"][1].get("path").is_none(), "{t:?}");
        let mut t = tree("[[clients]]\nname = \"b\"\n");
        let e = set(&mut t, "clients[*].path[*]=x").unwrap_err();
        assert!(e.message.contains("`clients[*].path[*]` matches no element"), "{e}");
        assert!(t["clients"][0].get("path").is_none(), "{t:?}");
        let mut t = tree(CFG);
        set(&mut t, "relays[*].link_up=100 Mbit").unwrap();
        assert!(t["relays"].as_array().unwrap().iter().all(|r| r["link_up"].as_str() == Some("100 Mbit")));
    }

    #[test]
    fn apply_all_reports_each_failing_override_and_applies_the_rest() {
        let mut t = tree(CFG);
        let os: Vec<Override> =
            ["clients[x].count=1", "experiment.duration=1 min", "relays[9].name=z"].iter().map(|s| Override::parse(s).unwrap()).collect();
        let errs = apply_all(&mut t, &os);
        assert_eq!(errs.iter().map(|e| e.path.as_str()).collect::<Vec<_>>(), ["clients[x].count", "relays[9].name"]);
        assert_eq!(t["experiment"]["duration"].as_str(), Some("1 min"));
    }
}
