//! Canonical Kubernetes quantities.
//!
//! The API server stores a quantity in canonical form (`1.5Gi` becomes `1536Mi`,
//! `0.5` becomes `500m`). A value the hook copies from a `MySQL` spec into a
//! StatefulSet must already be canonical, or the stored object differs from the
//! desired one on every sync and Metacontroller updates it forever. This follows
//! `k8s.io/apimachinery/pkg/api/resource.Quantity.String()`.

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

/// Why a quantity could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid quantity {0:?}: expected a number with an optional suffix (Ki, Mi, Gi, Ti, Pi, Ei, n, u, m, k, M, G, T, P, E or an exponent)"
)]
pub struct InvalidQuantity(pub String);

/// The canonical form of `q`.
///
/// # Errors
/// When `q` is not a quantity, or is too precise or too large to represent.
pub fn canonical(q: &Quantity) -> Result<Quantity, InvalidQuantity> {
    canonical_str(&q.0).map(Quantity)
}

/// The value of `q` in billionths (the API server's finest unit, `1n`), to
/// compare two quantities.
///
/// # Errors
/// When `q` is not a quantity or its value does not fit.
pub fn nanos(q: &Quantity) -> Result<i128, InvalidQuantity> {
    let s = &q.0;
    let bad = || InvalidQuantity(s.clone());
    let canonical = canonical_str(s)?;
    let (negative, rest) = match canonical.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, canonical.as_str()),
    };
    let end = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
    let (digits, suffix) = rest.split_at(end);
    let mantissa: i128 = digits.parse().map_err(|_| bad())?;
    let (exp10, binary_power): (u32, u32) = match suffix {
        "" => (9, 0),
        "n" => (0, 0),
        "u" => (3, 0),
        "m" => (6, 0),
        "k" => (12, 0),
        "M" => (15, 0),
        "G" => (18, 0),
        "T" => (21, 0),
        "P" => (24, 0),
        "E" => (27, 0),
        "Ki" => (9, 1),
        "Mi" => (9, 2),
        "Gi" => (9, 3),
        "Ti" => (9, 4),
        "Pi" => (9, 5),
        "Ei" => (9, 6),
        e if e.starts_with('e') => {
            let exp: u32 = e[1..].parse().map_err(|_| bad())?;
            (exp + 9, 0)
        }
        _ => return Err(bad()),
    };
    let v = mantissa
        .checked_mul(10_i128.checked_pow(exp10).ok_or_else(bad)?)
        .and_then(|v| v.checked_mul(1024_i128.checked_pow(binary_power)?))
        .ok_or_else(bad)?;
    Ok(if negative { -v } else { v })
}

enum Format {
    DecimalSi,
    BinarySi,
    DecimalExponent,
}

