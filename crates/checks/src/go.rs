//! Settings read as the Go programs that own them read them (Karpenter, the VPC CNI, Cilium):
//! booleans as `strconv.ParseBool`, durations as `time.ParseDuration`. Reading a value more
//! leniently than its owner (`tRuE`, ` true`, `1d`) would judge a setting the program does not
//! have. Pure: no IO.

use jiff::SignedDuration;

/// Go's `strconv.ParseBool`: `1`, `t`, `T`, `TRUE`, `true`, `True` and their false
/// counterparts; anything else (spaces included) is no boolean.
pub fn parse_bool(s: &str) -> Option<bool> {
    match s {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

/// Nanoseconds per unit, as `time.ParseDuration` names them (`µs` as U+00B5 or U+03BC).
const UNITS: [(&str, u128); 8] = [
    ("ns", 1),
    ("us", 1_000),
    ("\u{b5}s", 1_000),
    ("\u{3bc}s", 1_000),
    ("ms", 1_000_000),
    ("s", 1_000_000_000),
    ("m", 60_000_000_000),
    ("h", 3_600_000_000_000),
];

/// Go's `time.ParseDuration`: an optional sign, then one or more decimal numbers each with a unit
/// (`300ms`, `-1.5h`, `2h45m`); `0` alone needs none. `None` for anything Go refuses (no unit, an
/// unknown one such as `d`, spaces, an overflow).
pub fn parse_duration(s: &str) -> Option<SignedDuration> {
    let (negative, mut rest) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    if rest == "0" {
        return Some(SignedDuration::ZERO);
    }
    if rest.is_empty() {
        return None;
    }
    let mut total: u128 = 0;
    while !rest.is_empty() {
        let whole_len = rest.bytes().take_while(u8::is_ascii_digit).count();
        let (whole, after) = rest.split_at(whole_len);
        let (fraction, after) = match after.strip_prefix('.') {
            Some(f) => {
                let n = f.bytes().take_while(u8::is_ascii_digit).count();
                f.split_at(n)
            }
            None => ("", after),
        };
        if whole.is_empty() && fraction.is_empty() {
            return None;
        }
        let unit_len = after
            .char_indices()
            .find(|(_, c)| c.is_ascii_digit() || *c == '.')
            .map_or(after.len(), |(i, _)| i);
        let (unit, next) = after.split_at(unit_len);
        let per = UNITS.iter().find(|(name, _)| *name == unit)?.1;
        let whole: u128 = if whole.is_empty() {
            0
        } else {
            whole.parse().ok()?
        };
        let mut value = whole.checked_mul(per)?;
        // The fraction's digits, scaled to the unit (Go's `leadingFraction`, truncating).
        let mut scale = per;
        for d in fraction.bytes() {
            scale /= 10;
            value = value.checked_add(u128::from(d - b'0') * scale)?;
        }
        total = total.checked_add(value)?;
        rest = next;
    }
    // Go's Duration is an int64 of nanoseconds.
    let nanos = i64::try_from(total).ok()?;
    let nanos = if negative { -nanos } else { nanos };
    Some(SignedDuration::from_nanos(nanos))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn booleans_are_what_strconv_parse_bool_accepts() {
        for t in ["1", "t", "T", "TRUE", "true", "True"] {
            assert_eq!(parse_bool(t), Some(true), "{t}");
        }
        for f in ["0", "f", "F", "FALSE", "false", "False"] {
            assert_eq!(parse_bool(f), Some(false), "{f}");
        }
        for neither in ["tRuE", " true", "yes", "", "on"] {
            assert_eq!(parse_bool(neither), None, "{neither:?}");
        }
    }

    #[test]
    fn durations_are_what_time_parse_duration_accepts() {
        let mins = SignedDuration::from_mins;
        assert_eq!(
            parse_duration("720h"),
            Some(SignedDuration::from_hours(720))
        );
        assert_eq!(parse_duration("1h30m"), Some(mins(90)));
        assert_eq!(parse_duration("1.5h"), Some(mins(90)));
        assert_eq!(parse_duration(".5h"), Some(mins(30)));
        assert_eq!(parse_duration("-2m"), Some(mins(-2)));
        assert_eq!(
            parse_duration("300ms"),
            Some(SignedDuration::from_millis(300))
        );
        assert_eq!(
            parse_duration("1\u{b5}s"),
            Some(SignedDuration::from_micros(1))
        );
        assert_eq!(parse_duration("0"), Some(SignedDuration::ZERO));
        for refused in ["", "1", "1d", "1 h", "h", "1.h.5", "Never", "P1D", "1hour"] {
            assert_eq!(parse_duration(refused), None, "{refused:?}");
        }
        assert_eq!(
            parse_duration("9999999999999h"),
            None,
            "beyond Go's int64 nanoseconds"
        );
    }
}
