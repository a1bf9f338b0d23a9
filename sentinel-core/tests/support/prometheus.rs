//! A strict reader of the Prometheus text exposition format, for tests
//! that check what `render_prometheus` says: every line must be valid, and
//! samples are looked up by name and labels.

use std::collections::HashMap;

/// A sample's name and labels, in order.
pub(crate) type Key = (String, Vec<(String, String)>);

/// The key of the sample `name{labels}`.
pub(crate) fn key(name: &str, labels: &[(&str, &str)]) -> Key {
    let labels = labels
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    (name.to_owned(), labels)
}

/// `name{labels} value` lines by (name, labels), and the TYPE of each
/// family; panics on any line that is not valid exposition text: HELP
/// then TYPE once per family, its samples right after (a summary's
/// `_sum` and `_count` too), names and label names of
/// `[a-zA-Z_:][a-zA-Z0-9_:]*`, each series once.
pub(crate) fn parse(text: &str) -> (HashMap<Key, f64>, HashMap<String, String>) {
    assert!(text.ends_with('\n'), "the text ends with a line feed");
    let mut samples = HashMap::new();
    let mut types: HashMap<String, String> = HashMap::new();
    let mut helped = None;
    let mut family: Option<String> = None;
    // Whether `name` is a sample of the family being read.
    let in_family = |family: &Option<String>, types: &HashMap<String, String>, name: &str| {
        let Some(family) = family.as_deref() else {
            return false;
        };
        name == family
            || types[family] == "summary"
                && ["_sum", "_count"]
                    .iter()
                    .any(|suffix| name.strip_suffix(suffix) == Some(family))
    };
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, _) = rest.split_once(' ').unwrap();
            helped = Some(name.to_owned());
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap();
            assert!(valid_name(name), "{name}");
            assert_eq!(helped.as_deref(), Some(name), "HELP before TYPE");
            assert!(["counter", "gauge", "summary"].contains(&kind), "{line}");
            if kind == "counter" {
                assert!(name.ends_with("_total"), "{name}");
            }
            let previous = types.insert(name.to_owned(), kind.to_owned());
            assert!(previous.is_none(), "{name} described twice");
            family = Some(name.to_owned());
            continue;
        }
        assert!(!line.starts_with('#'), "{line}");
        // An instance-wide sample has no labels: `name value`.
        if let Some((name, value)) = line.split_once(' ').filter(|(n, _)| !n.contains('{')) {
            assert!(
                in_family(&family, &types, name),
                "{name} outside its family"
            );
            let previous = samples.insert((name.to_owned(), Vec::new()), value.parse().unwrap());
            assert!(previous.is_none(), "series repeated: {line}");
            continue;
        }
        let (name, rest) = line.split_once('{').expect("labels");
        assert!(
            in_family(&family, &types, name),
            "{name} outside its family"
        );
        let mut labels = Vec::new();
        let mut chars = rest.chars();
        loop {
            let label: String = chars.by_ref().take_while(|&c| c != '=').collect();
            assert!(valid_name(&label), "label {label:?} in {line}");
            assert_eq!(chars.next(), Some('"'));
            let mut value = String::new();
            loop {
                match chars.next().unwrap() {
                    '\\' => match chars.next().unwrap() {
                        'n' => value.push('\n'),
                        c @ ('\\' | '"') => value.push(c),
                        c => panic!("unknown escape \\{c} in {line}"),
                    },
                    '"' => break,
                    c => value.push(c),
                }
            }
            labels.push((label, value));
            match chars.next().unwrap() {
                ',' => continue,
                '}' => break,
                c => panic!("unexpected {c:?} in {line}"),
            }
        }
        let value: String = chars.collect();
        let value = value.strip_prefix(' ').unwrap().parse().unwrap();
        let previous = samples.insert((name.to_owned(), labels), value);
        assert!(previous.is_none(), "series repeated: {line}");
    }
    (samples, types)
}

/// Whether `name` is a valid metric or label name.
fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}
