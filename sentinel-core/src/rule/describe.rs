//! A rule described field by field, for the codecs of the crates around
//! the core: each kind's folder says once, for each field of its rule,
//! its name in a rule file (YAML, snake_case) and in Sentinel's JSON
//! (Java's camelCase), its default, and for an enum the word and the
//! number of each variant. A codec is a [`Fields`] visitor: a reader fills
//! each field from a document (an absent field takes the default given),
//! a writer reads each field and writes it.
//!
//! The descriptions name no format library and this module names no kind:
//! a rule file's spanned tree and `serde_json` live in `sentinel-flow-rules`,
//! whose generic readers and writers run over every kind the core lists.
//!
//! ```
//! use sentinel_flow_core::describe::{Choice, Describe, Fields, Name};
//!
//! #[derive(Clone, Copy, Debug, Default, PartialEq)]
//! enum Mode { #[default] Soft, Hard }
//!
//! #[derive(Clone, Debug, Default, PartialEq)]
//! struct Limit { resource: String, count: f64, mode: Mode }
//!
//! const MODES: &[Choice<Mode>] = &[
//!     Choice::new(Mode::Soft, "soft", 0, "soft"),
//!     Choice::new(Mode::Hard, "hard", 1, "hard"),
//! ];
//!
//! impl Describe for Limit {
//!     fn describe<F: Fields>(&mut self, f: &mut F) {
//!         f.string(Name::new("resource", "resource").required().names_rule(), &mut self.resource, "");
//!         f.number(Name::new("count", "count").required(), &mut self.count, 0.0);
//!         f.choice(Name::new("mode", "mode"), &mut self.mode, Mode::Soft, MODES);
//!     }
//! }
//! ```

use std::fmt;

use crate::ParamValue;
use crate::rule::RuleError;

/// The document format a visitor reads or writes, for the few fields the
/// two formats hold differently (a default Java's class has, a list
/// written as one string).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Format {
    /// A rule file.
    Yaml,
    /// Sentinel's JSON (the command API, a configuration store's keys).
    Json,
}

const REQUIRED: u8 = 1;
const JSON_REQUIRED: u8 = 1 << 1;
const NAMES_RULE: u8 = 1 << 2;
const UNSET_NEGATIVE: u8 = 1 << 3;
const JSON_WHOLE: u8 = 1 << 4;
const FIRST: u8 = 1 << 5;
const LAST: u8 = 1 << 6;

/// A field's names and what the codecs must know of it beyond its type.
/// An empty name leaves the field out of that format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Name {
    /// Its key in a rule file (`warm_up_period_sec`).
    pub yaml: &'static str,
    /// Its key in Sentinel's JSON (`warmUpPeriodSec`).
    pub json: &'static str,
    flags: u8,
    hint: &'static str,
}

impl Name {
    /// A field named `yaml` in a rule file and `json` in Sentinel's JSON.
    pub const fn new(yaml: &'static str, json: &'static str) -> Self {
        Name {
            yaml,
            json,
            flags: 0,
            hint: "",
        }
    }

    /// A field of Sentinel's JSON only (a rule file has no such key).
    pub const fn json(json: &'static str) -> Self {
        Name::new("", json)
    }

    /// A rule file must give the field; it is always written.
    pub const fn required(self) -> Self {
        self.with(REQUIRED)
    }

    /// Sentinel's JSON must give the field too; `hint` (may be empty) is
    /// added to the problem in parentheses.
    pub const fn required_in_json(self, hint: &'static str) -> Self {
        Name {
            hint,
            ..self.with(JSON_REQUIRED)
        }
    }

    /// The field names the rule in problems (its resource).
    pub const fn names_rule(self) -> Self {
        self.with(NAMES_RULE)
    }

    /// An optional threshold Sentinel's JSON writes as -1 when unset, and
    /// reads unset when negative.
    pub const fn unset_negative(self) -> Self {
        self.with(UNSET_NEGATIVE)
    }

    /// Java holds the number in an `Integer`: Sentinel's JSON writes a
    /// whole value without a fraction.
    pub const fn json_whole(self) -> Self {
        self.with(JSON_WHOLE)
    }

    /// A rule file writes the field before the others (a rule's
    /// resource and threshold read first).
    pub const fn first(self) -> Self {
        self.with(FIRST)
    }

    /// A rule file writes the field after the others (an identifier).
    pub const fn last(self) -> Self {
        self.with(LAST)
    }

    const fn with(self, flag: u8) -> Self {
        Name {
            flags: self.flags | flag,
            ..self
        }
    }

    /// Whether a rule file must give the field.
    pub fn is_required(&self) -> bool {
        self.flags & REQUIRED != 0
    }

