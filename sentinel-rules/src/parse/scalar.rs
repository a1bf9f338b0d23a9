//! What a scalar means, by YAML 1.2's core schema: only plain (unquoted)
//! scalars are null, booleans or numbers.

#[derive(Debug, PartialEq)]
pub(crate) enum Scalar<'a> {
    Null,
    Bool(bool),
    Int(i128),
    Float(f64),
    Str(&'a str),
}

/// Whether the scalar is null: `resolve(text, plain) == Scalar::Null`,
/// without resolving what else it could be.
pub(crate) fn is_null(text: &str, plain: bool) -> bool {
    plain && matches!(text, "" | "~" | "null" | "Null" | "NULL")
}

pub(crate) fn resolve(text: &str, plain: bool) -> Scalar<'_> {
    if !plain {
        return Scalar::Str(text);
    }
    if is_null(text, plain) {
        return Scalar::Null;
    }
    match text {
        "true" | "True" | "TRUE" => return Scalar::Bool(true),
        "false" | "False" | "FALSE" => return Scalar::Bool(false),
        ".inf" | ".Inf" | ".INF" | "+.inf" | "+.Inf" | "+.INF" => {
            return Scalar::Float(f64::INFINITY);
        }
        "-.inf" | "-.Inf" | "-.INF" => return Scalar::Float(f64::NEG_INFINITY),
        ".nan" | ".NaN" | ".NAN" => return Scalar::Float(f64::NAN),
        _ => {}
    }
    if let Some(int) = integer(text) {
        return Scalar::Int(int);
    }
    let numeric = text.bytes().any(|b| b.is_ascii_digit())
        && text
            .bytes()
            .all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'e' | b'E' | b'+' | b'-'));
    match numeric.then(|| text.parse::<f64>().ok()).flatten() {
        Some(float) => Scalar::Float(float),
        None => Scalar::Str(text),
    }
}

fn integer(text: &str) -> Option<i128> {
    let (negative, digits) = match text.as_bytes().first()? {
        b'-' => (true, &text[1..]),
        b'+' => (false, &text[1..]),
        _ => (false, text),
    };
    let (radix, digits) = if let Some(hex) = digits.strip_prefix("0x") {
        (16, hex)
    } else if let Some(octal) = digits.strip_prefix("0o") {
        (8, octal)
    } else {
        (10, digits)
    };
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    let value = i128::from_str_radix(digits, radix).ok()?;
    Some(if negative { -value } else { value })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn core_schema() {
        assert_eq!(resolve("~", true), Scalar::Null);
        assert_eq!(resolve("null", false), Scalar::Str("null"));
        assert_eq!(resolve("True", true), Scalar::Bool(true));
        assert_eq!(resolve("-5", true), Scalar::Int(-5));
        assert_eq!(resolve("0x1F", true), Scalar::Int(31));
        assert_eq!(resolve("0o17", true), Scalar::Int(15));
        assert_eq!(resolve("1.5e3", true), Scalar::Float(1500.0));
        assert_eq!(resolve("-.inf", true), Scalar::Float(f64::NEG_INFINITY));
        assert_eq!(resolve("100", false), Scalar::Str("100"));
        assert_eq!(resolve("inf", true), Scalar::Str("inf"));
        assert_eq!(resolve("1-2", true), Scalar::Str("1-2"));
        assert_eq!(resolve("-", true), Scalar::Str("-"));
        assert_eq!(
            resolve("99999999999999999999999999999999999999999", true),
            Scalar::Float(1e41)
        );
    }
}
