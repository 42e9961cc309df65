//! Human-readable units.

/// The most bytes one device can hold, with room to spare (1 PiB; the largest accelerators hold
/// under 1 TiB). A size above it in a file is a contradiction to report, never a figure to print.
pub const MAX_PLAUSIBLE_BYTES: u64 = 1 << 50;

/// Bytes in binary units with three significant digits: `512 B`, `1.50 KiB`, `38.2 GiB`.
pub fn format_bytes(bytes: i64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let sign = if bytes < 0 { "-" } else { "" };
    let mut value = bytes.unsigned_abs() as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{sign}{value} B")
    } else if value < 10.0 {
        format!("{sign}{value:.2} {}", UNITS[unit])
    } else if value < 100.0 {
        format!("{sign}{value:.1} {}", UNITS[unit])
    } else {
        format!("{sign}{value:.0} {}", UNITS[unit])
    }
}

/// Bytes exactly, thousands apart: `317,688,448 B`; for two figures that [`format_bytes`]
/// rounds alike, where their difference is the point.
pub fn exact_bytes(bytes: i64) -> String {
    let digits = bytes.unsigned_abs().to_string();
    let mut grouped = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, digit) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            grouped.push(',');
        }
        grouped.push(digit);
    }
    format!("{}{grouped} B", if bytes < 0 { "-" } else { "" })
}

/// `part` as a whole percentage of `whole`, rounded half up (14.51 % is 15 %, 13.8 % is 14 %):
/// what every finding prints, so that no figure reads lower than the data.
pub fn percent(part: u64, whole: u64) -> u64 {
    let whole = whole.max(1);
    ((u128::from(part) * 100 + u128::from(whole) / 2) / u128::from(whole)) as u64
}

#[cfg(test)]
mod tests {
    use super::{exact_bytes, format_bytes, percent};

    #[test]
    fn exact_bytes_are_grouped_by_thousands() {
        assert_eq!(exact_bytes(317_688_448), "317,688,448 B");
        assert_eq!(exact_bytes(999), "999 B");
        assert_eq!(exact_bytes(1000), "1,000 B");
        assert_eq!(exact_bytes(-65_536), "-65,536 B");
    }

    #[test]
    fn percentages_are_rounded_not_truncated() {
        assert_eq!(percent(1451, 10_000), 15);
        assert_eq!(percent(138, 1000), 14);
        assert_eq!(percent(1449, 10_000), 14);
        assert_eq!(percent(0, 0), 0);
        assert_eq!(percent(u64::MAX, u64::MAX), 100);
    }

    #[test]
    fn picks_binary_units() {
        assert_eq!(format_bytes(0), "0 B");
        assert_eq!(format_bytes(1023), "1023 B");
        assert_eq!(format_bytes(1536), "1.50 KiB");
        assert_eq!(format_bytes(20 * 1024 * 1024), "20.0 MiB");
        assert_eq!(format_bytes(-3 * 1024 * 1024 * 1024), "-3.00 GiB");
        assert_eq!(format_bytes(300 * 1024 * 1024 * 1024), "300 GiB");
    }
}
