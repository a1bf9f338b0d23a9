//! Arguments of an entry, which hot-parameter rules and user slots read.

use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

/// One argument passed with [`EntryBuilder::args`](crate::EntryBuilder::args):
/// a small owned value that can be compared and hashed.
///
/// Build it with `From` (integers, floats, `bool`, strings,
/// `Vec<ParamValue>`) or from any [`ParamKey`] with [`ParamValue::of`].
/// Strings of up to [`InlineStr::CAPACITY`] bytes are stored inline, without
/// a heap allocation. The two string variants, and the two integer variants,
/// compare and hash by value: `ParamValue::Str("a".into()) ==
/// ParamValue::from("a")`. A float equals only a float, as Java's
/// `Double.equals` decides: by its bits, so `0.0 != -0.0` and every NaN
/// equals every NaN (and `1.0` is not the integer `1`).
///
/// ```
/// use sentinel_flow_core::ParamValue;
///
/// let args = [
///     ParamValue::from("sku-42"),
///     ParamValue::from(7u32),
///     ParamValue::from(vec![ParamValue::from("a"), ParamValue::from("b")]),
/// ];
/// assert_eq!(args[0].as_str(), Some("sku-42"));
/// assert_eq!(args[1], ParamValue::Int(7));
/// assert_eq!(args[2].as_list().map(<[ParamValue]>::len), Some(2));
/// ```
#[derive(Clone)]
#[non_exhaustive]
pub enum ParamValue {
    /// A boolean.
    Bool(bool),
    /// A signed integer (every integer type converts to this or `UInt`).
    Int(i64),
    /// An unsigned integer too large for `Int`.
    UInt(u64),
    /// A floating-point number (`f32` widens to this), compared and hashed
    /// by its bits, NaNs merged, as Java's `Double.equals`.
    Float(f64),
    /// A string, shared.
    Str(Arc<str>),
    /// A short string, stored inline (what `From<&str>` and `From<String>`
    /// give for strings of up to [`InlineStr::CAPACITY`] bytes).
    InlineStr(InlineStr),
    /// A collection: a hot-parameter rule checks each element as a value of
    /// its own. (An `Arc<Vec<_>>` rather than an `Arc<[_]>`: one word, so a
    /// held list travels in a register.)
    List(Arc<Vec<ParamValue>>),
}

/// A string of up to [`InlineStr::CAPACITY`] bytes held in place, so that a
/// short string argument costs no allocation.
#[derive(Clone, Copy)]
pub struct InlineStr {
    len: u8,
    bytes: [u8; InlineStr::CAPACITY],
}

impl InlineStr {
    /// The longest string held inline, in bytes (it keeps a
    /// [`ParamValue`] at 24 bytes).
    pub const CAPACITY: usize = 22;

    /// `s` inline, or `None` if it is longer than [`Self::CAPACITY`].
    #[inline]
    pub fn new(s: &str) -> Option<Self> {
        let len = s.len();
        if len > Self::CAPACITY {
            return None;
        }
        let mut bytes = [0; Self::CAPACITY];
        bytes[..len].copy_from_slice(s.as_bytes());
        Some(InlineStr {
            len: len as u8,
            bytes,
        })
    }

    /// The first `len` bytes of `bytes`, when they are ASCII: a short
    /// text written byte by byte (digits, an address) held without
    /// copying it again or checking it as UTF-8. `None` if `len` is over
    /// [`Self::CAPACITY`] or one of the bytes is not ASCII. The bytes
    /// past `len` are never read.
    #[inline]
    pub fn from_ascii(bytes: [u8; Self::CAPACITY], len: usize) -> Option<Self> {
        if !bytes.get(..len)?.is_ascii() {
            return None;
        }
        Some(InlineStr {
            len: len as u8,
            bytes,
        })
    }

    /// The string's bytes (valid UTF-8).
    #[inline]
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }

    /// The string.
    pub fn as_str(&self) -> &str {
        // Always valid: built from a `&str` and never modified.
        std::str::from_utf8(self.as_bytes()).unwrap_or_default()
    }
}

