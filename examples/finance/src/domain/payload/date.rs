//! Calendar dates on the wire: ISO-8601 strings whose first ten characters
//! are `YYYY-MM-DD` (a time part after `T` or a space is allowed and
//! ignored). `Date` orders chronologically and prints as `YYYY-MM-DD`.

use std::fmt;

/// A validated calendar date (proleptic Gregorian).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Date {
    year: i32,
    month: u32,
    day: u32,
}

fn leap(y: i32) -> bool {
    (y % 4 == 0 && y % 100 != 0) || y % 400 == 0
}

fn days_in_month(y: i32, m: u32) -> u32 {
    match m {
        4 | 6 | 9 | 11 => 30,
        2 if leap(y) => 29,
        2 => 28,
        _ => 31,
    }
}

impl Date {
    /// Parses the `YYYY-MM-DD` prefix of an ISO-8601 string; the error says
    /// what was expected and shows what was got.
    pub fn parse(s: &str) -> Result<Self, String> {
        let bad = || format!("expected an ISO-8601 date 'YYYY-MM-DD', got '{s}'");
        let b = s.as_bytes();
        if b.len() < 10 || b[4] != b'-' || b[7] != b'-' {
            return Err(bad());
        }
        if b.len() > 10 && b[10] != b'T' && b[10] != b' ' {
            return Err(bad());
        }
        let digits = |r: std::ops::Range<usize>| -> Option<u32> {
            let part = s.get(r)?;
            if part.bytes().all(|c| c.is_ascii_digit()) {
                part.parse().ok()
            } else {
                None
            }
        };
        let (Some(y), Some(m), Some(d)) = (digits(0..4), digits(5..7), digits(8..10)) else {
            return Err(bad());
        };
        let year = i32::try_from(y).map_err(|_| bad())?;
        if !(1..=12).contains(&m) {
            return Err(format!("month {m} out of range 01-12 in '{s}'"));
        }
        if d == 0 || d > days_in_month(year, m) {
            return Err(format!("day {d} does not exist in {year:04}-{m:02} ('{s}')"));
        }
        Ok(Self {
            year,
            month: m,
            day: d,
        })
    }
}

impl fmt::Display for Date {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:04}-{:02}-{:02}", self.year, self.month, self.day)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn accepts_dates_and_datetimes() {
        // Pins the accepted forms: plain date, and a date with a time part.
        assert_eq!(Date::parse("2024-02-29").unwrap().to_string(), "2024-02-29");
        assert_eq!(
            Date::parse("2020-01-31T16:00:00Z").unwrap().to_string(),
            "2020-01-31"
        );
        assert!(Date::parse("2020-01-31 00:00").is_ok());
    }

    #[test]
    fn rejects_malformed_and_impossible_dates() {
        // Pins the refusals: wrong shape, month 13, Feb 29 of a non-leap year, 1900 not leap.
        assert!(Date::parse("01/02/2020").unwrap_err().contains("'YYYY-MM-DD'"));
        assert!(Date::parse("2020-1-02").is_err());
        assert!(Date::parse("2020-01-02X").is_err());
        assert!(Date::parse("2020-13-01").unwrap_err().contains("month 13"));
        assert!(Date::parse("2023-02-29").is_err());
        assert!(Date::parse("1900-02-29").is_err());
        assert!(Date::parse("2000-02-29").is_ok());
    }

    #[test]
    fn orders_chronologically() {
        // Pins Ord: year, then month, then day.
        let a = Date::parse("2019-12-31").unwrap();
        let b = Date::parse("2020-01-01").unwrap();
        assert!(a < b);
    }
}
