//! `RuleFields`: one rule's mapping (or a mapping inside one), read field
//! by field as the rule's description asks, with a problem per missing,
//! mistyped or unknown field, each at its value's position.

use sentinel_flow_core::describe::{Choice, Describe, Fields, Format, Name, Whole, field_names_of};
use sentinel_flow_core::{ParamValue, RuleError};

use super::Map;
use super::scalar::{Scalar, is_null, resolve};
use super::tree::{Node, Value};
use super::value;
use crate::error::{Position, Problem, RuleRef};

/// Up to this many fields, a field is found by a scan (faster than
/// hashing for a rule's usual handful); past it, through a map.
const SCAN_LIMIT: usize = 16;

/// What the mapping read is, which names its fields in problems.
#[derive(Clone, Copy)]
enum Scope {
    /// A rule of a kind: fields by their names.
    Rule(&'static str),
    /// A mapping in a rule's field: `cluster_config.flow_id`.
    Nested(&'static str),
    /// Item `.1` of a rule's list field: `param_flow_item_list[2].count`.
    Item(&'static str, usize),
}

pub(crate) struct RuleFields<'n> {
    scope: Scope,
    pos: Position,
    entries: Vec<(&'n str, Position, &'n Node<'n>, bool)>,
    /// Each field's place in `entries`, once there are more than
    /// [`SCAN_LIMIT`]: a rule may be written with any number of (unknown)
    /// fields, and each is looked up once.
    by_name: Map<&'n str, usize>,
    /// The [`signature`]s of the fields' names, or-ed: most fields a kind
    /// knows are absent from a rule, and are found absent by one test.
    signatures: u64,
    /// Fields already reported, so the core does not report them again;
    /// each once (a list field may have a problem per item).
    bad: Vec<&'static str>,
    /// The parts of fields already reported (`cluster_config.flow_id`).
    bad_parts: Vec<String>,
    problems: Vec<Problem>,
    /// The resource as written, to name the rule in its problems.
    resource: Option<&'n str>,
    /// Where the first field read was written (an item's value).
    first: Option<Position>,
    /// For each list field read, where each item's first field and each
    /// item's mapping are, to place the core's problems about an item.
    items: Vec<(&'static str, Vec<(Position, &'n Node<'n>)>)>,
}

impl<'n> RuleFields<'n> {
    /// The fields of `node`, a rule of `kind`, or `None` (reported) when it
    /// is not a mapping.
    pub(crate) fn rule(
        kind: &'static str,
        index: usize,
        node: &'n Node<'n>,
        problems: &mut Vec<Problem>,
    ) -> Option<Self> {
        let Value::Map(map) = &node.value else {
            if !matches!(node.value, Value::Invalid) {
                problems.push(Problem {
                    rule: Some(RuleRef {
                        kind,
                        index,
                        resource: None,
                    }),
                    ..Problem::new(
                        Some(node.pos),
                        format!("a rule must be a mapping, got {}", node.value.describe()),
                    )
                });
            }
            return None;
        };
        Some(Self::of(Scope::Rule(kind), node.pos, map))
    }

    fn of(scope: Scope, pos: Position, map: &'n [(Node<'n>, Node<'n>)]) -> Self {
        let mut fields = RuleFields {
            scope,
            pos,
            entries: Vec::with_capacity(map.len()),
            by_name: Map::default(),
            signatures: 0,
            bad: Vec::new(),
            bad_parts: Vec::new(),
            problems: Vec::new(),
            resource: None,
            first: None,
            items: Vec::new(),
        };
        for (key, value) in map {
            let Some(name) = key_name(key, &mut fields.problems) else {
                continue;
            };
            if let Some(at) = fields.find(name) {
                let first = fields.entries[at].1;
                let problem = match scope {
                    Scope::Rule(_) => Problem::new(
                        Some(key.pos),
                        format!(
                            "duplicate field {name} (first at {}:{})",
                            first.line, first.column
                        ),
                    ),
                    _ => Problem {
                        field: Some(fields.part(name)),
                        ..Problem::new(Some(key.pos), "is written twice")
                    },
                };
                fields.problems.push(problem);
                continue;
            }
            fields.entries.push((name, key.pos, value, false));
            fields.signatures |= signature(name);
            if fields.entries.len() > SCAN_LIMIT {
                if fields.by_name.is_empty() {
                    let names = fields.entries.iter().enumerate();
                    fields.by_name = names.map(|(at, entry)| (entry.0, at)).collect();
                } else {
                    fields.by_name.insert(name, fields.entries.len() - 1);
                }
            }
        }
        fields
    }

    /// Where field `name` is in `entries`.
    fn find(&self, name: &str) -> Option<usize> {
        if self.signatures & signature(name) == 0 {
            return None;
        }
        match self.entries.len() > SCAN_LIMIT {
            true => self.by_name.get(name).copied(),
            false => self.entries.iter().position(|entry| entry.0 == name),
        }
    }

    /// How a problem names `field` of this mapping.
    fn part(&self, field: &str) -> String {
        match self.scope {
            Scope::Rule(_) => field.to_owned(),
            Scope::Nested(parent) => format!("{parent}.{field}"),
            Scope::Item(parent, i) => format!("{parent}[{i}].{field}"),
        }
    }

    /// Marks `field` as reported.
    fn mark_bad(&mut self, field: &'static str) {
        if !self.bad.contains(&field) {
            self.bad.push(field);
        }
    }

    fn report(&mut self, field: &'static str, pos: Position, message: String) {
        self.mark_bad(field);
        let part = self.part(field);
        self.problems.push(Problem {
            field: Some(part),
            ..Problem::new(Some(pos), message)
        });
    }

    /// A problem inside a field (an item of a list): `part` names it.
    fn report_in(&mut self, field: &'static str, part: String, pos: Position, message: String) {
        self.mark_bad(field);
        self.problems.push(Problem {
            field: Some(part),
            ..Problem::new(Some(pos), message)
        });
    }

    /// The value of `field`, `None` when absent or null.
    fn take(&mut self, field: &'static str) -> Option<&'n Node<'n>> {
        let at = self.find(field)?;
        let entry = &mut self.entries[at];
        entry.3 = true;
        let node = entry.2;
        match &node.value {
            Value::Invalid => {
                self.mark_bad(field);
                None
            }
            Value::Scalar { text, plain } if is_null(text, *plain) => None,
            _ => {
                self.first.get_or_insert(node.pos);
                Some(node)
            }
        }
    }

    /// Reports `field` as required when `value` is `None`.
    fn required<T>(&mut self, field: &'static str, value: Option<T>) -> Option<T> {
        if value.is_none() && !self.bad.contains(&field) {
            let pos = self.pos;
            self.report(field, pos, "is required".into());
        }
        value
    }

    /// `value`, reported as required when `name` is and it is `None`.
    fn check<T>(&mut self, name: Name, value: Option<T>) -> Option<T> {
        match name.is_required() {
            true => self.required(name.yaml, value),
            false => value,
        }
    }

    /// The text of string `field`, borrowed from the tree.
    fn str(&mut self, field: &'static str) -> Option<&'n str> {
        let node = self.take(field)?;
        match &node.value {
            Value::Scalar { text, .. } => Some(text),
            other => {
                let message = format!("must be a string, got {}", other.describe());
                self.report(field, node.pos, message);
                None
            }
        }
    }

    fn read_number(&mut self, field: &'static str) -> Option<f64> {
        let node = self.take(field)?;
        if let Value::Scalar { text, plain } = &node.value {
            match resolve(text, *plain) {
                Scalar::Int(i) => return Some(i as f64),
                Scalar::Float(f) => return Some(f),
                _ => {}
            }
        }
        let message = format!("must be a number, got {}", node.value.describe());
        self.report(field, node.pos, message);
        None
    }

    /// An integer in `min..=max`.
    fn integer(&mut self, field: &'static str, min: i128, max: i128) -> Option<i128> {
        let node = self.take(field)?;
        let got = match &node.value {
            Value::Scalar { text, plain } => match resolve(text, *plain) {
                Scalar::Int(i) if (min..=max).contains(&i) => return Some(i),
                Scalar::Int(i) => i.to_string(),
                Scalar::Float(f) => f.to_string(),
                _ => node.value.describe(),
            },
            other => other.describe(),
        };
        let message = match min {
            0 => format!("must be a whole number in 0..={max}, got {got}"),
            _ => format!("must be a whole number in {min}..={max}, got {got}"),
        };
        self.report(field, node.pos, message);
        None
    }

    fn read_whole<T: Whole>(&mut self, field: &'static str) -> Option<T> {
        self.integer(field, 0, T::MAX.into())
            .and_then(|i| u64::try_from(i).ok())
            .and_then(T::from_u64)
    }

    /// The mapping of a nested value or a list item, read into `v`; `None`
    /// when it had problems (merged into this mapping's, under `field`).
    fn child<T: Describe>(
        &mut self,
        field: &'static str,
        scope: Scope,
        node: &'n Node<'n>,
        map: &'n [(Node<'n>, Node<'n>)],
        v: &mut T,
    ) -> Option<Position> {
        let mut child = RuleFields::of(scope, node.pos, map);
        v.describe(&mut child);
        child.unknown(v);
        if child.problems.is_empty() {
            return Some(child.first.unwrap_or(node.pos));
        }
        self.mark_bad(field);
        for problem in child.problems {
            if let Some(part) = &problem.field {
                self.bad_parts.push(part.clone());
            }
            self.problems.push(problem);
        }
        None
    }

    /// Reports every field written that the description did not read.
    fn unknown<T: Describe>(&mut self, value: &T) {
        let mut known = None;
        for at in 0..self.entries.len() {
            let (name, key, _, used) = self.entries[at];
            if used {
                continue;
            }
            let known = known.get_or_insert_with(|| field_names_of(value, Format::Yaml).join(", "));
            let message = match self.scope {
                Scope::Rule(kind) => format!("is not a field of a {kind} rule (known: {known})"),
                Scope::Nested(parent) => format!("is not a field of {parent} (known: {known})"),
                Scope::Item(..) => format!("is not a field of an item (known: {known})"),
            };
            let part = self.part(name);
            self.problems.push(Problem {
                field: Some(part),
                ..Problem::new(Some(key), message)
            });
        }
    }

    /// Reports unknown fields and hands every problem of the rule over,
    /// then the core's problems with the rule (`errors`) that were not
    /// reported already, each at its field's position.
    pub(crate) fn finish<T: Describe>(
        mut self,
        kind: &'static str,
        index: usize,
        node: &Node<'_>,
        value: &T,
        errors: Vec<RuleError>,
        problems: &mut Vec<Problem>,
    ) {
        self.unknown(value);
        for error in errors {
            if self.bad.contains(&error.field) || self.bad_parts.iter().any(|p| p == error.field) {
                continue;
            }
            let pos = self
                .item_position(&error)
                .or_else(|| path_position(node, error.field))
                .unwrap_or(self.pos);
            self.problems.push(Problem {
                field: Some(error.field.to_owned()),
                ..Problem::new(Some(pos), error.message)
            });
        }
        if self.problems.is_empty() {
            return;
        }
        let rule = RuleRef {
            kind,
            index,
            resource: self.resource.map(str::to_owned),
        };
        problems.extend(self.problems.into_iter().map(|p| Problem {
            rule: Some(rule.clone()),
            ..p
        }));
    }

    /// Where the core's problem with an item of a list field is: the core
    /// names the item by its index (`item 2 (...): count ...`), and the
    /// item's field when the problem is one's; else the item's first field.
    fn item_position(&self, error: &RuleError) -> Option<Position> {
        let (_, items) = self.items.iter().find(|(list, _)| *list == error.field)?;
        let rest = error.message.strip_prefix("item ")?;
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        let (first, item) = items.get(rest[..digits].parse::<usize>().ok()?)?;
        let word = match rest[digits..]
            .find("): ")
            .or_else(|| rest[digits..].find(": "))
        {
            Some(at) => {
                let after = &rest[digits + at..];
                let after = after.trim_start_matches([')', ':', ' ']);
                after.split(' ').next().unwrap_or("")
            }
            None => "",
        };
        Some(map_value(item, word).map_or(*first, |node| node.pos))
    }
}

impl Fields for RuleFields<'_> {
    fn format(&self) -> Format {
        Format::Yaml
    }

    fn string(&mut self, name: Name, v: &mut String, default: &str) {
        if name.yaml.is_empty() {
            return;
        }
        let text = self.str(name.yaml);
        if name.is_rule_name() {
            self.resource = text;
        }
        match self.check(name, text) {
            Some(text) => text.clone_into(v),
            None if v != default => default.clone_into(v),
            None => {}
        }
    }

    fn optional_string(&mut self, name: Name, v: &mut Option<String>) {
        if name.yaml.is_empty() {
            return;
        }
        let text = self.str(name.yaml);
        *v = self.check(name, text).map(str::to_owned);
    }

    fn names(&mut self, name: Name, v: &mut Vec<String>, what: &'static str) {
        let field = name.yaml;
        if field.is_empty() {
            return;
        }
        let list = match self.take(field) {
            Some(node) => self.name_list(field, node, what),
            None => None,
        };
        *v = self.check(name, list).unwrap_or_default();
    }

    fn number(&mut self, name: Name, v: &mut f64, default: f64) {
        if name.yaml.is_empty() {
            return;
        }
        let n = self.read_number(name.yaml);
        *v = self.check(name, n).unwrap_or(default);
    }

    fn optional_number(&mut self, name: Name, v: &mut Option<f64>) {
        if name.yaml.is_empty() {
            return;
        }
        let n = self.read_number(name.yaml);
        *v = self.check(name, n);
    }

    fn whole<T: Whole>(&mut self, name: Name, v: &mut T, default: T) {
        if name.yaml.is_empty() {
            return;
        }
        let n = self.read_whole(name.yaml);
        *v = self.check(name, n).unwrap_or(default);
    }

    fn optional_whole<T: Whole>(&mut self, name: Name, v: &mut Option<T>) {
        if name.yaml.is_empty() {
            return;
        }
        let n = self.read_whole(name.yaml);
        *v = self.check(name, n);
    }

    fn signed(&mut self, name: Name, v: &mut i32, default: i32) {
        if name.yaml.is_empty() {
            return;
        }
        let n = self.integer(name.yaml, i32::MIN.into(), i32::MAX.into());
        let n = self.check(name, n).and_then(|i| i32::try_from(i).ok());
        *v = n.unwrap_or(default);
    }

    fn boolean(&mut self, name: Name, v: &mut bool, default: bool) {
        let field = name.yaml;
        if field.is_empty() {
            return;
        }
        let b = self.take(field).and_then(|node| {
            if let Value::Scalar { text, plain } = &node.value
                && let Scalar::Bool(b) = resolve(text, *plain)
            {
                return Some(b);
            }
            let message = format!("must be true or false, got {}", node.value.describe());
            self.report(field, node.pos, message);
            None
        });
        *v = self.check(name, b).unwrap_or(default);
    }

    fn choice<T: Copy + PartialEq + std::fmt::Debug + Send + Sync + 'static>(
        &mut self,
        name: Name,
        v: &mut T,
        default: T,
        table: &'static [Choice<T>],
    ) {
        let field = name.yaml;
        if field.is_empty() {
            return;
        }
        let words = || table.iter().filter(|c| !c.word.is_empty());
        let chosen = self.take(field).and_then(|node| {
            if let Value::Scalar { text, .. } = &node.value
                && let Some(choice) = words().find(|c| c.word == text)
            {
                return Some(choice.value);
            }
            let list: Vec<&str> = words().map(|c| c.word).collect();
            let message = format!(
                "must be one of {}, got {}",
                list.join(", "),
                node.value.describe()
            );
            self.report(field, node.pos, message);
            None
        });
        *v = self.check(name, chosen).unwrap_or(default);
    }

    fn value(
        &mut self,
        name: Name,
        class: Name,
        v: &mut ParamValue,
        class_type: &mut Option<&'static str>,
    ) {
        let field = name.yaml;
        if field.is_empty() {
            return;
        }
        let read = self.take(field).and_then(|node| match value::read(node) {
            Ok(value) => Some(value),
            Err(message) => {
                self.report(field, node.pos, message);
                None
            }
        });
        if let Some(read) = self.check(name, read) {
            *v = read;
        }
        if class.yaml.is_empty() {
            return;
        }
        *class_type = self
            .take(class.yaml)
            .and_then(|node| match value::class_type(node) {
                Ok(class) => Some(class),
                Err(message) => {
                    self.report(class.yaml, node.pos, message);
                    None
                }
            });
    }

    fn nested<T: Describe>(&mut self, name: Name, v: &mut T) {
        let field = name.yaml;
        if field.is_empty() {
            return;
        }
        let Some(node) = self.take(field) else {
            return;
        };
        let Value::Map(map) = &node.value else {
            let message = format!("must be a mapping, got {}", node.value.describe());
            self.report_in(field, field.to_owned(), node.pos, message);
            return;
        };
        let mut read = T::default();
        if self
            .child(field, Scope::Nested(field), node, map, &mut read)
            .is_some()
        {
            *v = read;
        }
    }

    fn optional_nested<T: Describe>(&mut self, name: Name, v: &mut Option<T>) {
        let field = name.yaml;
        // Absent or null: none (and a null key is read).
        if field.is_empty() || self.take(field).is_none() {
            *v = None;
            return;
        }
        let mut inner = v.take().unwrap_or_default();
        self.nested(name, &mut inner);
        *v = Some(inner);
    }

    fn list<T: Describe>(&mut self, name: Name, v: &mut Vec<T>) {
        let field = name.yaml;
        if field.is_empty() {
            return;
        }
        let Some(node) = self.take(field) else {
            v.clear();
            return;
        };
        let Value::Seq(nodes) = &node.value else {
            let message = format!("must be a list, got {}", node.value.describe());
            self.report(field, node.pos, message);
            v.clear();
            return;
        };
        let mut list = Vec::with_capacity(nodes.len());
        let mut places = Vec::with_capacity(nodes.len());
        for (i, item) in nodes.iter().enumerate() {
            let Value::Map(map) = &item.value else {
                let message = format!(
                    "must be a mapping {{{}}}, got {}",
                    required_names::<T>().join(", "),
                    item.value.describe()
                );
                self.report_in(field, format!("{field}[{i}]"), item.pos, message);
                continue;
            };
            let mut read = T::default();
            if let Some(first) = self.child(field, Scope::Item(field, i), item, map, &mut read) {
                list.push(read);
                places.push((first, item));
            }
        }
        self.items.push((field, places));
        *v = list;
    }

    fn fixed(&mut self, name: Name, _: &'static str, _: &'static str) {
        debug_assert!(name.yaml.is_empty(), "a rule file has no fixed field");
    }

    fn refused(&mut self, name: Name, _: &'static str) {
        debug_assert!(name.yaml.is_empty(), "a rule file has no refused flag");
    }
}

impl<'n> RuleFields<'n> {
    /// A list of names (`limit_app`'s origins), or one name.
    fn name_list(
        &mut self,
        field: &'static str,
        node: &'n Node<'n>,
        what: &str,
    ) -> Option<Vec<String>> {
        let items: &[Node<'_>] = match &node.value {
            Value::Seq(items) => items,
            Value::Scalar { text, .. } => return Some(vec![text.to_string()]),
            other => {
                let message = format!("must be a list of {what}s, got {}", other.describe());
                self.report_in(field, field.into(), node.pos, message);
                return None;
            }
        };
        let article = match what.starts_with(['a', 'e', 'i', 'o', 'u']) {
            true => "an",
            false => "a",
        };
        let mut list = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            match &item.value {
                Value::Scalar { text, .. } => list.push(text.to_string()),
                other => {
                    let message =
                        format!("must be {article} {what} name, got {}", other.describe());
                    self.report_in(field, format!("{field}[{i}]"), item.pos, message);
                }
            }
        }
        Some(list)
    }
}

/// The names of `T`'s required fields in a rule file.
fn required_names<T: Describe>() -> Vec<&'static str> {
    struct Required(Vec<&'static str>);
    impl Required {
        fn push(&mut self, name: Name) {
            if name.is_required() && !name.yaml.is_empty() {
                self.0.push(name.yaml);
            }
        }
    }
    impl Fields for Required {
        fn format(&self) -> Format {
            Format::Yaml
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
        fn choice<T: Copy + PartialEq + std::fmt::Debug + Send + Sync + 'static>(
            &mut self,
            name: Name,
            _: &mut T,
            _: T,
            _: &'static [Choice<T>],
        ) {
            self.push(name)
        }
        fn value(&mut self, name: Name, _: Name, _: &mut ParamValue, _: &mut Option<&'static str>) {
            self.push(name)
        }
        fn nested<T: Describe>(&mut self, name: Name, _: &mut T) {
            self.push(name)
        }
        fn list<T: Describe>(&mut self, name: Name, _: &mut Vec<T>) {
            self.push(name)
        }
        fn fixed(&mut self, _: Name, _: &'static str, _: &'static str) {}
        fn refused(&mut self, _: Name, _: &'static str) {}
    }
    let mut required = Required(Vec::new());
    T::default().describe(&mut required);
    required.0
}

/// The value of key `name` in mapping `node`.
fn map_value<'a, 'n>(node: &'a Node<'n>, name: &str) -> Option<&'a Node<'n>> {
    let Value::Map(entries) = &node.value else {
        return None;
    };
    entries.iter().find_map(|(key, value)| match &key.value {
        Value::Scalar { text, .. } if text == name => Some(value),
        _ => None,
    })
}

/// Where `path` (`count`, `cluster_config.flow_id`) is written in a rule's
/// mapping.
pub(crate) fn path_position(rule: &Node<'_>, path: &str) -> Option<Position> {
    let mut node = rule;
    for part in path.split('.') {
        node = map_value(node, part)?;
    }
    Some(node.pos)
}

/// One bit of 64 for a field name, from its length and first byte.
fn signature(name: &str) -> u64 {
    let first = name.as_bytes().first().copied().unwrap_or(0);
    1 << ((name.len() * 31 + usize::from(first)) % 64)
}

fn key_name<'n>(key: &'n Node<'n>, problems: &mut Vec<Problem>) -> Option<&'n str> {
    match &key.value {
        Value::Scalar { text, .. } => Some(text),
        Value::Invalid => None,
        other => {
            problems.push(Problem::new(
                Some(key.pos),
                format!("a field name must be a string, got {}", other.describe()),
            ));
            None
        }
    }
}
