//! What the sim crate's integration tests share: a small network written as TOML.

// Each test binary compiles this module and uses only part of it.
#![allow(dead_code)]

use onionlab_config::model::ExperimentConfig;

/// Three relays of 1 MiB/s (guard, middle, exit) with 20 ms between any two hosts, then
/// `rest` (the sections each test adds), as config text.
pub fn three_relays(rest: &str) -> String {
    three_relays_at(["1 MiB/s"; 3], rest)
}

/// [`three_relays`] with each relay's bandwidth given, guard first.
pub fn three_relays_at([guard, middle, exit]: [&str; 3], rest: &str) -> String {
    format!(
        r#"
[network]
latency = {{ constant = "20 ms" }}
[[relays]]
name = "guard"
bandwidth = "{guard}"
flags = ["Guard", "Fast", "Stable"]
[[relays]]
name = "middle"
bandwidth = "{middle}"
flags = ["Fast"]
[[relays]]
name = "exit"
bandwidth = "{exit}"
flags = ["Exit", "Fast"]
{rest}
"#
    )
}

/// `text` loaded and validated; a test's own config is never wrong, so a problem panics
/// with the text beside it.
pub fn load(text: &str) -> ExperimentConfig {
    onionlab_config::load_str(text, std::path::Path::new(".")).unwrap_or_else(|e| panic!("{e}\n---\n{text}"))
}
