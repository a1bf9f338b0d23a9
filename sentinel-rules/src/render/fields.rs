//! A described value's fields as `(name, YAML value)` pairs: a rule's
//! fields in the order its description gives them (those it writes first
//! first, an identifier last); a field at its default is left out where
//! the parser gives that default back.

use std::fmt::Debug;

use sentinel_flow_core::ParamValue;
use sentinel_flow_core::describe::{Choice, Describe, Fields, Format, Name, Whole};

use super::scalar::{float, string};

/// `Err` names a value the file format has no word for.
pub(crate) type Rendered = Result<Vec<(&'static str, String)>, String>;

/// The fields of `value`, to be written one per line (a rule) or in a
/// flow mapping (a nested value, a list item).
pub(crate) fn fields<T: Describe>(value: &T) -> Rendered {
    let mut writer = Writer::default();
    value.clone().describe(&mut writer);
    if let Some(problem) = writer.problem {
        return Err(problem);
    }
    let Writer {
        fields, trailing, ..
    } = writer;
    let mut out = Vec::with_capacity(fields.len() + trailing.len());
    for rank in 0..3 {
        let ranked = fields.iter().filter(|(r, _, _)| *r == rank);
        out.extend(ranked.map(|(_, name, text)| (*name, text.clone())));
        // A value's type name follows the fields written in order.
        if rank == 1 {
            out.extend(trailing.iter().cloned());
        }
    }
    Ok(out)
}

/// `fields` as a flow mapping (`{flow_id: 7, sample_count: 5}`), `None`
/// when there is none.
fn flow_mapping(fields: &[(&str, String)]) -> Option<String> {
    let fields: Vec<String> = fields.iter().map(|(k, v)| format!("{k}: {v}")).collect();
    (!fields.is_empty()).then(|| format!("{{{}}}", fields.join(", ")))
}

#[derive(Default)]
struct Writer {
    /// Each field written: its rank (first, in order, last), name, text.
    fields: Vec<(u8, &'static str, String)>,
    /// Written after the other fields (a value's type name).
    trailing: Vec<(&'static str, String)>,
    /// The first value the format has no form for.
    problem: Option<String>,
}

impl Writer {
    fn push(&mut self, name: Name, text: String) {
        if !name.yaml.is_empty() {
            self.fields.push((name.rank(), name.yaml, text));
        }
    }

    /// Pushes the field when it is required or `value` is not `default`.
    fn unless<T: PartialEq>(
        &mut self,
        name: Name,
        value: T,
        default: T,
        show: impl Fn(T) -> String,
    ) {
        if name.is_required() || value != default {
            self.push(name, show(value));
        }
    }

    fn fail(&mut self, problem: String) {
        self.problem.get_or_insert(problem);
    }
}

impl Fields for Writer {
    fn format(&self) -> Format {
        Format::Yaml
    }

    fn string(&mut self, name: Name, v: &mut String, default: &str) {
        self.unless(name, v.as_str(), default, |s| string(s).into_owned());
    }

    fn optional_string(&mut self, name: Name, v: &mut Option<String>) {
        if let Some(s) = v {
            self.push(name, string(s).into_owned());
        }
    }

    fn names(&mut self, name: Name, v: &mut Vec<String>, _: &'static str) {
        if name.is_required() || !v.is_empty() {
            let names: Vec<_> = v.iter().map(|s| string(s)).collect();
            self.push(name, format!("[{}]", names.join(", ")));
        }
    }

    fn number(&mut self, name: Name, v: &mut f64, default: f64) {
        // Compared by bits: a NaN never equals the default and is written out.
        let (bits, default) = (v.to_bits(), default.to_bits());
        self.unless(name, bits, default, |b| float(f64::from_bits(b)));
    }

    fn optional_number(&mut self, name: Name, v: &mut Option<f64>) {
        if let Some(v) = v {
            self.push(name, float(*v));
        }
    }

    fn whole<T: Whole>(&mut self, name: Name, v: &mut T, default: T) {
        self.unless(name, *v, default, |n| n.to_string());
    }

    fn optional_whole<T: Whole>(&mut self, name: Name, v: &mut Option<T>) {
        if let Some(v) = v {
            self.push(name, v.to_string());
        }
    }

    fn signed(&mut self, name: Name, v: &mut i32, default: i32) {
        self.unless(name, *v, default, |n| n.to_string());
    }

    fn boolean(&mut self, name: Name, v: &mut bool, default: bool) {
        self.unless(name, *v, default, |b| b.to_string());
    }

    fn choice<T: Copy + PartialEq + Debug + Send + Sync + 'static>(
        &mut self,
        name: Name,
        v: &mut T,
        default: T,
        table: &'static [Choice<T>],
    ) {
        if !name.is_required() && *v == default {
            return;
        }
        match table.iter().find(|c| c.value == *v && !c.word.is_empty()) {
            Some(choice) => self.push(name, choice.word.to_owned()),
            None => self.fail(format!("{} {v:?} has no word in the rule file", name.yaml)),
        }
    }

    fn value(
        &mut self,
        name: Name,
        class: Name,
        v: &mut ParamValue,
        class_type: &mut Option<&'static str>,
    ) {
        match value(v) {
            Ok(text) => self.push(name, text),
            Err(other) => self.fail(format!(
                "{} {other:?} has no form in the rule file",
                name.yaml
            )),
        }
        if let (Some(class_type), false) = (class_type, class.yaml.is_empty()) {
            self.trailing
                .push((class.yaml, string(class_type).into_owned()));
        }
    }

    fn nested<T: Describe>(&mut self, name: Name, v: &mut T) {
        match fields(v) {
            Ok(fields) => {
                if let Some(mapping) = flow_mapping(&fields) {
                    self.push(name, mapping);
                }
            }
            Err(problem) => self.fail(problem),
        }
    }

    fn optional_nested<T: Describe>(&mut self, name: Name, v: &mut Option<T>) {
        if let Some(inner) = v {
            self.nested(name, inner);
        }
    }

    fn list<T: Describe>(&mut self, name: Name, v: &mut Vec<T>) {
        if v.is_empty() {
            return;
        }
        let mut items = String::new();
        for item in v.iter() {
            match fields(item) {
                Ok(fields) => {
                    let mapping = flow_mapping(&fields).unwrap_or_else(|| "{}".into());
                    items.push_str(&format!("\n      - {mapping}"));
                }
                Err(problem) => {
                    return self.fail(format!("{} {problem}", name.yaml));
                }
            }
        }
        self.push(name, items);
    }

    fn fixed(&mut self, _: Name, _: &'static str, _: &'static str) {}

    fn refused(&mut self, _: Name, _: &'static str) {}
}

/// An argument value as the parser tells them apart: `42` a number,
/// `"42"` a string, `true` a boolean. A list (which no rule accepts) is
/// written as one, so that the load refuses it with its position and the
/// rule's other problems. `Err` gives back a value with no form.
fn value(value: &ParamValue) -> Result<String, &ParamValue> {
    if let Some(s) = value.as_str() {
        return Ok(string(s).into_owned());
    }
    match value {
        ParamValue::Bool(b) => Ok(b.to_string()),
        ParamValue::Int(i) => Ok(i.to_string()),
        ParamValue::UInt(u) => Ok(u.to_string()),
        // Always with a fraction or an exponent, so that it reads back as
        // a float and not as a whole number.
        ParamValue::Float(v) if v.is_nan() => Ok(".nan".into()),
        ParamValue::Float(v) if v.is_infinite() => Ok(float(*v)),
        ParamValue::Float(v) => Ok(format!("{v:?}")),
        ParamValue::List(list) => {
            let items: Result<Vec<String>, &ParamValue> = list.iter().map(self::value).collect();
            Ok(format!("[{}]", items?.join(", ")))
        }
        other => Err(other),
    }
}