fn canonical_str(s: &str) -> Result<String, InvalidQuantity> {
    let bad = || InvalidQuantity(s.to_owned());
    let (negative, rest) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let number_end = rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(rest.len());
    let (number, suffix) = rest.split_at(number_end);
    let (int_part, frac_part) = number.split_once('.').unwrap_or((number, ""));
    if int_part.is_empty() && frac_part.is_empty() {
        return Err(bad());
    }
    let digits = format!("{int_part}{frac_part}");
    let mut mantissa: i128 = if digits.is_empty() { 0 } else { digits.parse().map_err(|_| bad())? };
    let frac_len = i32::try_from(frac_part.len()).map_err(|_| bad())?;
    if negative {
        mantissa = -mantissa;
    }
    let (format, exp10, binary_power) = match suffix {
        "" => (Format::DecimalSi, 0, 0),
        "n" => (Format::DecimalSi, -9, 0),
        "u" => (Format::DecimalSi, -6, 0),
        "m" => (Format::DecimalSi, -3, 0),
        "k" => (Format::DecimalSi, 3, 0),
        "M" => (Format::DecimalSi, 6, 0),
        "G" => (Format::DecimalSi, 9, 0),
        "T" => (Format::DecimalSi, 12, 0),
        "P" => (Format::DecimalSi, 15, 0),
        "E" => (Format::DecimalSi, 18, 0),
        "Ki" => (Format::BinarySi, 0, 1),
        "Mi" => (Format::BinarySi, 0, 2),
        "Gi" => (Format::BinarySi, 0, 3),
        "Ti" => (Format::BinarySi, 0, 4),
        "Pi" => (Format::BinarySi, 0, 5),
        "Ei" => (Format::BinarySi, 0, 6),
        e if e.starts_with(['e', 'E']) => {
            let exp: i32 = e[1..].parse().map_err(|_| bad())?;
            (Format::DecimalExponent, exp, 0)
        }
        _ => return Err(bad()),
    };
    // value = mantissa * 10^(exp10 - frac_len) * 1024^binary_power
    let mut exp = exp10 - frac_len;
    for _ in 0..binary_power {
        mantissa = mantissa.checked_mul(1024).ok_or_else(bad)?;
    }
    let format = match format {
        Format::BinarySi => {
            // Binary form only for whole numbers of at least 1024 in magnitude.
            match exact_integer(mantissa, exp) {
                Some(v) if v.unsigned_abs() >= 1024 => return Ok(binary(v)),
                _ => Format::DecimalSi,
            }
        }
        f => f,
    };
    if mantissa == 0 {
        return Ok("0".to_owned());
    }
    while mantissa % 10 == 0 {
        mantissa /= 10;
        exp += 1;
    }
    if exp < -9 {
        return Err(bad());
    }
    while exp.rem_euclid(3) != 0 {
        mantissa = mantissa.checked_mul(10).ok_or_else(bad)?;
        exp -= 1;
    }
    match format {
        Format::DecimalExponent => Ok(if exp == 0 { mantissa.to_string() } else { format!("{mantissa}e{exp}") }),
        _ => {
            while exp > 18 {
                mantissa = mantissa.checked_mul(1000).ok_or_else(bad)?;
                exp -= 3;
            }
            let suffix = match exp {
                -9 => "n",
                -6 => "u",
                -3 => "m",
                0 => "",
                3 => "k",
                6 => "M",
                9 => "G",
                12 => "T",
                15 => "P",
                _ => "E",
            };
            Ok(format!("{mantissa}{suffix}"))
        }
    }
}

/// `mantissa * 10^exp` when it is a whole number.
fn exact_integer(mut mantissa: i128, mut exp: i32) -> Option<i128> {
    while exp < 0 {
        if mantissa % 10 != 0 {
            return None;
        }
        mantissa /= 10;
        exp += 1;
    }
    while exp > 0 {
        mantissa = mantissa.checked_mul(10)?;
        exp -= 1;
    }
    Some(mantissa)
}

fn binary(mut v: i128) -> String {
    let mut power = 0;
    while power < 6 && v % 1024 == 0 {
        v /= 1024;
        power += 1;
    }
    let suffix = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"][power];
    format!("{v}{suffix}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_compare_across_suffixes() {
        let n = |s: &str| nanos(&Quantity(s.to_owned())).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(n("1"), 1_000_000_000);
        assert_eq!(n("500m"), n("0.5"));
        assert_eq!(n("1Gi"), n("1024Mi"));
        assert!(n("1G") < n("1Gi"));
        assert_eq!(n("-1"), -1_000_000_000);
        assert_eq!(n("2e3"), n("2k"));
    }

    #[test]
    fn matches_the_api_servers_canonical_forms() {
        for (input, want) in [
            ("1Gi", "1Gi"),
            ("1024Mi", "1Gi"),
            ("1.5Gi", "1536Mi"),
            ("0.5Gi", "512Mi"),
            ("1536", "1536"),
            ("1.5", "1500m"),
            ("0.1", "100m"),
            ("1000m", "1"),
            ("100M", "100M"),
            ("1000M", "1G"),
            ("10G", "10G"),
            ("500m", "500m"),
            ("0", "0"),
            ("1e3", "1e3"),
            ("1000", "1k"),
            ("512Ki", "512Ki"),
            ("1Ki", "1Ki"),
            ("0.5Ki", "512"),
            ("2.5", "2500m"),
        ] {
            assert_eq!(canonical_str(input).as_deref(), Ok(want), "{input}");
        }
    }

    #[test]
    fn refuses_what_is_not_a_quantity() {
        for input in ["", "abc", "1.5X", "Gi", "1..5", "1e", "0.0000000001"] {
            assert!(canonical_str(input).is_err(), "{input}");
        }
    }
}
