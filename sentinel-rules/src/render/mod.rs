//! Rules to the rule file's YAML: a kind's whole top-level section, or a
//! whole file. What is written parses back to the same rules (a proptest
//! checks every kind and field).

pub(crate) mod fields;
#[cfg(test)]
mod generate;
#[cfg(test)]
mod roundtrip;
pub(crate) mod scalar;

use sentinel_flow_core::describe::DescribeRule;

use crate::change::{Each, RuleChange};
use crate::parse::RuleFile;
use crate::user::UserRules;
use fields::Rendered;

/// The top-level section of `change`'s kind, key included, ending with a
/// newline: `flow:\n  - resource: a\n    count: 1\n`, or `flow: []\n`.
/// `Err` lists what the format cannot express, one line per rule.
pub(crate) fn section(change: &RuleChange) -> Result<String, Vec<String>> {
    struct Render;
    impl Each for Render {
        type Out = Vec<Rendered>;
        fn each<R: DescribeRule>(self, rules: &[R]) -> Vec<Rendered> {
            rules.iter().map(fields::fields).collect()
        }
        fn user(self, rules: &UserRules) -> Vec<Rendered> {
            rules.rendered()
        }
    }
    let rules = change.each(Render);
    let kind = change.kind();
    if rules.is_empty() {
        return Ok(format!("{kind}: []\n"));
    }
    let mut out = format!("{kind}:\n");
    let mut problems = Vec::new();
    for (index, rule) in rules.into_iter().enumerate() {
        match rule {
            Ok(fields) => push_rule(&mut out, &fields),
            Err(problem) => problems.push(format!("{kind}[{index}]: {problem}")),
        }
    }
    match problems.is_empty() {
        true => Ok(out),
        false => Err(problems),
    }
}

fn push_rule(out: &mut String, fields: &[(&str, String)]) {
    for (i, (name, value)) in fields.iter().enumerate() {
        out.push_str(if i == 0 { "  - " } else { "    " });
        out.push_str(name);
        out.push(':');
        // A nested list starts on the next line.
        if !value.starts_with('\n') {
            out.push(' ');
        }
        out.push_str(value);
        out.push('\n');
    }
    if fields.is_empty() {
        // Not reachable for a valid rule (each kind has a required field or
        // a limit); written so that it still parses as an empty mapping.
        out.push_str("  - {}\n");
    }
}

/// A whole file: the version, every kind (empty ones left out) and the
/// percentile list. Used when a file's layout does not allow rewriting one
/// section in place; comments are lost then.
pub(crate) fn document(file: &RuleFile) -> Result<String, Vec<String>> {
    let mut out = String::new();
    if let Some(version) = &file.version {
        out.push_str(&format!("version: {}\n", scalar::string(version)));
    }
    let mut changes = RuleChange::all_of(&file.book);
    // The kinds an application registered, at their place in a file.
    for list in &file.user_kinds {
        let at = changes.partition_point(|c| file_order(c) <= list.file_order());
        changes.insert(at, RuleChange::User(list.clone()));
    }
    let mut problems = Vec::new();
    for change in changes.iter().filter(|c| !c.is_empty()) {
        match section(change) {
            Ok(text) => out.push_str(&text),
            Err(more) => problems.extend(more),
        }
    }
    if !file.track_percentiles.is_empty() {
        out.push_str("track_percentiles:\n");
        for name in &file.track_percentiles {
            out.push_str(&format!("  - {}\n", scalar::string(name)));
        }
    }
    if out.is_empty() {
        // An empty file is refused by default; an explicit empty list is not.
        out.push_str("flow: []\n");
    }
    match problems.is_empty() {
        true => Ok(out),
        false => Err(problems),
    }
}

/// A built-in kind's place in a file.
fn file_order(change: &RuleChange) -> u32 {
    struct Order;
    impl Each for Order {
        type Out = u32;
        fn each<R: DescribeRule>(self, _: &[R]) -> u32 {
            R::FILE_ORDER
        }
        fn user(self, rules: &UserRules) -> u32 {
            rules.file_order()
        }
    }
    change.each(Order)
}
