//! Calendar dates from Unix milliseconds, in UTC, without a dependency.

/// `(year, month 1..=12, day 1..=31)` of day `days` since 1970-01-01
/// (Howard Hinnant's `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// `yyyy-MM-dd` of `ms` (UTC).
pub(crate) fn date(ms: u64) -> String {
    let (y, m, d) = civil_from_days((ms / 86_400_000) as i64);
    format!("{y:04}-{m:02}-{d:02}")
}

/// `yyyy-MM-dd HH:mm:ss` of `ms` (UTC).
pub(crate) fn date_time(ms: u64) -> String {
    let secs = ms / 1_000 % 86_400;
    format!(
        "{} {:02}:{:02}:{:02}",
        date(ms),
        secs / 3_600,
        secs / 60 % 60,
        secs % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_instants() {
        assert_eq!(date_time(0), "1970-01-01 00:00:00");
        assert_eq!(date_time(1_700_000_000_000), "2023-11-14 22:13:20");
        // Leap day, and the last millisecond of a day.
        assert_eq!(date_time(951_782_400_000), "2000-02-29 00:00:00");
        assert_eq!(date_time(951_868_799_999), "2000-02-29 23:59:59");
        assert_eq!(date(4_102_444_800_000), "2100-01-01");
    }
}
