//! `RuleFields`: one rule's mapping, read field by field with a problem per
//! missing, mistyped or unknown field, each at its value's position.

use sentinel_flow_core::RuleError;

use super::Map;
use super::scalar::{Scalar, is_null, resolve};
use super::tree::{Node, Value};
use crate::error::{Position, Problem, RuleRef};

/// Up to this many fields, a field is found by a scan (faster than
/// hashing for a rule's usual handful); past it, through a map.
const SCAN_LIMIT: usize = 16;

pub(crate) struct RuleFields<'n> {
    kind: &'static str,
    index: usize,
    pub(crate) pos: Position,
    entries: Vec<(&'n str, Position, &'n Node<'n>, bool)>,
    /// Each field's place in `entries`, once there are more than
    /// [`SCAN_LIMIT`]: a rule may be written with any number of (unknown)
    /// fields, and each is looked up once.
    by_name: Map<&'n str, usize>,
    /// The [`signature`]s of the fields' names, or-ed: most fields a kind
    /// knows are absent from a rule, and are found absent by one test.
    signatures: u64,
    known: &'static [&'static str],
    /// Fields already reported, so the core does not report them again;
    /// each once (a list field may have a problem per item).
    bad: Vec<&'static str>,
    problems: Vec<Problem>,
    /// The resource as written, to name the rule in its problems.
    resource: Option<&'n str>,
}

