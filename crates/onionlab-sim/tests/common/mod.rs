//! What the sim crate's integration tests share: a small network written as TOML.

use onionlab_config::model::ExperimentConfig;

/// Three relays of 1 MiB/s (guard, middle, exit) with 20 ms between any two hosts, then
/// `rest` (the sections each test adds), as config text.
pub fn three_relays(rest: &str) -> String {
    format!(
        r#"
[network]
latency = {{ constant = "20 ms" }}
[[relays]]
name = "guard"
bandwidth = "1 MiB/s"
flags = ["Guard", "Fast", "Stable"]
[[relays]]
name = "middle"
bandwidth = "1 MiB/s"
flags = ["Fast"]
[[relays]]
name = "exit"
bandwidth = "1 MiB/s"
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
