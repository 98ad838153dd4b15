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

/// `time` as nanoseconds since the epoch: RFC 3339; a date, meaning its end (UTC) when
/// `end_of_day` ("as of 1 May"), else its start; or any other form `inspect logs --since`
/// takes (`7d` ago, `yesterday`, `2026-05-01 12:00`: [`factbuoy_linux::timespec`]).
pub(crate) fn parse_time(time: &str, end_of_day: bool) -> Result<i64, HistoryError> {
    if let Some(ns) = created_ns(time) {
        return Ok(ns);
    }
    let format = time::macros::format_description!("[year]-[month]-[day]");
    if end_of_day && let Ok(date) = time::Date::parse(time, &format) {
        let start = date.midnight().assume_utc().unix_timestamp_nanos() as i64;
        return Ok(start + 86_400_000_000_000 - 1);
    }
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let micros = factbuoy_linux::timespec::parse(time, factbuoy_linux::timespec::micros(now))
        .map_err(|_| HistoryError::Time(time.into()))?;
    Ok(i64::try_from(micros)
        .unwrap_or(i64::MAX)
        .saturating_mul(1000))
}
