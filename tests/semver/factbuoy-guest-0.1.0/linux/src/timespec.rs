//! Points in time for `since` and `until`, written as an operator would write them for
//! journalctl, as microseconds since the Unix epoch (the journal's realtime clock). The
//! systemd-logs plugin and `factbuoy inspect logs` take the same forms.
//!
//! - a duration, meaning that long ago: `60m`, `1h 30m`, `2days` (`-60m` too; `+10m` is ahead);
//! - `now`, `today`, `yesterday`, `tomorrow` (midnight, UTC);
//! - a date and time: `2024-03-01`, `2024-03-01 12:00`, `2024-03-01 12:00:00.5`, optionally with
//!   `T` between date and time and `Z` or ` UTC` after. The sandbox has no time zone, so times
//!   are UTC (run journalctl with `TZ=UTC` to compare);
//! - `@SECONDS` since the epoch, with a fraction if wanted: `@1700000000.25`.

use std::time::{Duration, UNIX_EPOCH};

const USEC_PER_SEC: u64 = 1_000_000;
const USEC_PER_DAY: u64 = 86_400 * USEC_PER_SEC;

/// Parses `text` as a point in time, relative to `now` (microseconds since the epoch).
pub fn parse(text: &str, now: u64) -> Result<u64, String> {
    let text = text.trim();
    let today = now - now % USEC_PER_DAY;
    match text {
        "now" => return Ok(now),
        "today" => return Ok(today),
        "yesterday" => return Ok(today.saturating_sub(USEC_PER_DAY)),
        "tomorrow" => return Ok(today + USEC_PER_DAY),
        _ => {}
    }
    if let Some(seconds) = text.strip_prefix('@') {
        return parse_epoch(seconds).ok_or_else(|| {
            format!("{text:?} is not @SECONDS since the epoch, such as @1700000000.5")
        });
    }
    let (sign, duration) = match text.as_bytes().first() {
        Some(b'-') => (-1, &text[1..]),
        Some(b'+') => (1, &text[1..]),
        _ => (-1, text),
    };
    if let Ok(span) = humantime::parse_duration(duration.trim()) {
        let span = micros(span);
        return Ok(if sign < 0 {
            now.saturating_sub(span)
        } else {
            now.saturating_add(span)
        });
    }
    parse_date_time(text).ok_or_else(|| {
        format!(
            "{text:?} is neither a duration (60m, 1h 30m), nor a date and time (2024-03-01 \
             12:00:00, UTC), nor @SECONDS, nor now, today or yesterday"
        )
    })
}

/// `duration` in microseconds, saturated.
pub fn micros(duration: Duration) -> u64 {
    u64::try_from(duration.as_micros()).unwrap_or(u64::MAX)
}

fn parse_epoch(text: &str) -> Option<u64> {
    let (whole, fraction) = text.split_once('.').unwrap_or((text, ""));
    if whole.is_empty() || !whole.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    if !fraction.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let seconds: u64 = whole.parse().ok()?;
    let mut micros = 0u64;
    for (at, digit) in fraction.bytes().take(6).enumerate() {
        micros += u64::from(digit - b'0') * 10u64.pow(5 - at as u32);
    }
    seconds.checked_mul(USEC_PER_SEC)?.checked_add(micros)
}

fn parse_date_time(text: &str) -> Option<u64> {
    let text = text.strip_suffix(" UTC").unwrap_or(text);
    let text = text.strip_suffix('Z').unwrap_or(text);
    // humantime wants seconds: complete `YYYY-MM-DD` and `YYYY-MM-DD HH:MM`.
    let full = match text.len() {
        10 => format!("{text} 00:00:00"),
        16 => format!("{text}:00"),
        _ => text.to_owned(),
    };
    let time = humantime::parse_rfc3339_weak(&full).ok()?;
    Some(micros(time.duration_since(UNIX_EPOCH).ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    // 2023-11-14 22:13:20 UTC.
    const NOW: u64 = 1_700_000_000 * USEC_PER_SEC;

    #[test]
    fn durations_are_that_long_ago() {
        assert_eq!(parse("60m", NOW), Ok(NOW - 3600 * USEC_PER_SEC));
        assert_eq!(parse("-60m", NOW), Ok(NOW - 3600 * USEC_PER_SEC));
        assert_eq!(parse("+10s", NOW), Ok(NOW + 10 * USEC_PER_SEC));
        assert_eq!(parse("1h 30m", NOW), Ok(NOW - 5400 * USEC_PER_SEC));
        assert_eq!(parse("now", NOW), Ok(NOW));
    }

    #[test]
    fn dates_and_times_are_utc() {
        assert_eq!(parse("2023-11-14 22:13:20", NOW), Ok(NOW));
        assert_eq!(parse("2023-11-14T22:13:20Z", NOW), Ok(NOW));
        assert_eq!(parse("2023-11-14 22:13:20 UTC", NOW), Ok(NOW));
        assert_eq!(parse("2023-11-14 22:13", NOW), Ok(NOW - 20 * USEC_PER_SEC));
        assert_eq!(parse("2023-11-14 22:13:20.25", NOW), Ok(NOW + 250_000));
        let midnight = NOW - (22 * 3600 + 13 * 60 + 20) * USEC_PER_SEC;
        assert_eq!(parse("2023-11-14", NOW), Ok(midnight));
        assert_eq!(parse("today", NOW), Ok(midnight));
        assert_eq!(parse("yesterday", NOW), Ok(midnight - USEC_PER_DAY));
    }

    #[test]
    fn epoch_seconds() {
        assert_eq!(parse("@1700000000", NOW), Ok(NOW));
        assert_eq!(parse("@1700000000.000001", NOW), Ok(NOW + 1));
        assert!(parse("@x", NOW).is_err());
        assert!(parse("@1.2.3", NOW).is_err());
    }

    #[test]
    fn nonsense_says_what_is_accepted() {
        let e = parse("last tuesday", NOW).unwrap_err();
        assert!(e.contains("neither a duration"), "{e}");
    }
}