    /// Whether Sentinel's JSON must give the field, and the hint to add.
    pub fn json_required(&self) -> Option<&'static str> {
        (self.flags & JSON_REQUIRED != 0).then_some(self.hint)
    }

    /// Whether the field names the rule in problems.
    pub fn is_rule_name(&self) -> bool {
        self.flags & NAMES_RULE != 0
    }

    /// Whether Sentinel's JSON writes the unset field as -1.
    pub fn is_unset_negative(&self) -> bool {
        self.flags & UNSET_NEGATIVE != 0
    }

    /// Whether Sentinel's JSON holds the number as a whole one.
    pub fn is_json_whole(&self) -> bool {
        self.flags & JSON_WHOLE != 0
    }

    /// Where a rule file writes the field: 0 first, 1 in order, 2 last.
    pub fn rank(&self) -> u8 {
        match (self.flags & FIRST != 0, self.flags & LAST != 0) {
            (true, _) => 0,
            (false, false) => 1,
            (false, true) => 2,
        }
    }

    /// The field's name in `format`.
    pub fn of(&self, format: Format) -> &'static str {
        match format {
            Format::Yaml => self.yaml,
            Format::Json => self.json,
        }
    }
}

/// One variant of an enum field: its word in a rule file, its number in
/// Sentinel's JSON, and what the number means (for problems).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Choice<T> {
    /// The variant.
    pub value: T,
    /// Its word in a rule file; empty: a rule file cannot give it.
    pub word: &'static str,
    /// Its number in Sentinel's JSON.
    pub number: i64,
    /// What the number means, as a problem names it (`thread count`).
    pub label: &'static str,
}

impl<T> Choice<T> {
    /// `value`, written `word` in a rule file and `number` (meaning
    /// `label`) in Sentinel's JSON.
    pub const fn new(value: T, word: &'static str, number: i64, label: &'static str) -> Self {
        Choice {
            value,
            word,
            number,
            label,
        }
    }
}

/// An unsigned whole-number field's type.
pub trait Whole: Copy + PartialEq + fmt::Debug + fmt::Display + Send + Sync + 'static {
    /// The largest value.
    const MAX: u64;
    /// The value, widened.
    fn to_u64(self) -> u64;
    /// `value` if it fits.
    fn from_u64(value: u64) -> Option<Self>;
}

macro_rules! whole {
    ($($t:ty)*) => {$(
        impl Whole for $t {
            const MAX: u64 = <$t>::MAX as u64;
            fn to_u64(self) -> u64 {
                self as u64
            }
            fn from_u64(value: u64) -> Option<Self> {
                <$t>::try_from(value).ok()
            }
        }
    )*};
}
whole!(u32 u64 usize);

/// A visitor of a described value's fields: a reader sets each field, a
/// writer reads it. A field's default is what an absent field reads as
/// and what a rule file leaves out.
pub trait Fields {
    /// The format read or written.
    fn format(&self) -> Format;
    /// A string.
    fn string(&mut self, name: Name, v: &mut String, default: &str);
    /// A string that may be absent.
    fn optional_string(&mut self, name: Name, v: &mut Option<String>);
    /// A list of names (`what`: what one is, `origin`): a list in a rule
    /// file, one comma-separated string in Sentinel's JSON.
    fn names(&mut self, name: Name, v: &mut Vec<String>, what: &'static str);
    /// A number.
    fn number(&mut self, name: Name, v: &mut f64, default: f64);
    /// A number that may be absent.
    fn optional_number(&mut self, name: Name, v: &mut Option<f64>);
    /// An unsigned whole number.
    fn whole<T: Whole>(&mut self, name: Name, v: &mut T, default: T);
    /// An unsigned whole number that may be absent.
    fn optional_whole<T: Whole>(&mut self, name: Name, v: &mut Option<T>);
    /// A signed whole number of 32 bits.
    fn signed(&mut self, name: Name, v: &mut i32, default: i32);
    /// A boolean.
    fn boolean(&mut self, name: Name, v: &mut bool, default: bool);
    /// An enum, one of `table`.
    fn choice<T: Copy + PartialEq + fmt::Debug + Send + Sync + 'static>(
        &mut self,
        name: Name,
        v: &mut T,
        default: T,
        table: &'static [Choice<T>],
    );
    /// An argument value and the Java type it is given as (`class`): a
    /// rule file tells the value's type by how it is written (`7`, `"7"`,
    /// `7.0`), Sentinel's JSON by the type name beside it. The type name
    /// is written after the value's other fields.
    fn value(
        &mut self,
        name: Name,
        class: Name,
        v: &mut ParamValue,
        class_type: &mut Option<&'static str>,
    );
    /// A described value held in the field (a mapping, a JSON object).
    fn nested<T: Describe>(&mut self, name: Name, v: &mut T);
    /// A described value the field may leave out (Sentinel's JSON: an
    /// object or no key). A reader leaves `v` `None` when the field is
    /// absent and reads it like [`nested`](Self::nested) when present; a
    /// writer writes nothing for `None`. The default visits the value (or
    /// a default one) as `nested`, which is what a visitor that only
    /// names the fields needs.
    fn optional_nested<T: Describe>(&mut self, name: Name, v: &mut Option<T>) {
        let mut inner = v.clone().unwrap_or_default();
        self.nested(name, &mut inner);
    }
    /// A list of described values.
    fn list<T: Describe>(&mut self, name: Name, v: &mut Vec<T>);
    /// A field of Sentinel's class the rule does not have: written as
    /// `value`; read, any other value than `value` (or none) is refused as
    /// `why`.
    fn fixed(&mut self, name: Name, value: &'static str, why: &'static str);
    /// A flag of Sentinel's class the rule does not have: accepted off,
    /// refused on as `why`; not written.
    fn refused(&mut self, name: Name, why: &'static str);
}

/// A value described field by field: a rule, or a part of one.
pub trait Describe: Clone + Default + PartialEq + fmt::Debug + Send + Sync + 'static {
    /// Each field, in the order a rule file writes them.
    fn describe<F: Fields>(&mut self, f: &mut F);
}

