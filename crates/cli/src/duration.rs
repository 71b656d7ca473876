//! Human durations on the command line: `10s`, `500ms`, `2m`, `250us`.

use std::time::Duration;

pub fn parse(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let split = s.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: f64 = num.parse().map_err(|_| format!("{s:?} is not a duration like 10s, 500ms or 2m"))?;
    let secs = match unit {
        "ns" => n / 1e9,
        "us" | "µs" => n / 1e6,
        "ms" => n / 1e3,
        "s" | "" => n,
        "m" => n * 60.0,
        "h" => n * 3600.0,
        _ => return Err(format!("unknown unit {unit:?} in {s:?}; use ns, us, ms, s, m or h")),
    };
    Ok(Duration::from_secs_f64(secs))
}

#[cfg(test)]
mod tests {
    #[test]
    fn parses_units() {
        assert_eq!(super::parse("10s").unwrap().as_millis(), 10_000);
        assert_eq!(super::parse("500ms").unwrap().as_millis(), 500);
        assert_eq!(super::parse("2m").unwrap().as_secs(), 120);
        assert!(super::parse("ten").is_err());
        assert!(super::parse("5 parsecs").is_err());
    }
}
