//! Scalars written so that the parser reads back exactly the value: plain
//! when that is unambiguous, double-quoted with escapes otherwise.

use std::borrow::Cow;
use std::fmt::Write;

use crate::parse::scalar::{Scalar, resolve};

/// `s` as a YAML scalar that reads back as the string `s`, in a block or a
/// flow collection alike.
pub(crate) fn string(s: &str) -> Cow<'_, str> {
    if plain_is_safe(s) {
        Cow::Borrowed(s)
    } else {
        Cow::Owned(quoted(s))
    }
}

/// Plain only for a conservative alphabet: what resource names usually are
/// (`GET:/orders`, `com.example.Service:call(int)` is quoted). Everything
/// else is quoted, which is always correct, only noisier.
fn plain_is_safe(s: &str) -> bool {
    let Some(first) = s.chars().next() else {
        return false;
    };
    let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '/' | ':');
    // `-`, `:` and `.` open indicators or document markers at the start; a
    // trailing `:` would read as a key.
    s.chars().all(allowed)
        && !matches!(first, '-' | ':' | '.')
        && !s.ends_with(':')
        && resolve(s, true) == Scalar::Str(s)
}

fn quoted(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            // Control characters, the Unicode line and paragraph separators
            // (line breaks to YAML 1.1 readers) and the byte-order mark are
            // escaped so the file stays one scalar per line and plain text.
            c if c.is_control() || matches!(c, '\u{2028}' | '\u{2029}' | '\u{feff}') => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A number that reads back as the same `f64`: whole numbers without a
/// fraction (`100`), others in Rust's shortest round-trip form (`0.5`,
/// `1e300`).
pub(crate) fn float(value: f64) -> String {
    if value.is_nan() {
        return ".nan".into();
    }
    if value.is_infinite() {
        return if value > 0.0 { ".inf" } else { "-.inf" }.into();
    }
    // Below 2^53 every whole f64 is an exact integer, and the parser reads
    // an integer back through `as f64` exactly.
    if value.fract() == 0.0 && value.abs() < 9_007_199_254_740_992.0 && value != 0.0 {
        return format!("{}", value as i64);
    }
    if value == 0.0 {
        // -0.0 compares equal to 0.0; the sign is not worth a `-0.0` in a file.
        return "0".into();
    }
    format!("{value:?}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_when_unambiguous() {
        assert_eq!(string("GET:/orders"), "GET:/orders");
        assert_eq!(string("a-b_c.d"), "a-b_c.d");
        assert_eq!(string("42"), "\"42\"");
        assert_eq!(string("true"), "\"true\"");
        assert_eq!(string("null"), "\"null\"");
        assert_eq!(string(""), "\"\"");
        assert_eq!(string("-x"), "\"-x\"");
        assert_eq!(string("a:"), "\"a:\"");
        assert_eq!(string("a b"), "\"a b\"");
        assert_eq!(string("a\"b\\c\n\u{7}"), "\"a\\\"b\\\\c\\n\\u0007\"");
        assert_eq!(string("é"), "\"é\"");
    }

    #[test]
    fn numbers() {
        assert_eq!(float(100.0), "100");
        assert_eq!(float(0.5), "0.5");
        assert_eq!(float(-0.0), "0");
        assert_eq!(float(1e300), "1e300");
        assert_eq!(float(f64::NAN), ".nan");
    }
}