/// The commands Sentinel gives a kind of its own, when `getRules` and
/// `setRules` do not serve it by type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Commands {
    /// The command that answers the kind's rules (`getParamFlowRules`).
    pub get: &'static str,
    /// What Sentinel's `api` command says of `get`.
    pub get_help: &'static str,
    /// The command that replaces them.
    pub set: &'static str,
    /// What Sentinel's `api` command says of `set`.
    pub set_help: &'static str,
}

/// A kind's rule, described: what its codecs need of the kind beyond its
/// fields.
pub trait DescribeRule: Describe {
    /// The kind's name: its key in a rule file, in problems and in
    /// `getRules?type=`.
    const KIND: &'static str;
    /// Sentinel's name of the kind in its JSON problems (`paramFlow`).
    const SENTINEL_KIND: &'static str = Self::KIND;
    /// The kind's place in a rule file and in the lists of kinds the docs
    /// and messages give (lowest first).
    const FILE_ORDER: u32;
    /// Sentinel's commands of the kind's own; `None`: `getRules` and
    /// `setRules` serve it by type.
    const COMMANDS: Option<Commands> = None;

    /// Every problem of the rule at `index` in its list, names longer
    /// than `max_name_len` bytes included.
    fn problems(&self, index: usize, max_name_len: usize) -> Vec<RuleError>;

    /// Problems between the rules of one list (a rule file reports them
    /// at the field each names).
    fn across(rules: &[Self]) -> Vec<RuleError> {
        let _ = rules;
        Vec::new()
    }
}

/// The names of a described value's fields in `format`, in order (a
/// value's own; a nested value's are its own list).
pub fn field_names<T: Describe>(format: Format) -> Vec<&'static str> {
    field_names_of(&T::default(), format)
}

/// The names of `value`'s fields in `format`, in order: those of a value
/// whose fields depend on what it holds (an adaptive rule's algorithm)
/// are the ones it has.
pub fn field_names_of<T: Describe>(value: &T, format: Format) -> Vec<&'static str> {
    struct Collect(Format, Vec<&'static str>, Vec<&'static str>);
    impl Collect {
        fn push(&mut self, name: Name) {
            let n = name.of(self.0);
            if !n.is_empty() {
                self.1.push(n);
            }
        }
    }
    impl Fields for Collect {
        fn format(&self) -> Format {
            self.0
        }
        fn string(&mut self, name: Name, _: &mut String, _: &str) {
            self.push(name)
        }
        fn optional_string(&mut self, name: Name, _: &mut Option<String>) {
            self.push(name)
        }
        fn names(&mut self, name: Name, _: &mut Vec<String>, _: &'static str) {
            self.push(name)
        }
        fn number(&mut self, name: Name, _: &mut f64, _: f64) {
            self.push(name)
        }
        fn optional_number(&mut self, name: Name, _: &mut Option<f64>) {
            self.push(name)
        }
        fn whole<T: Whole>(&mut self, name: Name, _: &mut T, _: T) {
            self.push(name)
        }
        fn optional_whole<T: Whole>(&mut self, name: Name, _: &mut Option<T>) {
            self.push(name)
        }
        fn signed(&mut self, name: Name, _: &mut i32, _: i32) {
            self.push(name)
        }
        fn boolean(&mut self, name: Name, _: &mut bool, _: bool) {
            self.push(name)
        }
        fn choice<T: Copy + PartialEq + fmt::Debug + Send + Sync + 'static>(
            &mut self,
            name: Name,
            _: &mut T,
            _: T,
            _: &'static [Choice<T>],
        ) {
            self.push(name)
        }
        fn value(
            &mut self,
            name: Name,
            class: Name,
            _: &mut ParamValue,
            _: &mut Option<&'static str>,
        ) {
            self.push(name);
            let n = class.of(self.0);
            if !n.is_empty() {
                self.2.push(n);
            }
        }
        fn nested<T: Describe>(&mut self, name: Name, _: &mut T) {
            self.push(name)
        }
        fn list<T: Describe>(&mut self, name: Name, _: &mut Vec<T>) {
            self.push(name)
        }
        fn fixed(&mut self, name: Name, _: &'static str, _: &'static str) {
            self.push(name)
        }
        fn refused(&mut self, name: Name, _: &'static str) {
            self.push(name)
        }
    }
    let mut collect = Collect(format, Vec::new(), Vec::new());
    value.clone().describe(&mut collect);
    // A value's type name comes after the other fields, as it is written.
    collect.1.extend(collect.2);
    collect.1
}
