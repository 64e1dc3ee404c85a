//! PrivCount / tgen Markov traffic models (Jansen, Traudt & Hopper, CCS 2018): reading and
//! validating the networkx node-link JSON form of tgen's GraphML hidden Markov models.
//!
//! **Owns:** the [`MarkovModel`] type and its parser with error messages that name the file
//! and the offending node or link. **Must not touch:** sampling (onionlab-workload's
//! `markov` module) or the rest of the config.
//!
//! A model file is `{"nodes": [...], "links": [...]}`. Nodes are `{"id": "start"}` (exactly
//! one), `{"id": ..., "type": "state"}` and `{"id": ..., "type": "observation"}`. Links are
//! `{"source", "target", "type": "transition", "weight"}` (start or state to state) and
//! `{"source", "target", "type": "emission", "weight", "exp_lambda", "lognorm_mu",
//! "lognorm_sigma"}` (state to observation). Delays are in microseconds, as in tgen: an
//! emission with `exp_lambda > 0` waits an exponential time with rate `exp_lambda` per
//! microsecond; otherwise, with `lognorm_sigma > 0` or `lognorm_mu > 0`, a log-normal time
//! `exp(N(mu, sigma))` microseconds; otherwise no time.

use serde::Serialize;
use serde_json::Value;

/// The waiting time attached to an emission (tgen semantics, microseconds).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(tag = "dist", rename_all = "snake_case")]
pub enum MarkovDelay {
    Zero,
    /// Rate per microsecond.
    Exponential {
        lambda_per_us: f64,
    },
    /// `exp(N(mu, sigma))` microseconds.
    LogNormal {
        mu: f64,
        sigma: f64,
    },
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MarkovEmission {
    /// Index into [`MarkovModel::observations`].
    pub observation: usize,
    pub weight: f64,
    pub delay: MarkovDelay,
}

/// A tgen hidden Markov model: states with weighted transitions and weighted emissions.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MarkovModel {
    /// The model file as written in the config.
    pub path: String,
    pub states: Vec<String>,
    pub observations: Vec<String>,
    /// Transitions out of `start`: (state, weight).
    #[serde(skip)]
    pub start: Vec<(usize, f64)>,
    /// Per state: (next state, weight).
    #[serde(skip)]
    pub transitions: Vec<Vec<(usize, f64)>>,
    /// Per state: its emissions.
    #[serde(skip)]
    pub emissions: Vec<Vec<MarkovEmission>>,
}

impl MarkovModel {
    /// The index of observation `name`, if the model has it.
    pub fn observation(&self, name: &str) -> Option<usize> {
        self.observations.iter().position(|o| o == name)
    }