impl fmt::Debug for InlineStr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl PartialEq for InlineStr {
    fn eq(&self, other: &Self) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl Eq for InlineStr {}

impl Hash for InlineStr {
    fn hash<H: Hasher>(&self, state: &mut H) {
        // As `str` hashes, without re-validating the UTF-8.
        state.write(self.as_bytes());
        state.write_u8(0xff);
    }
}

/// What a [`ParamValue`] is, with the representations that compare equal
/// merged.
#[derive(PartialEq, Eq)]
enum Canonical<'a> {
    Bool(bool),
    Int(i128),
    /// The bits of a float, every NaN as the one canonical NaN.
    Float(u64),
    Bytes(&'a [u8]),
    List(&'a [ParamValue]),
}

impl ParamValue {
    /// `key` as an argument: how a user type that implements [`ParamKey`]
    /// is passed.
    #[inline]
    pub fn of<K: ParamKey + ?Sized>(key: &K) -> ParamValue {
        key.to_param()
    }

    /// A collection argument whose elements are checked one by one.
    pub fn list<I>(values: I) -> ParamValue
    where
        I: IntoIterator,
        I::Item: Into<ParamValue>,
    {
        ParamValue::List(Arc::new(values.into_iter().map(Into::into).collect()))
    }

    /// The string, if this is one.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            ParamValue::Str(s) => Some(s),
            ParamValue::InlineStr(s) => Some(s.as_str()),
            _ => None,
        }
    }

    /// The elements, if this is a collection.
    pub fn as_list(&self) -> Option<&[ParamValue]> {
        match self {
            ParamValue::List(list) => Some(list),
            _ => None,
        }
    }

    #[inline]
    fn canonical(&self) -> Canonical<'_> {
        match self {
            ParamValue::Bool(v) => Canonical::Bool(*v),
            ParamValue::Int(v) => Canonical::Int(i128::from(*v)),
            ParamValue::UInt(v) => Canonical::Int(i128::from(*v)),
            ParamValue::Float(v) if v.is_nan() => Canonical::Float(f64::NAN.to_bits()),
            ParamValue::Float(v) => Canonical::Float(v.to_bits()),
            ParamValue::Str(s) => Canonical::Bytes(s.as_bytes()),
            ParamValue::InlineStr(s) => Canonical::Bytes(s.as_bytes()),
            ParamValue::List(list) => Canonical::List(list),
        }
    }
}

impl PartialEq for ParamValue {
    #[inline]
    fn eq(&self, other: &Self) -> bool {
        self.canonical() == other.canonical()
    }
}

impl Eq for ParamValue {}

impl Hash for ParamValue {
    #[inline]
    fn hash<H: Hasher>(&self, state: &mut H) {
        match self.canonical() {
            Canonical::Bool(v) => {
                state.write_u8(0);
                state.write_u8(u8::from(v));
            }
            Canonical::Int(v) => hash_int(v, state),
            Canonical::Bytes(bytes) => hash_string(bytes, state),
            Canonical::List(list) => {
                state.write_u8(3);
                list.hash(state);
            }
            Canonical::Float(bits) => {
                state.write_u8(4);
                state.write_u64(bits);
            }
        }
    }
}

/// How a string value (`Str` or `InlineStr`) hashes: what [`ParamValue`]'s
/// `Hash` writes for one, which a caller that knows it holds a string
/// (the hot-parameter table's key) writes without the enum's dispatch.
#[inline(always)]
pub(crate) fn hash_string<H: Hasher>(bytes: &[u8], state: &mut H) {
    state.write_u8(2);
    state.write(bytes);
    state.write_u8(0xff);
}

/// How an integer value (`Int` or `UInt`) hashes, as [`hash_string`] for
/// a string.
#[inline(always)]
pub(crate) fn hash_int<H: Hasher>(value: i128, state: &mut H) {
    state.write_u8(1);
    state.write_i128(value);
}

impl fmt::Debug for ParamValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParamValue::Bool(v) => write!(f, "{v}"),
            ParamValue::Int(v) => write!(f, "{v}"),
            ParamValue::UInt(v) => write!(f, "{v}"),
            ParamValue::Float(v) => write!(f, "{v:?}"),
            ParamValue::Str(v) => write!(f, "{v:?}"),
            ParamValue::InlineStr(v) => write!(f, "{v:?}"),
            ParamValue::List(list) => f.debug_list().entries(list.iter()).finish(),
        }
    }
}

impl fmt::Display for ParamValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParamValue::Str(v) => f.write_str(v),
            ParamValue::InlineStr(v) => f.write_str(v.as_str()),
            ParamValue::List(list) => {
                f.write_str("[")?;
                for (i, value) in list.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    fmt::Display::fmt(value, f)?;
                }
                f.write_str("]")
            }
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

