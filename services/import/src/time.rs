//! RFC 3339 timestamps as harnesses write them (`2026-12-04T21:42:04.492806+00:00`,
//! `...Z`, or without an offset: UTC), to milliseconds since the epoch.

/// Milliseconds since the epoch, or `None` when `s` is no RFC 3339 date-time.
pub fn parse_ms(s: &str) -> Option<i64> {
    let s = s.trim();
    let b = s.as_bytes();
    if b.len() < 19 || !matches!(b[10], b'T' | b't' | b' ') {
        return None;
    }
    let num = |r: std::ops::Range<usize>| -> Option<i64> { s.get(r)?.parse::<i64>().ok() };
    let (year, month, day) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (hour, minute, second) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if b[4] != b'-' || b[7] != b'-' || b[13] != b':' || b[16] != b':' {
        return None;
    }
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) || hour > 23 || minute > 59 || second > 60 {
        return None;
    }
    let mut rest = &s[19..];
    let mut millis = 0i64;
    if let Some(frac) = rest.strip_prefix('.') {
        let digits = frac.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return None;
        }
        let ms: String = frac[..digits].chars().chain("000".chars()).take(3).collect();
        millis = ms.parse().ok()?;
        rest = &frac[digits..];
    }
    let offset_min = match rest {
        "" | "Z" | "z" => 0,
        _ => {
            let sign = match rest.as_bytes()[0] {
                b'+' => 1,
                b'-' => -1,
                _ => return None,
            };
            let hm = &rest[1..];
            let (h, m) = hm.split_once(':').unwrap_or((hm.get(..2)?, hm.get(2..)?));
            sign * (h.parse::<i64>().ok()? * 60 + m.parse::<i64>().ok()?)
        }
    };
    let days = days_from_civil(year, month, day);
    let secs = days * 86_400 + hour * 3600 + minute * 60 + second - offset_min * 60;
    Some(secs * 1000 + millis)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::parse_ms;

    #[test]
    fn rfc3339_with_offsets_and_fractions() {
        // date -d '2026-12-04T21:42:04.492806+00:00' +%s%3N
        assert_eq!(parse_ms("2026-12-04T21:42:04.492806+00:00"), Some(1_796_420_524_492));
        assert_eq!(parse_ms("2026-12-04T21:42:04Z"), Some(1_796_420_524_000));
        assert_eq!(parse_ms("2026-12-04T13:42:04-08:00"), Some(1_796_420_524_000));
        assert_eq!(parse_ms("2026-12-04 21:42:04.5"), Some(1_796_420_524_500));
        assert_eq!(parse_ms("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(parse_ms("2000-02-29T00:00:00+0530"), Some(951_762_600_000));
        for bad in ["", "2026-12-04", "2026-13-04T00:00:00Z", "2026-12-04T21:42:04.Z", "yesterday at noon"] {
            assert_eq!(parse_ms(bad), None, "{bad}");
        }
    }
}
