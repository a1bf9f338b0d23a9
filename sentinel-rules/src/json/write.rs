//! A described value as Sentinel's JSON object: every field Sentinel's
//! Java class has, an optional one only when set (fastjson leaves out
//! nulls), enums as Sentinel's numbers.

use std::fmt::Debug;

use sentinel_flow_core::ParamValue;
use sentinel_flow_core::describe::{Choice, Describe, Fields, Format, Name, Whole};
use serde_json::{Map, Value, json};

use super::value;

/// `value` as a JSON object; `None` for a value Sentinel's class cannot
/// hold (an item whose value is a list).
pub(super) fn object<T: Describe>(value: &T) -> Option<Value> {
    let mut writer = Writer::default();
    value.clone().describe(&mut writer);
    (!writer.dropped).then_some(Value::Object(writer.map))
}

#[derive(Default)]
struct Writer {
    map: Map<String, Value>,
    dropped: bool,
}

impl Writer {
    fn put(&mut self, name: Name, value: Value) {
        if !name.json.is_empty() {
            self.map.insert(name.json.to_owned(), value);
        }
    }
}

impl Fields for Writer {
    fn format(&self) -> Format {
        Format::Json
    }

    fn string(&mut self, name: Name, v: &mut String, _: &str) {
        self.put(name, json!(v));
    }

    fn optional_string(&mut self, name: Name, v: &mut Option<String>) {
        if let Some(s) = v {
            self.put(name, json!(s));
        }
    }

    fn names(&mut self, name: Name, v: &mut Vec<String>, _: &'static str) {
        self.put(name, json!(v.join(",")));
    }

    fn number(&mut self, name: Name, v: &mut f64, _: f64) {
        let n = *v;
        if name.is_json_whole() && n.fract() == 0.0 && n.abs() < 9.0e15 {
            self.put(name, json!(n as i64));
        } else {
            self.put(name, json!(n));
        }
    }

    fn optional_number(&mut self, name: Name, v: &mut Option<f64>) {
        match (v, name.is_unset_negative()) {
            (Some(n), _) => self.put(name, json!(n)),
            (None, true) => self.put(name, json!(-1.0)),
            (None, false) => {}
        }
    }

    fn whole<T: Whole>(&mut self, name: Name, v: &mut T, _: T) {
        self.put(name, json!(v.to_u64()));
    }

    fn optional_whole<T: Whole>(&mut self, name: Name, v: &mut Option<T>) {
        match (v, name.is_unset_negative()) {
            (Some(n), true) => self.put(name, json!(n.to_u64() as i64)),
            (Some(n), false) => self.put(name, json!(n.to_u64())),
            (None, true) => self.put(name, json!(-1)),
            (None, false) => {}
        }
    }

    fn signed(&mut self, name: Name, v: &mut i32, _: i32) {
        self.put(name, json!(v));
    }

    fn boolean(&mut self, name: Name, v: &mut bool, _: bool) {
        self.put(name, json!(v));
    }

    fn choice<T: Copy + PartialEq + Debug + Send + Sync + 'static>(
        &mut self,
        name: Name,
        v: &mut T,
        _: T,
        table: &'static [Choice<T>],
    ) {
        let number = table.iter().find(|c| c.value == *v).map_or(0, |c| c.number);
        self.put(name, json!(number));
    }

    fn value(
        &mut self,
        name: Name,
        class: Name,
        v: &mut ParamValue,
        class_type: &mut Option<&'static str>,
    ) {
        match value::write(v, *class_type) {
            Some((object, class_type)) => {
                self.put(name, json!(object));
                self.put(class, json!(class_type));
            }
            None => self.dropped = true,
        }
    }

    fn nested<T: Describe>(&mut self, name: Name, v: &mut T) {
        // Always written, as a Java machine echoes the object the
        // dashboard always sends.
        if let Some(object) = object(v) {
            self.put(name, object);
        }
    }

    fn optional_nested<T: Describe>(&mut self, name: Name, v: &mut Option<T>) {
        if let Some(inner) = v {
            self.nested(name, inner);
        }
    }

    fn list<T: Describe>(&mut self, name: Name, v: &mut Vec<T>) {
        let items: Vec<Value> = v.iter().filter_map(object).collect();
        self.put(name, Value::Array(items));
    }

    fn fixed(&mut self, name: Name, value: &'static str, _: &'static str) {
        self.put(name, json!(value));
    }

    fn refused(&mut self, _: Name, _: &'static str) {}
}

/// The JSON name of the field a core problem names (`time_window_sec`,
/// `cluster_config.flow_id`), from `T`'s description.
pub(super) fn json_path<T: Describe>(path: &str) -> Option<String> {
    let (head, rest) = match path.split_once('.') {
        Some((head, rest)) => (head, Some(rest)),
        None => (path, None),
    };
    let mut find = Find {
        head,
        rest,
        found: None,
    };
    T::default().describe(&mut find);
    find.found
}

/// Finds the field named `head` in a rule file, and in it `rest`.
struct Find<'a> {
    head: &'a str,
    rest: Option<&'a str>,
    found: Option<String>,
}

impl Find<'_> {
    fn leaf(&mut self, name: Name) {
        if self.found.is_none()
            && self.rest.is_none()
            && name.yaml == self.head
            && !name.json.is_empty()
        {
            self.found = Some(name.json.to_owned());
        }
    }
}

impl Fields for Find<'_> {
    fn format(&self) -> Format {
        Format::Json
    }
    fn string(&mut self, name: Name, _: &mut String, _: &str) {
        self.leaf(name)
    }
    fn optional_string(&mut self, name: Name, _: &mut Option<String>) {
        self.leaf(name)
    }
    fn names(&mut self, name: Name, _: &mut Vec<String>, _: &'static str) {
        self.leaf(name)
    }
    fn number(&mut self, name: Name, _: &mut f64, _: f64) {
        self.leaf(name)
    }
    fn optional_number(&mut self, name: Name, _: &mut Option<f64>) {
        self.leaf(name)
    }
    fn whole<T: Whole>(&mut self, name: Name, _: &mut T, _: T) {
        self.leaf(name)
    }
    fn optional_whole<T: Whole>(&mut self, name: Name, _: &mut Option<T>) {
        self.leaf(name)
    }
    fn signed(&mut self, name: Name, _: &mut i32, _: i32) {
        self.leaf(name)
    }
    fn boolean(&mut self, name: Name, _: &mut bool, _: bool) {
        self.leaf(name)
    }
    fn choice<T: Copy + PartialEq + Debug + Send + Sync + 'static>(
        &mut self,
        name: Name,
        _: &mut T,
        _: T,
        _: &'static [Choice<T>],
    ) {
        self.leaf(name)
    }
    fn value(&mut self, name: Name, class: Name, _: &mut ParamValue, _: &mut Option<&'static str>) {
        self.leaf(name);
        self.leaf(class);
    }
    fn nested<T: Describe>(&mut self, name: Name, _: &mut T) {
        match self.rest {
            Some(rest) if self.found.is_none() && name.yaml == self.head => {
                let inner = json_path::<T>(rest);
                self.found = inner.map(|inner| format!("{}.{inner}", name.json));
            }
            _ => self.leaf(name),
        }
    }
    fn list<T: Describe>(&mut self, name: Name, _: &mut Vec<T>) {
        self.leaf(name)
    }
    fn fixed(&mut self, _: Name, _: &'static str, _: &'static str) {}
    fn refused(&mut self, _: Name, _: &'static str) {}
}