impl From<f64> for ParamValue {
    fn from(v: f64) -> Self {
        ParamValue::Float(v)
    }
}

impl From<f32> for ParamValue {
    /// Widened to `f64`, which keeps every `f32` apart as Java's
    /// `Float.equals` does (`-0.0` and NaN included).
    fn from(v: f32) -> Self {
        ParamValue::Float(f64::from(v))
    }
}

impl From<&str> for ParamValue {
    #[inline]
    fn from(v: &str) -> Self {
        match InlineStr::new(v) {
            Some(inline) => ParamValue::InlineStr(inline),
            None => ParamValue::Str(v.into()),
        }
    }
}

impl From<String> for ParamValue {
    #[inline]
    fn from(v: String) -> Self {
        match InlineStr::new(&v) {
            Some(inline) => ParamValue::InlineStr(inline),
            None => ParamValue::Str(v.into()),
        }
    }
}

impl From<&String> for ParamValue {
    #[inline]
    fn from(v: &String) -> Self {
        ParamValue::from(v.as_str())
    }
}

impl From<Arc<str>> for ParamValue {
    fn from(v: Arc<str>) -> Self {
        ParamValue::Str(v)
    }
}

impl From<Vec<ParamValue>> for ParamValue {
    fn from(v: Vec<ParamValue>) -> Self {
        ParamValue::List(Arc::new(v))
    }
}

/// A type that can be a hot-parameter argument: implement it for your own
/// key types and pass them with [`ParamValue::of`]. Two keys that should
/// share one limit must give equal values.
///
/// ```
/// use sentinel_flow_core::{ParamKey, ParamValue};
///
/// struct TenantId(u32);
///
/// impl ParamKey for TenantId {
///     fn to_param(&self) -> ParamValue {
///         ParamValue::from(self.0)
///     }
/// }
///
/// assert_eq!(ParamValue::of(&TenantId(3)), ParamValue::from(3));
/// // Slices, arrays and vectors of keys are collection arguments.
/// let tenants = [TenantId(1), TenantId(2)];
/// assert_eq!(ParamValue::of(&tenants[..]).as_list().unwrap().len(), 2);
/// ```
pub trait ParamKey {
    /// The key as an argument value.
    fn to_param(&self) -> ParamValue;
}

macro_rules! key_by_from {
    ($($t:ty),*) => {$(
        impl ParamKey for $t {
            #[inline]
            fn to_param(&self) -> ParamValue {
                ParamValue::from(self.clone())
            }
        }
    )*};
}
key_by_from!(
    bool,
    i8,
    i16,
    i32,
    i64,
    isize,
    u8,
    u16,
    u32,
    u64,
    usize,
    f32,
    f64,
    String,
    Arc<str>
);

impl ParamKey for str {
    #[inline]
    fn to_param(&self) -> ParamValue {
        ParamValue::from(self)
    }
}

impl ParamKey for ParamValue {
    #[inline]
    fn to_param(&self) -> ParamValue {
        self.clone()
    }
}

impl<T: ParamKey + ?Sized> ParamKey for &T {
    #[inline]
    fn to_param(&self) -> ParamValue {
        (**self).to_param()
    }
}

impl<T: ParamKey> ParamKey for [T] {
    fn to_param(&self) -> ParamValue {
        ParamValue::List(Arc::new(self.iter().map(T::to_param).collect()))
    }
}

impl<T: ParamKey, const N: usize> ParamKey for [T; N] {
    fn to_param(&self) -> ParamValue {
        self[..].to_param()
    }
}

