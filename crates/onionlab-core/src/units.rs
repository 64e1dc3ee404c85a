//! Human unit strings: sizes, bandwidths and durations as experiment configs and Shadow
//! GML files write them.
//!
//! **Owns:** parsing `"320 KiB"`, `"20 Mbit"`, `"10 MiB/s"`, `"10 min"` into bytes, bits per
//! second and [`SimDuration`]. **Must not touch:** where the strings come from.
//!
//! Rules: a number (integer or decimal) then an optional space then a unit; a bare number is
//! an error, because it would be ambiguous. `k`/`K` mean 1000 and `Ki` 1024; a lower-case
//! `b` (or `bit`) is a bit and an upper-case `B` a byte, so `Mb`/`Mbps` is megabits and
//! `MB`/`MBps` megabytes. Rates may end in `/s` or `ps`.

use crate::time::SimDuration;

/// Why a unit string could not be parsed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum UnitError {
    #[error("empty value (expected a number and a unit, e.g. {example:?})")]
    Empty { example: &'static str },
    #[error("{input:?} does not start with a number")]
    BadNumber { input: String },
    #[error("{input:?} has no unit ({hint})")]
    MissingUnit { input: String, hint: &'static str },
    #[error("{input:?}: unknown unit {unit:?} (expected {expected})")]
    UnknownUnit { input: String, unit: String, expected: &'static str },
    #[error("{input:?} is negative")]
    Negative { input: String },
    #[error("{input:?} is too large")]
    Overflow { input: String },
}

const SIZE_UNITS: &str = "B, KB, MB, GB, TB, KiB, MiB, GiB, TiB";
const RATE_UNITS: &str = "bit, Kbit, Mbit, Gbit, Kibit, Mibit, Gibit (bits) or B, KB, MB, KiB, MiB, GiB (bytes), optionally with /s or ps";
const TIME_UNITS: &str = "ns, us, ms, s, min, h, d";

/// Splits `"12.5 MiB"` into (12.5, "MiB").
fn split(input: &str, example: &'static str, hint: &'static str) -> Result<(f64, String), UnitError> {
    let s = input.trim();
    if s.is_empty() {
        return Err(UnitError::Empty { example });
    }
    let end = s
        .char_indices()
        .find(|&(i, c)| !(c.is_ascii_digit() || c == '.' || ((c == '-' || c == '+') && i == 0) || c == '_'))
        .map_or(s.len(), |(i, _)| i);
    let (num, unit) = s.split_at(end);
    let num: String = num.chars().filter(|&c| c != '_').collect();
    let value: f64 = num.parse().map_err(|_| UnitError::BadNumber { input: input.to_string() })?;
    if !value.is_finite() {
        return Err(UnitError::BadNumber { input: input.to_string() });
    }
    if value < 0.0 {
        return Err(UnitError::Negative { input: input.to_string() });
    }
    let unit = unit.trim();
    if unit.is_empty() {
        return Err(UnitError::MissingUnit { input: input.to_string(), hint });
    }
    Ok((value, unit.to_string()))
}

fn to_u64(value: f64, input: &str) -> Result<u64, UnitError> {
    let v = value.round();
    if v >= u64::MAX as f64 {
        return Err(UnitError::Overflow { input: input.to_string() });
    }
    Ok(v as u64)
}

/// Multiplier of a size prefix ("", "K", "Ki", ...), case-insensitive on the letter.
fn prefix(p: &str) -> Option<f64> {
    Some(match p {
        "" => 1.0,
        "k" | "K" => 1e3,
        "M" | "m" => 1e6,
        "G" | "g" => 1e9,
        "T" | "t" => 1e12,
        "Ki" | "ki" | "KI" => 1024.0,
        "Mi" | "mi" | "MI" => 1024.0 * 1024.0,
        "Gi" | "gi" | "GI" => 1024.0 * 1024.0 * 1024.0,
        "Ti" | "ti" | "TI" => 1024.0 * 1024.0 * 1024.0 * 1024.0,
        _ => return None,
    })
}

/// Bytes per unit for a size unit such as "MiB", "KB", "B", "bytes".
fn size_unit(unit: &str) -> Option<f64> {
    match unit {
        "byte" | "bytes" | "Byte" | "Bytes" => return Some(1.0),
        _ => {}
    }
    let p = unit.strip_suffix('B')?;
    prefix(p)
}

/// Parses a size into bytes: `"320 KiB"`, `"5 MiB"`, `"87 KB"`, `"500 B"`.
pub fn parse_size(s: &str) -> Result<u64, UnitError> {
    let (v, unit) = split(s, "320 KiB", "add a unit such as \"B\", \"KiB\" or \"MiB\"")?;
    let m = size_unit(&unit).ok_or_else(|| UnitError::UnknownUnit { input: s.to_string(), unit: unit.clone(), expected: SIZE_UNITS })?;
    to_u64(v * m, s)
}

/// Parses a bandwidth into bits per second: `"20 Mbit"`, `"10 Mbps"`, `"320 KiB/s"`.
pub fn parse_bandwidth(s: &str) -> Result<u64, UnitError> {
    let (v, unit) = split(s, "20 Mbit", "add a unit such as \"Mbit\" or \"KiB/s\"")?;
    let unknown = || UnitError::UnknownUnit { input: s.to_string(), unit: unit.clone(), expected: RATE_UNITS };
    let base = unit.strip_suffix("/s").or_else(|| unit.strip_suffix("ps")).unwrap_or(&unit);
    let bits_per = if let Some(p) = base.strip_suffix("bit").or_else(|| base.strip_suffix("bits")) {
        prefix(p).ok_or_else(unknown)?
    } else if let Some(p) = base.strip_suffix('b') {
        prefix(p).ok_or_else(unknown)?
    } else if let Some(m) = size_unit(base) {
        m * 8.0
    } else {
        return Err(unknown());
    };
    to_u64(v * bits_per, s)
}

/// Parses a duration: `"10 min"`, `"50 ms"`, `"1.5 s"`, `"250 us"`, `"2 h"`, `"4 days"`.
pub fn parse_duration(s: &str) -> Result<SimDuration, UnitError> {
    let (v, unit) = split(s, "10 s", "add a unit such as \"ms\", \"s\" or \"min\"")?;
    let ns_per = match unit.as_str() {
        "ns" | "nanosecond" | "nanoseconds" => 1.0,
        "us" | "µs" | "microsecond" | "microseconds" => 1e3,
        "ms" | "millisecond" | "milliseconds" => 1e6,
        "s" | "sec" | "secs" | "second" | "seconds" => 1e9,
        "min" | "mins" | "minute" | "minutes" => 60e9,
        "h" | "hour" | "hours" => 3600e9,
        "d" | "day" | "days" => 86400e9,
        _ => return Err(UnitError::UnknownUnit { input: s.to_string(), unit, expected: TIME_UNITS }),
    };
    Ok(SimDuration::from_nanos(to_u64(v * ns_per, s)?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("320 KiB"), Ok(327_680));
        assert_eq!(parse_size("5 MiB"), Ok(5 << 20));
        assert_eq!(parse_size("87 KB"), Ok(87_000));
        assert_eq!(parse_size("1.5MiB"), Ok(1_572_864));
        assert_eq!(parse_size("500 B"), Ok(500));
        assert_eq!(parse_size("2 bytes"), Ok(2));
        assert_eq!(parse_size("1 TiB"), Ok(1 << 40));
        assert_eq!(parse_size("3 GB"), Ok(3_000_000_000));
        assert!(matches!(parse_size("320"), Err(UnitError::MissingUnit { .. })));
        assert!(matches!(parse_size("3 parsecs"), Err(UnitError::UnknownUnit { .. })));
        assert!(matches!(parse_size("-1 KiB"), Err(UnitError::Negative { .. })));
        assert!(matches!(parse_size(""), Err(UnitError::Empty { .. })));
        assert!(matches!(parse_size("KiB"), Err(UnitError::BadNumber { .. })));
    }

    #[test]
    fn bandwidths_distinguish_bits_and_bytes() {
        assert_eq!(parse_bandwidth("20 Mbit"), Ok(20_000_000));
        assert_eq!(parse_bandwidth("20 Mbit/s"), Ok(20_000_000));
        assert_eq!(parse_bandwidth("10 Mbps"), Ok(10_000_000));
        assert_eq!(parse_bandwidth("10 Mb"), Ok(10_000_000));
        assert_eq!(parse_bandwidth("10 MBps"), Ok(80_000_000));
        assert_eq!(parse_bandwidth("320 KiB/s"), Ok(320 * 1024 * 8));
        assert_eq!(parse_bandwidth("100 KBps"), Ok(800_000));
        assert_eq!(parse_bandwidth("1 Gibit"), Ok(1 << 30));
        assert_eq!(parse_bandwidth("0 bit"), Ok(0));
        assert!(matches!(parse_bandwidth("20"), Err(UnitError::MissingUnit { .. })));
        assert!(matches!(parse_bandwidth("20 furlongs"), Err(UnitError::UnknownUnit { .. })));
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("10 min"), Ok(SimDuration::from_secs(600)));
        assert_eq!(parse_duration("50 ms"), Ok(SimDuration::from_millis(50)));
        assert_eq!(parse_duration("1.5 s"), Ok(SimDuration::from_millis(1500)));
        assert_eq!(parse_duration("250 us"), Ok(SimDuration::from_micros(250)));
        assert_eq!(parse_duration("2 h"), Ok(SimDuration::from_secs(7200)));
        assert_eq!(parse_duration("4 days"), Ok(SimDuration::from_secs(4 * 86_400)));
        assert!(matches!(parse_duration("10"), Err(UnitError::MissingUnit { .. })));
        assert!(matches!(parse_duration("99999999999999999999 h"), Err(UnitError::Overflow { .. })));
        // 2^64 ns is one past the largest duration.
        assert!(matches!(parse_duration("18446744073709551616 ns"), Err(UnitError::Overflow { .. })));
        assert!(parse_duration("1e9 s").is_err(), "exponents are not accepted");
    }

    proptest! {
        #[test]
        fn sizes_round_trip(v in 0u64..1_000_000, u in prop::sample::select(vec![("B", 1u64), ("KiB", 1024), ("MiB", 1 << 20), ("KB", 1000), ("MB", 1_000_000)])) {
            prop_assert_eq!(parse_size(&format!("{v} {}", u.0)), Ok(v * u.1));
        }

        #[test]
        fn durations_round_trip(v in 0u64..100_000, u in prop::sample::select(vec![("ns", 1u64), ("us", 1000), ("ms", 1_000_000), ("s", 1_000_000_000), ("min", 60_000_000_000)])) {
            prop_assert_eq!(parse_duration(&format!("{v} {}", u.0)), Ok(SimDuration::from_nanos(v * u.1)));
        }

        #[test]
        fn never_panics(s in ".{0,20}") {
            let _ = parse_size(&s);
            let _ = parse_bandwidth(&s);
            let _ = parse_duration(&s);
        }
    }
}