    /// Parses and validates model text. `file` names the file in messages; `required` are
    /// the observations the model must have (e.g. `["$", "F"]` for a stream model), and the
    /// first of them must be reachable from `start`, the last is the end observation.
    pub fn parse(text: &str, file: &str, required: &[&str]) -> Result<MarkovModel, String> {
        let root: Value = serde_json::from_str(text).map_err(|e| format!("{file}: not valid JSON: {e}"))?;
        let list = |key: &str| -> Result<&Vec<Value>, String> {
            root.get(key)
                .and_then(Value::as_array)
                .ok_or_else(|| format!("{file}: expected a networkx node-link JSON object with a `{key}` array"))
        };
        let nodes = list("nodes")?;
        let links = list("links")?;
        #[derive(Clone, Copy, PartialEq)]
        enum Kind {
            Start,
            State(usize),
            Obs(usize),
        }
        let mut kinds: Vec<(String, Kind)> = Vec::new();
        let mut states = Vec::new();
        let mut observations = Vec::new();
        let mut starts = 0;
        for (i, n) in nodes.iter().enumerate() {
            let id = n.get("id").and_then(Value::as_str).ok_or_else(|| format!("{file}: nodes[{i}] has no string `id`"))?;
            if kinds.iter().any(|(k, _)| k == id) {
                return Err(format!("{file}: nodes[{i}]: node {id:?} is listed twice"));
            }
            let kind = match (id, n.get("type").and_then(Value::as_str)) {
                ("start", _) => {
                    starts += 1;
                    Kind::Start
                }
                (_, Some("state")) => {
                    states.push(id.to_string());
                    Kind::State(states.len() - 1)
                }
                (_, Some("observation")) => {
                    observations.push(id.to_string());
                    Kind::Obs(observations.len() - 1)
                }
                (_, other) => {
                    return Err(format!(
                        "{file}: nodes[{i}] ({id:?}) has type {other:?}; expected \"state\" or \"observation\" (or id \"start\")"
                    ))
                }
            };
            kinds.push((id.to_string(), kind));
        }
        if starts != 1 {
            return Err(format!("{file}: needs exactly one node with id \"start\", found {starts}"));
        }
        for r in required {
            if !observations.iter().any(|o| o == r) {
                return Err(format!("{file}: has no observation {r:?} (observations: {})", observations.join(", ")));
            }
        }
        let find = |id: &str| kinds.iter().find(|(k, _)| k == id).map(|(_, kind)| *kind);
        let mut start = Vec::new();
        let mut transitions = vec![Vec::new(); states.len()];
        let mut emissions = vec![Vec::new(); states.len()];
        for (i, l) in links.iter().enumerate() {
            let at = format!("{file}: links[{i}]");
            let s = l.get("source").and_then(Value::as_str).ok_or_else(|| format!("{at} has no string `source`"))?;
            let t = l.get("target").and_then(Value::as_str).ok_or_else(|| format!("{at} has no string `target`"))?;
            let ty = l.get("type").and_then(Value::as_str).unwrap_or("");
            let num = |key: &str, required: bool| -> Result<f64, String> {
                match l.get(key) {
                    None if !required => Ok(0.0),
                    Some(v) => match v.as_f64() {
                        Some(x) if x.is_finite() && x >= 0.0 => Ok(x),
                        _ => Err(format!("{at} ({s} -> {t}): `{key}` must be a non-negative number, found {v}")),
                    },
                    None => Err(format!("{at} ({s} -> {t}): missing `{key}`")),
                }
            };
            let weight = num("weight", true)?;
            let (src, dst) = match (find(s), find(t)) {
                (Some(a), Some(b)) => (a, b),
                (None, _) => return Err(format!("{at}: unknown source node {s:?}")),
                (_, None) => return Err(format!("{at}: unknown target node {t:?}")),
            };
            match (ty, src, dst) {
                ("transition", Kind::Start, Kind::State(b)) => start.push((b, weight)),
                ("transition", Kind::State(a), Kind::State(b)) => transitions[a].push((b, weight)),
                ("emission", Kind::State(a), Kind::Obs(o)) => {
                    let lambda = num("exp_lambda", false)?;
                    let mu = l.get("lognorm_mu").and_then(Value::as_f64).unwrap_or(0.0);
                    if !mu.is_finite() {
                        return Err(format!("{at} ({s} -> {t}): `lognorm_mu` must be finite"));
                    }
                    let sigma = num("lognorm_sigma", false)?;
                    let delay = if lambda > 0.0 {
                        MarkovDelay::Exponential { lambda_per_us: lambda }
                    } else if sigma > 0.0 || mu > 0.0 {
                        MarkovDelay::LogNormal { mu, sigma }
                    } else {
                        MarkovDelay::Zero
                    };
                    emissions[a].push(MarkovEmission { observation: o, weight, delay });
                }
                _ => {
                    return Err(format!(
                        "{at}: a {ty:?} link from {s:?} to {t:?} is not allowed; transitions go from start or a state to a state, emissions from a state to an observation"
                    ))
                }
            }
        }
        if start.iter().map(|x| x.1).sum::<f64>() <= 0.0 {
            return Err(format!("{file}: `start` has no transition with a positive weight"));
        }
        // Every state reachable from start must emit, and must be able to move on unless
        // all it emits is the end observation.
        let end = required.last().and_then(|r| observations.iter().position(|o| o == r));
        let mut seen = vec![false; states.len()];
        let mut stack: Vec<usize> = start.iter().filter(|x| x.1 > 0.0).map(|x| x.0).collect();
        let mut can_emit_first = false;
        let first = required.first().and_then(|r| observations.iter().position(|o| o == r));
        while let Some(s) = stack.pop() {
            if std::mem::replace(&mut seen[s], true) {
                continue;
            }
            let em: Vec<&MarkovEmission> = emissions[s].iter().filter(|e| e.weight > 0.0).collect();
            if em.is_empty() {
                return Err(format!("{file}: state {:?} is reachable but has no emission with a positive weight", states[s]));
            }
            if em.iter().any(|e| Some(e.observation) == first) {
                can_emit_first = true;
            }
            let only_end = em.iter().all(|e| Some(e.observation) == end);
            let next: Vec<usize> = transitions[s].iter().filter(|x| x.1 > 0.0).map(|x| x.0).collect();
            if next.is_empty() && !only_end {
                return Err(format!(
                    "{file}: state {:?} is reachable, emits more than {:?}, but has no transition with a positive weight",
                    states[s],
                    required.last().unwrap_or(&"")
                ));
            }
            stack.extend(next);
        }
        if !can_emit_first {
            return Err(format!("{file}: no state reachable from start emits {:?}", required.first().unwrap_or(&"")));
        }
        Ok(MarkovModel { path: file.to_string(), states, observations, start, transitions, emissions })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TINY: &str = r#"{"nodes": [{"id": "start"}, {"id": "a", "type": "state"}, {"id": "e", "type": "state"},
        {"id": "$", "type": "observation"}, {"id": "F", "type": "observation"}],
      "links": [{"source": "start", "target": "a", "type": "transition", "weight": 1.0},
        {"source": "a", "target": "a", "type": "transition", "weight": 0.5},
        {"source": "a", "target": "e", "type": "transition", "weight": 0.5},
        {"source": "a", "target": "$", "type": "emission", "weight": 1.0, "exp_lambda": 1e-6},
        {"source": "e", "target": "F", "type": "emission", "weight": 1.0}]}"#;

    #[test]
    fn parses_a_tiny_model() {
        let m = MarkovModel::parse(TINY, "tiny.json", &["$", "F"]).unwrap();
        assert_eq!(m.states, vec!["a", "e"]);
        assert_eq!(m.start, vec![(0, 1.0)]);
        assert_eq!(m.emissions[0][0].delay, MarkovDelay::Exponential { lambda_per_us: 1e-6 });
        assert_eq!(m.emissions[1][0].delay, MarkovDelay::Zero);
    }

    #[test]
    fn errors_name_file_and_link() {
        let e = MarkovModel::parse(TINY, "tiny.json", &["+", "-", "F"]).unwrap_err();
        assert!(e.contains("tiny.json") && e.contains("\"+\""), "{e}");
        let bad = TINY.replace("\"weight\": 0.5}", "\"weight\": -1}");
        let e = MarkovModel::parse(&bad, "m.json", &["$", "F"]).unwrap_err();
        assert!(e.contains("links[1]") && e.contains("weight"), "{e}");
        let e = MarkovModel::parse("{}", "m.json", &["$", "F"]).unwrap_err();
        assert!(e.contains("nodes"), "{e}");
        let no_exit = TINY.replace(r#"{"source": "a", "target": "e", "type": "transition", "weight": 0.5},"#, "");
        assert!(MarkovModel::parse(&no_exit, "m.json", &["$", "F"]).is_ok());
        let dead = TINY
            .replace(r#""source": "a", "target": "a""#, r#""source": "e", "target": "e""#)
            .replace(r#"{"source": "a", "target": "e", "type": "transition", "weight": 0.5},"#, "");
        let e = MarkovModel::parse(&dead, "m.json", &["$", "F"]).unwrap_err();
        assert!(e.contains("no transition"), "{e}");
    }

    #[test]
    fn a_lognormal_delay_needs_only_mu() {
        // tgen: sigma 0 with mu > 0 is a constant exp(mu) microseconds, not no delay.
        let m = TINY.replace(r#""weight": 1.0, "exp_lambda": 1e-6}"#, r#""weight": 1.0, "lognorm_mu": 14.5}"#);
        let m = MarkovModel::parse(&m, "tiny.json", &["$", "F"]).unwrap();
        assert_eq!(m.emissions[0][0].delay, MarkovDelay::LogNormal { mu: 14.5, sigma: 0.0 });
    }
}
