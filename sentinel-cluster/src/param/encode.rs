//! A parameter value as a field of the flow id's keys in Redis: the same
//! for equal values on every instance (the equality of
//! [`ParamValue`]: integers by value whatever their type, floats by their
//! bits with every NaN one value, strings by their bytes), and at most
//! [`MAX_FIELD_BYTES`] long.

use sentinel_flow_core::ParamValue;

/// The longest field: a string longer than this part of it is kept as a
/// 128-bit hash of its bytes with its length (two strings share a field
/// only if their hashes collide: odds about `n² / 2¹²⁹` among `n` long
/// strings).
pub(crate) const MAX_FIELD_BYTES: usize = 64;

/// The field of `value`.
pub(crate) fn field_of(value: &ParamValue) -> String {
    match value {
        ParamValue::Bool(v) => format!("b:{}", u8::from(*v)),
        ParamValue::Int(v) => format!("i:{v}"),
        ParamValue::UInt(v) => format!("i:{v}"),
        ParamValue::Float(v) if v.is_nan() => format!("d:{:016x}", f64::NAN.to_bits()),
        ParamValue::Float(v) => format!("d:{:016x}", v.to_bits()),
        ParamValue::List(list) => {
            let parts: Vec<String> = list.iter().map(field_of).collect();
            bounded('l', &parts.join("\u{1f}"))
        }
        other => match other.as_str() {
            Some(s) => bounded('s', s),
            None => bounded('x', &format!("{other:?}")),
        },
    }
}

/// `<tag>:<text>`, or `<tag>#<hash>:<length>` when longer than the bound.
fn bounded(tag: char, text: &str) -> String {
    if text.len() + 2 <= MAX_FIELD_BYTES {
        return format!("{tag}:{text}");
    }
    let (a, b) = hash128(text.as_bytes());
    format!("{tag}#{a:016x}{b:016x}:{}", text.len())
}

/// Two FNV-1a hashes of different offsets: stable across processes and
/// versions (unlike the standard library's hashers).
fn hash128(bytes: &[u8]) -> (u64, u64) {
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    let mut a: u64 = 0xcbf2_9ce4_8422_2325;
    let mut b: u64 = 0x6c62_272e_07bb_0142;
    for &byte in bytes {
        a = (a ^ u64::from(byte)).wrapping_mul(PRIME);
        b = (b ^ u64::from(byte.rotate_left(3))).wrapping_mul(PRIME);
    }
    (a, b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_values_share_a_field_and_every_field_is_bounded() {
        assert_eq!(
            field_of(&ParamValue::Int(7)),
            field_of(&ParamValue::from(7u64))
        );
        assert_ne!(
            field_of(&ParamValue::Int(7)),
            field_of(&ParamValue::from("7"))
        );
        assert_ne!(
            field_of(&ParamValue::Int(0)),
            field_of(&ParamValue::Float(0.0))
        );
        assert_ne!(
            field_of(&ParamValue::Float(0.0)),
            field_of(&ParamValue::Float(-0.0)),
            "as Double.equals"
        );
        assert_eq!(
            field_of(&ParamValue::Float(f64::NAN)),
            field_of(&ParamValue::Float(-f64::NAN))
        );
        let short = "a".repeat(20);
        assert_eq!(
            field_of(&ParamValue::from(short.as_str())),
            field_of(&ParamValue::from(short.clone()))
        );
        let long = "x".repeat(10_000);
        let field = field_of(&ParamValue::from(long.as_str()));
        assert!(field.len() <= MAX_FIELD_BYTES, "{field}");
        let other = field_of(&ParamValue::from(format!("{}y", "x".repeat(9_999))));
        assert_ne!(field, other);
        let list = field_of(&ParamValue::list(["a".repeat(100), "b".into()]));
        assert!(list.len() <= MAX_FIELD_BYTES);
    }
}