impl<'n> RuleFields<'n> {
    /// The fields of `node`, a rule of `kind`, or `None` (reported) when it
    /// is not a mapping.
    pub(crate) fn new(
        kind: &'static str,
        index: usize,
        node: &'n Node<'n>,
        known: &'static [&'static str],
        problems: &mut Vec<Problem>,
    ) -> Option<Self> {
        let rule = || RuleRef {
            kind,
            index,
            resource: None,
        };
        let Value::Map(map) = &node.value else {
            if !matches!(node.value, Value::Invalid) {
                problems.push(Problem {
                    rule: Some(rule()),
                    ..Problem::new(
                        Some(node.pos),
                        format!("a rule must be a mapping, got {}", node.value.describe()),
                    )
                });
            }
            return None;
        };
        let mut fields = RuleFields {
            kind,
            index,
            pos: node.pos,
            entries: Vec::with_capacity(map.len()),
            by_name: Map::default(),
            signatures: 0,
            known,
            bad: Vec::new(),
            problems: Vec::new(),
            resource: None,
        };
        for (key, value) in map {
            let Some(name) = key_name(key, &mut fields.problems) else {
                continue;
            };
            if let Some(at) = fields.find(name) {
                let first = fields.entries[at].1;
                fields.problems.push(Problem::new(
                    Some(key.pos),
                    format!(
                        "duplicate field {name} (first at {}:{})",
                        first.line, first.column
                    ),
                ));
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
        Some(fields)
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

    /// Marks `field` as reported.
    fn mark_bad(&mut self, field: &'static str) {
        if !self.bad.contains(&field) {
            self.bad.push(field);
        }
    }

    fn report(&mut self, field: &'static str, pos: Position, message: String) {
        self.mark_bad(field);
        self.problems.push(Problem {
            field: Some(field.to_owned()),
            ..Problem::new(Some(pos), message)
        });
    }

    /// The value of `field`, `None` when absent or null.
    pub(crate) fn take(&mut self, field: &'static str) -> Option<&'n Node<'n>> {
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
            _ => Some(node),
        }
    }

    /// Reports `field` as required when `value` is `None`.
    pub(crate) fn required<T>(&mut self, field: &'static str, value: Option<T>) -> Option<T> {
        if value.is_none() && !self.bad.contains(&field) {
            let pos = self.pos;
            self.report(field, pos, "is required".into());
        }
        value
    }

    pub(crate) fn string(&mut self, field: &'static str) -> Option<String> {
        self.str(field).map(str::to_owned)
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

    /// The resource, also kept to name the rule in its problems.
    pub(crate) fn resource(&mut self) -> Option<String> {
        let resource = self.str("resource");
        self.resource = resource;
        self.required("resource", resource).map(str::to_owned)
    }

    pub(crate) fn number(&mut self, field: &'static str) -> Option<f64> {
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
    pub(crate) fn integer(&mut self, field: &'static str, min: i128, max: i128) -> Option<i128> {
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

    pub(crate) fn u64(&mut self, field: &'static str) -> Option<u64> {
        self.integer(field, 0, u64::MAX.into())
            .and_then(|i| u64::try_from(i).ok())
    }

    pub(crate) fn u32(&mut self, field: &'static str) -> Option<u32> {
        self.integer(field, 0, u32::MAX.into())
            .and_then(|i| u32::try_from(i).ok())
    }

    pub(crate) fn boolean(&mut self, field: &'static str) -> Option<bool> {
        let node = self.take(field)?;
        if let Value::Scalar { text, plain } = &node.value
            && let Scalar::Bool(b) = resolve(text, *plain)
        {
            return Some(b);
        }
        let message = format!("must be true or false, got {}", node.value.describe());
        self.report(field, node.pos, message);
        None
    }

    /// One of `words`, each with its value.
    pub(crate) fn word<T: Copy>(
        &mut self,
        field: &'static str,
        words: &[(&'static str, T)],
    ) -> Option<T> {
        let node = self.take(field)?;
        if let Value::Scalar { text, .. } = &node.value
            && let Some((_, value)) = words.iter().find(|(word, _)| word == text)
        {
            return Some(*value);
        }
        let list: Vec<&str> = words.iter().map(|(word, _)| *word).collect();
        let message = format!(
            "must be one of {}, got {}",
            list.join(", "),
            node.value.describe()
        );
        self.report(field, node.pos, message);
        None
    }

    /// A list, its items left to the caller.
    pub(crate) fn list(&mut self, field: &'static str) -> Option<&'n [Node<'n>]> {
        let node = self.take(field)?;
        match &node.value {
            Value::Seq(items) => Some(items),
            other => {
                let message = format!("must be a list, got {}", other.describe());
                self.report(field, node.pos, message);
                None
            }
        }
    }

    /// A problem inside a field (an item of a list): `field` names the part.
    pub(crate) fn report_in(
        &mut self,
        field: &'static str,
        part: String,
        pos: Position,
        message: String,
    ) {
        self.mark_bad(field);
        self.problems.push(Problem {
            field: Some(part),
            ..Problem::new(Some(pos), message)
        });
    }

    /// The rule named in problems.
    fn rule_ref(&self) -> RuleRef {
        RuleRef {
            kind: self.kind,
            index: self.index,
            resource: self.resource.map(str::to_owned),
        }
    }

    /// Reports unknown fields and hands every problem of the rule over,
    /// then the core's problems with the rule (`errors`) that were not
    /// reported already, each at its field's position (`locate` refines
    /// one: a list item).
    pub(crate) fn finish(
        mut self,
        errors: Vec<RuleError>,
        locate: impl Fn(&RuleError) -> Option<Position>,
        problems: &mut Vec<Problem>,
    ) {
        let (all, mut known) = (self.known, None);
        for &(name, key, _, used) in &self.entries {
            if !used {
                let known = known.get_or_insert_with(|| all.join(", "));
                let message = format!("is not a field of a {} rule (known: {known})", self.kind);
                self.problems.push(Problem {
                    field: Some(name.to_owned()),
                    ..Problem::new(Some(key), message)
                });
            }
        }
        for error in errors {
            if self.bad.contains(&error.field) {
                continue;
            }
            let pos = locate(&error)
                .or_else(|| self.position_of(error.field))
                .unwrap_or(self.pos);
            self.problems.push(Problem {
                field: Some(error.field.to_owned()),
                ..Problem::new(Some(pos), error.message)
            });
        }
        if self.problems.is_empty() {
            return;
        }
        let rule = self.rule_ref();
        problems.extend(self.problems.into_iter().map(|p| Problem {
            rule: Some(rule.clone()),
            ..p
        }));
    }

    /// Where field `field` was read from (its value's position).
    fn position_of(&self, field: &str) -> Option<Position> {
        let at = self.find(field)?;
        let (_, _, node, used) = self.entries[at];
        used.then_some(node.pos)
    }
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