impl<T: ParamKey> ParamKey for Vec<T> {
    fn to_param(&self) -> ParamValue {
        self[..].to_param()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::BuildHasher;

    #[test]
    fn integers_compare_across_types() {
        assert_eq!(ParamValue::from(7u8), ParamValue::from(7i64));
        assert_eq!(ParamValue::from(7u64), ParamValue::Int(7));
        assert_eq!(ParamValue::from(u64::MAX), ParamValue::UInt(u64::MAX));
        assert_eq!(ParamValue::UInt(7), ParamValue::Int(7));
        assert_ne!(ParamValue::UInt(u64::MAX), ParamValue::Int(-1));
        assert_eq!(ParamValue::from("a").to_string(), "a");
        assert_eq!(format!("{:?}", ParamValue::from("a")), "\"a\"");
    }

    #[test]
    fn short_strings_are_inline_and_equal_to_shared_ones() {
        let short = ParamValue::from("exactly-22-bytes-long!");
        assert!(matches!(short, ParamValue::InlineStr(_)));
        let long = ParamValue::from("twenty-three bytes long");
        assert!(matches!(long, ParamValue::Str(_)));
        assert!(matches!(
            ParamValue::from(String::from("s")),
            ParamValue::InlineStr(_)
        ));
        assert!(matches!(
            ParamValue::from(&String::from("s")),
            ParamValue::InlineStr(_)
        ));

        let shared = ParamValue::Str("exactly-22-bytes-long!".into());
        assert_eq!(short, shared);
        let hasher = foldhash::quality::RandomState::default();
        assert_eq!(hasher.hash_one(&short), hasher.hash_one(&shared));
        assert_eq!(
            hasher.hash_one(ParamValue::UInt(5)),
            hasher.hash_one(ParamValue::Int(5))
        );
        assert_ne!(ParamValue::from("1"), ParamValue::from(1));
        assert_eq!(short.to_string(), "exactly-22-bytes-long!");
        assert_eq!(std::mem::size_of::<ParamValue>(), 24);
    }

    #[test]
    fn ascii_bytes_are_held_inline_and_anything_else_refused() {
        let mut bytes = [b'x'; InlineStr::CAPACITY];
        bytes[..3].copy_from_slice(b"1.2");
        let text = InlineStr::from_ascii(bytes, 3).unwrap();
        assert_eq!(text.as_str(), "1.2");
        // Equal to (and hashed as) the same text made from a `&str`: the
        // bytes past the length do not count.
        let hasher = foldhash::quality::RandomState::default();
        assert_eq!(ParamValue::InlineStr(text), ParamValue::from("1.2"));
        assert_eq!(
            hasher.hash_one(ParamValue::InlineStr(text)),
            hasher.hash_one(ParamValue::from("1.2"))
        );
        let full = InlineStr::from_ascii(bytes, InlineStr::CAPACITY).unwrap();
        assert_eq!(full.as_bytes().len(), InlineStr::CAPACITY);
        assert!(InlineStr::from_ascii(bytes, InlineStr::CAPACITY + 1).is_none());
        let mut not_ascii = bytes;
        not_ascii[1] = 0xc3;
        assert!(InlineStr::from_ascii(not_ascii, 3).is_none());
        // A non-ASCII byte past the length is never read.
        assert!(InlineStr::from_ascii(not_ascii, 1).is_some());
    }

    #[test]
    fn floats_compare_as_java_double_equals() {
        let hasher = foldhash::quality::RandomState::default();
        let same =
            |a: ParamValue, b: ParamValue| a == b && hasher.hash_one(&a) == hasher.hash_one(&b);
        assert!(same(ParamValue::from(2.5), ParamValue::from(2.5f32)));
        assert!(!same(ParamValue::from(0.0), ParamValue::from(-0.0)));
        assert!(same(
            ParamValue::from(f64::NAN),
            ParamValue::from(-f64::NAN)
        ));
        assert!(same(
            ParamValue::from(f64::from_bits(0x7ff8_0000_0000_0001)),
            ParamValue::from(f32::NAN)
        ));
        assert_ne!(ParamValue::from(1.0), ParamValue::from(1));
        assert_ne!(ParamValue::from(1.0), ParamValue::from("1.0"));
        assert_eq!(ParamValue::of(&0.1f64).to_string(), "0.1");
        assert_eq!(format!("{:?}", ParamValue::from(3.0)), "3.0");
    }

    #[test]
    fn keys_and_lists() {
        struct Tenant(&'static str);
        impl ParamKey for Tenant {
            fn to_param(&self) -> ParamValue {
                ParamValue::from(self.0)
            }
        }
        assert_eq!(ParamValue::of(&Tenant("t")), ParamValue::from("t"));
        assert_eq!(ParamValue::of("x"), ParamValue::from("x"));
        let list = ParamValue::of(&vec![1u8, 2]);
        assert_eq!(list, ParamValue::list([1, 2]));
        assert_eq!(list.to_string(), "[1, 2]");
        assert_eq!(format!("{list:?}"), "[1, 2]");
        assert_eq!(
            ParamValue::of(&[Tenant("a")]).as_list().unwrap()[0].as_str(),
            Some("a")
        );
    }
}
