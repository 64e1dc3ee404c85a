//! `network_file = "net/network.toml"`: a whole network (relays, clients, servers, latency,
//! bandwidth weights, tor defaults, workloads) from another TOML file, as `onionlab generate`
//! writes it.
//!
//! **Owns:** merging the network file's tables into the experiment's TOML tree before
//! validation, rebasing the file names it mentions onto the experiment's directory, and
//! relabelling the problems found in its content as `network_file:<path>`.
//! **Must not touch:** validation itself; the merged tree goes through the same checks as a
//! hand-written config.
//!
//! Merge rules (docs/config.md): `[tor]`, `[network]` and `[mechanisms]` merge key by key
//! and the experiment's keys win; `[workloads]` merge by name and the experiment's
//! definitions win; a network file's `[mechanisms]` holds only `scheduler`, the network's
//! default circuit scheduler (the mechanisms under study are the experiment's);
//! `relays`, `relays_file`, `clients` and `servers` come from one place only: giving one in
//! both is an error. A network file may not name another network file.

use std::path::Path;

use toml::{Table, Value};

use crate::parse::ConfigError;

/// Top-level keys a network file may hold.
pub const NETWORK_FILE_KEYS: &[&str] = &["tor", "network", "mechanisms", "relays", "relays_file", "clients", "servers", "workloads"];
const MERGED_BY_KEY: &[&str] = &["tor", "network", "mechanisms", "workloads"];
/// Keys a network file's `[mechanisms]` may hold: what the network runs by default, not a
/// mechanism under study.
const NETWORK_FILE_MECHANISMS: &[&str] = &["scheduler"];
const WHOLE: &[&str] = &["relays", "relays_file", "clients", "servers"];

/// What the merge took from the network file: the field paths whose content came from it
/// (prefixes of error paths), the paths overrides wrote afterwards, and the file's entries
/// of the tables merged key by key, which fill those tables again after an override
/// replaced one whole.
#[derive(Debug, Default)]
pub struct Origins {
    paths: Vec<String>,
    overridden: Vec<String>,
    by_key: Vec<(String, String, Value)>,
}

/// `path` is `prefix` or lies below it (`prefix.key`, `prefix[i]`).
fn at_or_below(path: &str, prefix: &str) -> bool {
    path.strip_prefix(prefix).is_some_and(|rest| rest.is_empty() || rest.starts_with(['.', '[', ':']))
}

impl Origins {
    /// Records the paths overrides wrote (`tor.circ_window`, or a whole `mechanisms` table)
    /// and drops the origins at or below them: a value an override set is the command
    /// line's, not the network file's.
    pub fn overridden_by<'a>(&mut self, paths: impl IntoIterator<Item = &'a str>) {
        for p in paths {
            self.paths.retain(|o| !at_or_below(o, p));
            self.overridden.push(p.to_string());
        }
    }

    /// Puts back the network file's entries of `[tor]`, `[network]`, `[mechanisms]` and
    /// `[workloads]` that an override replacing the whole table left out: such an override
    /// stands in for the experiment's own table, which the file's entries complete (so
    /// `mechanisms={ throttling = ... }` keeps the network's scheduler).
    pub fn refill(&mut self, root: &mut Table) {
        for (table, key, value) in &self.by_key {
            if let Some(Value::Table(t)) = root.get_mut(table) {
                if !t.contains_key(key) {
                    t.insert(key.clone(), value.clone());
                    let path = format!("{table}.{key}");
                    if !self.paths.contains(&path) {
                        self.paths.push(path);
                    }
                }
            }
        }
    }

    /// Whether the value at `path` (a top-level key such as `relays`, or `table.key`) came
    /// from the network file.
    pub fn contains(&self, path: &str) -> bool {
        self.paths.iter().any(|o| o == path)
    }
}

