//! Arguments of an entry, which hot-parameter rules and user slots read.

use std::fmt;
use std::sync::Arc;

/// One argument passed with [`EntryBuilder::args`](crate::EntryBuilder::args):
/// a small owned value that can be compared and hashed.
#[derive(Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ParamValue {
    /// A boolean.
    Bool(bool),
    /// A signed integer (every integer type converts to this or `UInt`).
    Int(i64),
    /// An unsigned integer too large for `Int`.
    UInt(u64),
    /// A string, shared.
    Str(Arc<str>),
}

impl fmt::Debug for ParamValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParamValue::Bool(v) => write!(f, "{v}"),
            ParamValue::Int(v) => write!(f, "{v}"),
            ParamValue::UInt(v) => write!(f, "{v}"),
            ParamValue::Str(v) => write!(f, "{v:?}"),
        }
    }
}

impl fmt::Display for ParamValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParamValue::Str(v) => f.write_str(v),
            other => fmt::Debug::fmt(other, f),
        }
    }
}

impl From<bool> for ParamValue {
    fn from(v: bool) -> Self {
        ParamValue::Bool(v)
    }
}

macro_rules! from_signed {
    ($($t:ty),*) => {$(
        impl From<$t> for ParamValue {
            fn from(v: $t) -> Self {
                ParamValue::Int(i64::from(v))
            }
        }
    )*};
}
from_signed!(i8, i16, i32, i64, u8, u16, u32);

impl From<u64> for ParamValue {
    fn from(v: u64) -> Self {
        i64::try_from(v).map_or(ParamValue::UInt(v), ParamValue::Int)
    }
}

impl From<usize> for ParamValue {
    fn from(v: usize) -> Self {
        ParamValue::from(v as u64)
    }
}

impl From<isize> for ParamValue {
    fn from(v: isize) -> Self {
        ParamValue::Int(v as i64)
    }
}

impl From<&str> for ParamValue {
    fn from(v: &str) -> Self {
        ParamValue::Str(v.into())
    }
}

impl From<String> for ParamValue {
    fn from(v: String) -> Self {
        ParamValue::Str(v.into())
    }
}

impl From<&String> for ParamValue {
    fn from(v: &String) -> Self {
        ParamValue::Str(v.as_str().into())
    }
}

impl From<Arc<str>> for ParamValue {
    fn from(v: Arc<str>) -> Self {
        ParamValue::Str(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_compare_across_types() {
        assert_eq!(ParamValue::from(7u8), ParamValue::from(7i64));
        assert_eq!(ParamValue::from(7u64), ParamValue::Int(7));
        assert_eq!(ParamValue::from(u64::MAX), ParamValue::UInt(u64::MAX));
        assert_eq!(ParamValue::from("a").to_string(), "a");
        assert_eq!(format!("{:?}", ParamValue::from("a")), "\"a\"");
    }
}
