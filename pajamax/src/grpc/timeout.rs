//! The `grpc-timeout` header: at most 8 digits and a unit.

use std::time::Duration;

/// Parses a `grpc-timeout` value such as `100m` or `5S`; `None` if malformed.
///
/// ```
/// use std::time::Duration;
/// use pajamax::grpc::timeout::parse;
/// assert_eq!(parse(b"100m"), Some(Duration::from_millis(100)));
/// assert_eq!(parse(b"2H"), Some(Duration::from_secs(7200)));
/// assert_eq!(parse(b"123456789S"), None);
/// ```
pub fn parse(value: &[u8]) -> Option<Duration> {
    let (&unit, digits) = value.split_last()?;
    if digits.is_empty() || digits.len() > 8 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let n = digits
        .iter()
        .fold(0u64, |acc, d| acc * 10 + u64::from(d - b'0'));
    Some(match unit {
        b'H' => Duration::from_secs(n * 3600),
        b'M' => Duration::from_secs(n * 60),
        b'S' => Duration::from_secs(n),
        b'm' => Duration::from_millis(n),
        b'u' => Duration::from_micros(n),
        b'n' => Duration::from_nanos(n),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_unit_and_rejects_the_malformed() {
        assert_eq!(parse(b"1M"), Some(Duration::from_secs(60)));
        assert_eq!(parse(b"7S"), Some(Duration::from_secs(7)));
        assert_eq!(parse(b"99999999u"), Some(Duration::from_micros(99_999_999)));
        assert_eq!(parse(b"5n"), Some(Duration::from_nanos(5)));
        for bad in [&b""[..], b"S", b"10", b"10x", b"-1S", b"1 S", b"123456789m"] {
            assert_eq!(parse(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
    }
}