/// Merges the file named by `root["network_file"]` (if any) into `root`. Problems with the
/// file itself are pushed to `errors` at path `network_file`.
pub fn merge_network_file(root: &mut Table, base_dir: &Path, errors: &mut Vec<ConfigError>) -> Origins {
    let mut origins = Origins::default();
    let Some(v) = root.remove("network_file") else { return origins };
    let Value::String(file) = v else {
        errors.push(ConfigError::new("network_file", "expected a file name string").with_hint("network_file = \"network.toml\""));
        return origins;
    };
    let full = base_dir.join(&file);
    let text = match std::fs::read_to_string(&full) {
        Ok(t) => t,
        Err(e) => {
            errors.push(
                ConfigError::new("network_file", format!("cannot read {file:?} ({}): {e}", full.display()))
                    .with_hint("relative paths are resolved against the config file's directory"),
            );
            return origins;
        }
    };
    let mut net: Table = match text.parse() {
        Ok(t) => t,
        Err(e) => {
            let msg = e.message().trim().replace('\n', " ");
            errors.push(ConfigError::new("network_file", format!("{file}: TOML syntax error: {msg}")));
            return origins;
        }
    };
    let dir = Path::new(&file).parent().unwrap_or(Path::new("")).to_path_buf();
    rebase_files(&mut net, &dir);
    for (key, value) in net {
        if !NETWORK_FILE_KEYS.contains(&key.as_str()) {
            let hint = format!("a network file holds only {}", NETWORK_FILE_KEYS.join(", "));
            errors.push(
                ConfigError::new(format!("network_file:{key}"), format!("key `{key}` is not allowed in a network file")).with_hint(hint),
            );
            continue;
        }
        if WHOLE.contains(&key.as_str()) {
            let clash = if key.starts_with("relays") {
                WHOLE[..2].iter().find(|k| root.contains_key(**k))
            } else {
                root.contains_key(&key).then_some(&"")
            };
            if let Some(k) = clash {
                let k = if k.is_empty() { key.as_str() } else { k };
                errors.push(
                    ConfigError::new("network_file", format!("`{k}` is given both in the experiment and in {file}"))
                        .with_hint(format!("remove `{k}` from one of them; {file} provides the network's {key}")),
                );
                continue;
            }
            origins.paths.push(key.clone());
            root.insert(key, value);
            continue;
        }
        debug_assert!(MERGED_BY_KEY.contains(&key.as_str()));
        let Value::Table(sub) = value else {
            errors.push(ConfigError::new(format!("network_file:{key}"), "expected a table"));
            continue;
        };
        let target = root.entry(key.clone()).or_insert_with(|| Value::Table(Table::new()));
        let Value::Table(target) = target else { continue }; // reported by validation
        for (k, v) in sub {
            if key == "mechanisms" && !NETWORK_FILE_MECHANISMS.contains(&k.as_str()) {
                errors.push(
                    ConfigError::new(format!("network_file:mechanisms.{k}"), format!("`{k}` is not allowed in a network file"))
                        .with_hint("a network file's [mechanisms] sets only `scheduler`, the network's default; set the mechanisms you study in the experiment"),
                );
                continue;
            }
            origins.by_key.push((key.clone(), k.clone(), v.clone()));
            if !target.contains_key(&k) {
                origins.paths.push(format!("{key}.{k}"));
                target.insert(k, v);
            }
        }
    }
    origins
}

/// Prefixes problems found in content that came from the network file with `network_file:`.
/// The closest of the paths the file gave and the overrides wrote decides: a problem at
/// `mechanisms.scheduler.run_interval` after `--set mechanisms.scheduler.run_interval=...`
/// is the command line's even though the file gave the scheduler.
pub fn relabel(errors: &mut [ConfigError], origins: &Origins) {
    let longest = |paths: &[String], e: &str| paths.iter().filter(|p| at_or_below(e, p)).map(String::len).max();
    for e in errors {
        if let Some(file) = longest(&origins.paths, &e.path) {
            if longest(&origins.overridden, &e.path).is_none_or(|o| o < file) {
                e.path = format!("network_file:{}", e.path);
            }
        }
    }
}

/// Rewrites relative file names inside the network file so that they resolve against the
/// experiment's directory: `network.latency.{matrix,gml}`, `relays_file`, and any
/// `file`, `stream_model` or `packet_model` string inside `[workloads]`.
fn rebase_files(net: &mut Table, dir: &Path) {
    let rebase = |v: &mut Value| {
        if let Value::String(s) = v {
            if Path::new(s.as_str()).is_relative() {
                *s = dir.join(s.as_str()).to_string_lossy().into_owned();
            }
        }
    };
    if let Some(Value::Table(n)) = net.get_mut("network") {
        if let Some(Value::Table(l)) = n.get_mut("latency") {
            for k in ["matrix", "gml"] {
                if let Some(v) = l.get_mut(k) {
                    rebase(v);
                }
            }
        }
    }
    if let Some(v) = net.get_mut("relays_file") {
        rebase(v);
    }
    fn walk(t: &mut Table, rebase: &dyn Fn(&mut Value)) {
        for (k, v) in t.iter_mut() {
            match v {
                Value::Table(sub) => walk(sub, rebase),
                _ if ["file", "stream_model", "packet_model"].contains(&k.as_str()) => rebase(v),
                _ => {}
            }
        }
    }
    if let Some(Value::Table(w)) = net.get_mut("workloads") {
        walk(w, &rebase);
    }
}
