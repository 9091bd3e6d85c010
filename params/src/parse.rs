//! Text forms shared by the kinds: durations and on/off flags.

use std::time::Duration;

/// Parses `600`, `30s`, `500ms`, `10m`, `1h` (a bare number is seconds).
pub fn parse_duration(s: &str) -> Option<Duration> {
    let s = s.trim();
    let (num, unit) = match s.find(|c: char| !(c.is_ascii_digit() || c == '.')) {
        Some(i) => (&s[..i], s[i..].trim()),
        None => (s, "s"),
    };
    let v: f64 = num.parse().ok()?;
    let secs = match unit {
        "ms" => v / 1000.0,
        "s" | "" => v,
        "m" | "min" => v * 60.0,
        "h" => v * 3600.0,
        _ => return None,
    };
    // Past Duration's range (1e20 s) is not a duration: refused rather than a panic.
    (secs.is_finite() && secs >= 0.0)
        .then(|| Duration::try_from_secs_f64(secs).ok())
        .flatten()
}

/// `1`/`true`/`yes`/`on` and `0`/`false`/`no`/`off`, any case.
pub fn parse_flag(s: &str) -> Option<bool> {
    match s.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => Some(true),
        "0" | "false" | "no" | "off" => Some(false),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("600"), Some(Duration::from_secs(600)));
        assert_eq!(parse_duration("500ms"), Some(Duration::from_millis(500)));
        assert_eq!(parse_duration("2m"), Some(Duration::from_secs(120)));
        assert_eq!(parse_duration("1h"), Some(Duration::from_secs(3600)));
        assert_eq!(parse_duration("soon"), None);
        assert_eq!(parse_duration("-3s"), None);
        assert_eq!(parse_duration("100000000000000000000"), None);
        assert!(parse_duration("10000000000000000000").is_some());
    }

    #[test]
    fn flags() {
        assert_eq!(parse_flag("ON"), Some(true));
        assert_eq!(parse_flag(" 0 "), Some(false));
        assert_eq!(parse_flag("2"), None);
    }
}
