//! One line of the metric log.

use std::fmt;

use super::date::date_time;

/// One line of the metric log: what one resource did in one second.
///
/// Written as
/// `timestamp_ms|yyyy-MM-dd HH:mm:ss|resource|pass|block|success|exception|avg_rt|occupied_pass|concurrency|classification`,
/// Alibaba Sentinel's format. The date is the timestamp in UTC. A line
/// break in a resource name is written as a space, so that each line stays
/// one record; a `|` is kept (the reader takes the numbers from the right).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MetricLine {
    /// Start of the second, in Unix milliseconds.
    pub timestamp_ms: u64,
    /// The resource's name.
    pub resource: String,
    /// Requests let through in that second.
    pub pass: u64,
    /// Requests refused.
    pub block: u64,
    /// Requests completed.
    pub success: u64,
    /// Completed requests that recorded an error.
    pub exception: u64,
    /// Average response time of the completed requests, in milliseconds.
    pub avg_rt: u64,
    /// Requests let through against a future window's quota.
    pub occupied_pass: u64,
    /// Calls inside the resource when the line was written.
    pub concurrency: u64,
    /// The resource's classification (Sentinel's resource type: 0, common).
    pub classification: i32,
}

impl MetricLine {
    /// Parses one line as written; `None` if it is not one.
    pub fn parse(line: &str) -> Option<MetricLine> {
        let line = line.trim_end_matches(['\n', '\r']);
        let mut left = line.splitn(3, '|');
        let timestamp_ms = left.next()?.parse().ok()?;
        let _date = left.next()?;
        let rest = left.next()?;
        let mut right = rest.rsplitn(9, '|');
        let mut number = || right.next()?.parse::<u64>().ok();
        let classification = i32::try_from(number()?).ok()?;
        let concurrency = number()?;
        let occupied_pass = number()?;
        let avg_rt = number()?;
        let exception = number()?;
        let success = number()?;
        let block = number()?;
        let pass = number()?;
        let resource = right.next()?.to_owned();
        Some(MetricLine {
            timestamp_ms,
            resource,
            pass,
            block,
            success,
            exception,
            avg_rt,
            occupied_pass,
            concurrency,
            classification,
        })
    }
}

impl fmt::Display for MetricLine {
    /// The line as written, without its line break.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}|{}|", self.timestamp_ms, date_time(self.timestamp_ms))?;
        for c in self.resource.chars() {
            match c {
                '\n' | '\r' => f.write_str(" ")?,
                c => fmt::Write::write_char(f, c)?,
            }
        }
        write!(
            f,
            "|{}|{}|{}|{}|{}|{}|{}|{}",
            self.pass,
            self.block,
            self.success,
            self.exception,
            self.avg_rt,
            self.occupied_pass,
            self.concurrency,
            self.classification
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(resource: &str) -> MetricLine {
        MetricLine {
            timestamp_ms: 1_700_000_000_000,
            resource: resource.into(),
            pass: 10,
            block: 2,
            success: 9,
            exception: 1,
            avg_rt: 12,
            occupied_pass: 0,
            concurrency: 3,
            classification: 0,
        }
    }

    #[test]
    fn writes_sentinel_format_and_reads_it_back() {
        let l = line("GET:/orders");
        let text = l.to_string();
        assert_eq!(
            text,
            "1700000000000|2023-11-14 22:13:20|GET:/orders|10|2|9|1|12|0|3|0"
        );
        assert_eq!(MetricLine::parse(&text), Some(l));
    }

    #[test]
    fn names_with_bars_survive_and_line_breaks_become_spaces() {
        let l = line("a|b");
        assert_eq!(MetricLine::parse(&l.to_string()), Some(l));
        let text = line("a\nb").to_string();
        assert_eq!(MetricLine::parse(&text).unwrap().resource, "a b");
    }

    #[test]
    fn garbage_is_not_a_line() {
        assert_eq!(MetricLine::parse(""), None);
        assert_eq!(MetricLine::parse("1|2|x|1|2|3"), None);
        assert_eq!(MetricLine::parse("x|d|r|1|2|3|4|5|6|7|8"), None);
    }
}
