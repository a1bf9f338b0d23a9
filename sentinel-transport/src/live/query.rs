//! The parameters of `GET /live/data`, checked: every problem is reported,
//! and a request with any problem is answered 400 without computing
//! anything.

/// Resources listed when `limit` is not given.
pub(crate) const DEFAULT_LIMIT: usize = 50;
/// The most resources one answer lists.
pub(crate) const MAX_LIMIT: usize = 1_000;
/// Rules listed per kind when `rules` is not given.
pub(crate) const DEFAULT_RULES_LIMIT: usize = 100;
/// The most rules per kind one answer lists.
pub(crate) const MAX_RULES_LIMIT: usize = 1_000;
/// The longest resource name or filter accepted, in bytes.
const MAX_NAME_BYTES: usize = 4_096;

/// What the page asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DataQuery {
    /// The resource whose minute is charted.
    pub(crate) resource: Option<String>,
    /// Only resources whose name contains this (ASCII case ignored).
    pub(crate) filter: Option<String>,
    /// At most this many resources, busiest first.
    pub(crate) limit: usize,
    /// At most this many rules of each kind.
    pub(crate) rules_limit: usize,
}

impl Default for DataQuery {
    fn default() -> Self {
        DataQuery {
            resource: None,
            filter: None,
            limit: DEFAULT_LIMIT,
            rules_limit: DEFAULT_RULES_LIMIT,
        }
    }
}

impl DataQuery {
    /// Parses decoded query pairs; `Err` holds every problem, one a line.
    pub(crate) fn parse(pairs: &[(String, String)]) -> Result<DataQuery, Vec<String>> {
        let mut query = DataQuery::default();
        let mut problems = Vec::new();
        let mut seen: Vec<&str> = Vec::new();
        for (key, value) in pairs {
            if seen.contains(&key.as_str()) {
                problems.push(format!("{key}: given more than once"));
                continue;
            }
            seen.push(key);
            match key.as_str() {
                "resource" => match name(value) {
                    Ok(v) => query.resource = v,
                    Err(e) => problems.push(format!("resource: {e}")),
                },
                "q" => match name(value) {
                    Ok(v) => query.filter = v,
                    Err(e) => problems.push(format!("q: {e}")),
                },
                "limit" => match count(value, 1, MAX_LIMIT) {
                    Ok(v) => query.limit = v,
                    Err(e) => problems.push(format!("limit: {e}")),
                },
                "rules" => match count(value, 0, MAX_RULES_LIMIT) {
                    Ok(v) => query.rules_limit = v,
                    Err(e) => problems.push(format!("rules: {e}")),
                },
                // Checked by the server's access control, when it has one.
                "token" => {}
                other => problems.push(format!(
                    "{other}: unknown parameter (known: resource, q, limit, rules, token)"
                )),
            }
        }
        if problems.is_empty() {
            Ok(query)
        } else {
            Err(problems)
        }
    }

    /// Whether `name` passes the filter.
    pub(crate) fn matches(&self, name: &str) -> bool {
        match &self.filter {
            None => true,
            Some(needle) => contains_ignore_ascii_case(name.as_bytes(), needle.as_bytes()),
        }
    }
}

/// An empty value means none.
fn name(value: &str) -> Result<Option<String>, String> {
    if value.len() > MAX_NAME_BYTES {
        return Err(format!(
            "longer than {MAX_NAME_BYTES} bytes ({} bytes)",
            value.len()
        ));
    }
    Ok((!value.is_empty()).then(|| value.to_owned()))
}

fn count(value: &str, min: usize, max: usize) -> Result<usize, String> {
    match value.parse::<usize>() {
        Ok(n) if (min..=max).contains(&n) => Ok(n),
        _ => Err(format!(
            "must be a whole number from {min} to {max}, got {value:?}"
        )),
    }
}

/// Substring search without allocating per name (the filter runs on every
/// resource of every poll).
fn contains_ignore_ascii_case(haystack: &[u8], needle: &[u8]) -> bool {
    needle.is_empty()
        || haystack
            .windows(needle.len())
            .any(|window| window.eq_ignore_ascii_case(needle))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn defaults_without_parameters() {
        assert_eq!(DataQuery::parse(&[]), Ok(DataQuery::default()));
    }

    #[test]
    fn reads_every_parameter_and_ignores_the_token() {
        let query = DataQuery::parse(&pairs(&[
            ("resource", "GET:/a b"),
            ("q", "ORD"),
            ("limit", "7"),
            ("rules", "0"),
            ("token", "secret"),
        ]))
        .unwrap();
        assert_eq!(query.resource.as_deref(), Some("GET:/a b"));
        assert_eq!((query.limit, query.rules_limit), (7, 0));
        assert!(query.matches("GET:/orders"));
        assert!(!query.matches("GET:/users"));
    }

    #[test]
    fn reports_every_problem() {
        let problems = DataQuery::parse(&pairs(&[
            ("limit", "0"),
            ("rules", "x"),
            ("colour", "red"),
            ("q", "a"),
            ("q", "b"),
        ]))
        .unwrap_err();
        assert_eq!(
            problems,
            vec![
                "limit: must be a whole number from 1 to 1000, got \"0\"",
                "rules: must be a whole number from 0 to 1000, got \"x\"",
                "colour: unknown parameter (known: resource, q, limit, rules, token)",
                "q: given more than once",
            ]
        );
        let long = "x".repeat(MAX_NAME_BYTES + 1);
        assert!(DataQuery::parse(&pairs(&[("resource", &long)])).is_err());
        assert!(DataQuery::parse(&pairs(&[("limit", "1001")])).is_err());
    }
}
