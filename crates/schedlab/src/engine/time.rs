//! Simulated time: integer nanoseconds, and the duration syntax scenarios use.

/// Simulated time and durations, in nanoseconds.
pub type Ns = u64;

/// Nanoseconds per microsecond (the kernel's NSEC_PER_USEC).
pub const NSEC_PER_USEC: Ns = 1_000;
/// Nanoseconds per millisecond (NSEC_PER_MSEC).
pub const NSEC_PER_MSEC: Ns = 1_000_000;
/// Nanoseconds per second (NSEC_PER_SEC).
pub const NSEC_PER_SEC: Ns = 1_000_000_000;

/// A duration that does not parse; the message names the accepted form.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    /// A number followed by something that is not a unit.
    #[error("unknown unit {unit:?} in {text:?}: expected a number followed by ns, us, ms or s (e.g. \"200us\")")]
    UnknownUnit {
        /// The unit as written.
        unit: String,
        /// The whole duration as written.
        text: String,
    },
    /// A unit without a number.
    #[error("{text:?} has no number: expected e.g. \"10s\", \"200us\" or \"1500ns\"")]
    NoNumber {
        /// The duration as written.
        text: String,
    },
    /// A number that does not parse (two dots, a sign, ...).
    #[error("{text:?} is not a duration: expected e.g. \"10s\", \"200us\" or \"1500ns\"")]
    Malformed {
        /// The duration as written.
        text: String,
    },
    /// More nanoseconds than 64 bits hold.
    #[error("{text:?} is too large")]
    TooLarge {
        /// The duration as written.
        text: String,
    },
}

/// Parses "10s", "200us", "1.5ms", "750000ns" or a bare integer (nanoseconds).
///
/// Fractions are accepted so that "0.7ms" reads naturally; the result is
/// rounded down to whole nanoseconds. The error text names the accepted form.
pub fn parse_duration(text: &str) -> Result<Ns, DurationError> {
    let s = text.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '_'))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let mult = match unit.trim() {
        "" | "ns" => 1,
        "us" | "µs" => NSEC_PER_USEC,
        "ms" => NSEC_PER_MSEC,
        "s" => NSEC_PER_SEC,
        "m" | "min" => 60 * NSEC_PER_SEC,
        other => return Err(DurationError::UnknownUnit { unit: other.to_string(), text: text.to_string() }),
    };
    let num = num.replace('_', "");
    if num.is_empty() {
        return Err(DurationError::NoNumber { text: text.to_string() });
    }
    let (int_part, frac_part) = match num.split_once('.') {
        Some((i, f)) => (i, f),
        None => (num.as_str(), ""),
    };
    let bad = || DurationError::Malformed { text: text.to_string() };
    let int: u64 = if int_part.is_empty() { 0 } else { int_part.parse().map_err(|_| bad())? };
    let mut total = int.checked_mul(mult).ok_or_else(|| DurationError::TooLarge { text: text.to_string() })?;
    if !frac_part.is_empty() {
        if frac_part.contains('.') || !frac_part.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad());
        }
        // Scale the fraction digit by digit so that no floating point is involved.
        let mut scale = mult;
        for d in frac_part.bytes().take(18) {
            scale /= 10;
            total += (d - b'0') as u64 * scale;
        }
    }
    Ok(total)
}

/// Formats a duration with a unit chosen for its magnitude: "850ns", "12.3us", "4.56ms", "2.000s".
pub fn fmt_ns(ns: Ns) -> String {
    if ns < NSEC_PER_USEC {
        format!("{ns}ns")
    } else if ns < NSEC_PER_MSEC {
        fmt_scaled(ns, NSEC_PER_USEC, "us")
    } else if ns < NSEC_PER_SEC {
        fmt_scaled(ns, NSEC_PER_MSEC, "ms")
    } else {
        fmt_scaled(ns, NSEC_PER_SEC, "s")
    }
}

fn fmt_scaled(ns: Ns, unit: Ns, suffix: &str) -> String {
    let whole = ns / unit;
    // Three significant digits: 1.23, 12.3, 123
    let (digits, div) = if whole >= 100 { (0, unit) } else if whole >= 10 { (1, unit / 10) } else { (2, unit / 100) };
    let scaled = (ns + div / 2) / div;
    match digits {
        0 => format!("{scaled}{suffix}"),
        1 => format!("{}.{}{suffix}", scaled / 10, scaled % 10),
        _ => format!("{}.{:02}{suffix}", scaled / 100, scaled % 100),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_units() {
        assert_eq!(parse_duration("10s"), Ok(10 * NSEC_PER_SEC));
        assert_eq!(parse_duration("200us"), Ok(200_000));
        assert_eq!(parse_duration("1ms"), Ok(1_000_000));
        assert_eq!(parse_duration("0.7ms"), Ok(700_000));
        assert_eq!(parse_duration("1500"), Ok(1500));
        assert_eq!(parse_duration(" 3 ms "), Ok(3_000_000));
        assert_eq!(parse_duration("1_000ns"), Ok(1000));
    }

    #[test]
    fn rejects_garbage() {
        assert!(parse_duration("1xs").unwrap_err().to_string().contains("unknown unit"));
        assert!(parse_duration("ms").is_err());
        assert!(parse_duration("1.2.3ms").is_err());
        assert!(parse_duration("-5ms").is_err());
    }

    #[test]
    fn formats_by_magnitude() {
        assert_eq!(fmt_ns(850), "850ns");
        assert_eq!(fmt_ns(12_345), "12.3us");
        assert_eq!(fmt_ns(123_456), "123us");
        assert_eq!(fmt_ns(4_560_000), "4.56ms");
        assert_eq!(fmt_ns(2_000_000_000), "2.00s");
    }
}
