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

/// `time` as nanoseconds since the epoch: RFC 3339, or a date (its end, UTC, when `end_of_day`,
/// its start otherwise).
pub(crate) fn parse_time(time: &str, end_of_day: bool) -> Result<i64, HistoryError> {
    if let Some(ns) = created_ns(time) {
        return Ok(ns);
    }
    let format = time::macros::format_description!("[year]-[month]-[day]");
    let date = time::Date::parse(time, &format).map_err(|_| HistoryError::Time(time.into()))?;
    let start = date.midnight().assume_utc().unix_timestamp_nanos() as i64;
    Ok(if end_of_day {
        start + 86_400_000_000_000 - 1
    } else {
        start
    })
}
