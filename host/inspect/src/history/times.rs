//! Times as a history reads them: a run's `created`, and the times users give.

use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use super::error::HistoryError;

/// A run's creation time in nanoseconds since the epoch, `None` when it does not parse.
pub(crate) fn created_ns(created: &str) -> Option<i64> {
    OffsetDateTime::parse(created, &Rfc3339)
        .ok()
        .map(|t| t.unix_timestamp_nanos() as i64)
}

/// `time` as nanoseconds since the epoch: RFC 3339; a day (a date, `today`, `yesterday`,
/// `tomorrow`), meaning its end (UTC) when `end_of_day` ("as of 1 May", "as of today"), else
/// its start; or any other form `inspect logs --since` takes (`7d ago`, `2026-05-01 12:00`:
/// [`factbuoy_linux::timespec`]).
pub(crate) fn parse_time(time: &str, end_of_day: bool) -> Result<i64, HistoryError> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    parse_time_at(time, end_of_day, factbuoy_linux::timespec::micros(now))
}

/// [`parse_time`] with `now` given, in microseconds since the epoch.
fn parse_time_at(time: &str, end_of_day: bool, now: u64) -> Result<i64, HistoryError> {
    const DAY_NS: i64 = 86_400_000_000_000;
    if let Some(ns) = created_ns(time) {
        return Ok(ns);
    }
    let format = time::macros::format_description!("[year]-[month]-[day]");
    let is_day = time::Date::parse(time.trim(), &format).is_ok()
        || matches!(time.trim(), "today" | "yesterday" | "tomorrow");
    let micros =
        factbuoy_linux::timespec::parse(time, now).map_err(|_| HistoryError::Time(time.into()))?;
    let ns = i64::try_from(micros)
        .unwrap_or(i64::MAX)
        .saturating_mul(1000);
    // A day starts at its midnight (timespec's reading); as of a day is as of its end.
    Ok(if end_of_day && is_day {
        ns + DAY_NS - 1
    } else {
        ns
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    // 2026-11-27 15:30:00 UTC.
    const NOW: u64 = 1_795_793_400_000_000;
    const DAY_NS: i64 = 86_400_000_000_000;

    fn at(text: &str, end_of_day: bool) -> i64 {
        parse_time_at(text, end_of_day, NOW).unwrap()
    }

    #[test]
    fn as_of_a_day_named_or_dated_is_as_of_its_end_and_since_one_is_from_its_start() {
        let start = created_ns("2026-11-27T00:00:00Z").unwrap();
        for today in ["2026-11-27", "today"] {
            assert_eq!(at(today, true), start + DAY_NS - 1, "{today}");
            assert_eq!(at(today, false), start, "{today}");
        }
        assert_eq!(at("yesterday", true), start - 1);
        assert_eq!(at("tomorrow", false), start + DAY_NS);
    }

    #[test]
    fn durations_ago_and_times_are_points_whatever_the_side() {
        let now = NOW as i64 * 1000;
        for end_of_day in [true, false] {
            assert_eq!(at("7d ago", end_of_day), now - 7 * DAY_NS);
            assert_eq!(at("7d", end_of_day), now - 7 * DAY_NS);
            assert_eq!(at("now", end_of_day), now);
            assert_eq!(
                at("2026-11-27 12:00", end_of_day),
                created_ns("2026-11-27T12:00:00Z").unwrap()
            );
        }
        assert!(parse_time_at("last tuesday", true, NOW).is_err());
    }
}
