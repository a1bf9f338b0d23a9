//! Compiled patterns: an API predicate against a request path, a
//! parameter item's pattern against a value.

use regex::{Regex, RegexBuilder};

use super::model::{MAX_PATTERN_LEN, MAX_REGEX_BYTES, PathMatch, ValueMatch};

/// A regular expression matched against the whole text, within
/// [`MAX_REGEX_BYTES`].
fn whole_regex(pattern: &str) -> Result<Regex, String> {
    // The pattern alone first: one that closes the group it is anchored
    // in (`a)|(b`) is no regular expression, though it makes one there,
    // with the anchors on its first and last branch only.
    bounded_regex(pattern)?;
    bounded_regex(&format!(r"\A(?:{pattern})\z"))
}

/// `pattern` compiled within [`MAX_REGEX_BYTES`].
fn bounded_regex(pattern: &str) -> Result<Regex, String> {
    RegexBuilder::new(pattern)
        .size_limit(MAX_REGEX_BYTES)
        .dfa_size_limit(MAX_REGEX_BYTES)
        .nest_limit(64)
        .build()
        .map_err(|error| match error {
            regex::Error::CompiledTooBig(_) => {
                format!("regular expression larger than {MAX_REGEX_BYTES} bytes compiled")
            }
            other => format!(
                "invalid regular expression: {}",
                first_line(&other.to_string())
            ),
        })
}

fn first_line(text: &str) -> &str {
    // The `regex` crate's syntax errors draw the pattern over lines.
    text.lines().last().unwrap_or(text).trim()
}

fn check_len(pattern: &str) -> Result<(), String> {
    if pattern.len() > MAX_PATTERN_LEN {
        return Err(format!(
            "longer than {MAX_PATTERN_LEN} bytes ({} bytes)",
            pattern.len()
        ));
    }
    Ok(())
}

/// An API predicate, compiled.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum PathMatcher {
    /// The path equals it.
    Exact(String),
    /// `base` and what starts with it; `under`: the Ant `/**` form, which
    /// matches `base` itself and paths under `base/`.
    Prefix {
        /// What the path starts with.
        base: String,
        /// Whether only `base` and paths under `base/` match.
        under: bool,
    },
    /// The whole path matches it.
    Regex(Regex),
}

impl PathMatcher {
    /// `pattern` compiled; what is wrong with it, if it is too long,
    /// empty, or not a regular expression within [`MAX_REGEX_BYTES`].
    pub fn new(pattern: &str, strategy: PathMatch) -> Result<Self, String> {
        check_len(pattern)?;
        if pattern.is_empty() {
            return Err("must not be empty".into());
        }
        Ok(match strategy {
            PathMatch::Exact => PathMatcher::Exact(pattern.to_owned()),
            PathMatch::Prefix => match pattern.strip_suffix("/**") {
                Some(base) => PathMatcher::Prefix {
                    base: base.to_owned(),
                    under: true,
                },
                None => PathMatcher::Prefix {
                    base: pattern.trim_end_matches('*').to_owned(),
                    under: false,
                },
            },
            PathMatch::Regex => PathMatcher::Regex(whole_regex(pattern)?),
        })
    }

    /// Whether `path` matches.
    #[inline]
    pub fn matches(&self, path: &str) -> bool {
        match self {
            PathMatcher::Exact(exact) => path == exact,
            PathMatcher::Prefix { base, under: false } => strip(path, base).is_some(),
            PathMatcher::Prefix { base, under: true } => match strip(path, base) {
                Some(rest) => rest.is_empty() || rest.starts_with('/'),
                None => false,
            },
            PathMatcher::Regex(regex) => regex.is_match(path),
        }
    }
}

/// `path` without `base` at its start, if it starts with it. An empty
/// base (`/**`, `*`) is answered without a comparison: comparing zero
/// bytes calls `memcmp` with the empty string's dangling pointer, and
/// glibc's vector `memcmp` then loads from an unmapped page under a mask,
/// which the processor completes in a microcode assist of about 60 ns (a
/// sixth of a gateway request through every path).
#[inline(always)]
fn strip<'p>(path: &'p str, base: &str) -> Option<&'p str> {
    if base.is_empty() {
        return Some(path);
    }
    path.strip_prefix(base)
}

/// A parameter item's pattern, compiled; `Any` when it has none.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum ValueMatcher {
    /// No pattern: every value.
    Any,
    /// The value equals it.
    Exact(String),
    /// The value starts with it.
    Prefix(String),
    /// The whole value matches it.
    Regex(Regex),
    /// The value contains it.
    Contains(String),
}

impl ValueMatcher {
    /// `pattern` compiled (`None` or empty: every value); what is wrong
    /// with it, if it is too long or not a regular expression within
    /// [`MAX_REGEX_BYTES`].
    pub fn new(pattern: Option<&str>, strategy: ValueMatch) -> Result<Self, String> {
        let pattern = match pattern {
            // As Sentinel: an empty pattern is none.
            None | Some("") => return Ok(ValueMatcher::Any),
            Some(pattern) => pattern,
        };
        check_len(pattern)?;
        Ok(match strategy {
            ValueMatch::Exact => ValueMatcher::Exact(pattern.to_owned()),
            ValueMatch::Prefix => ValueMatcher::Prefix(pattern.to_owned()),
            ValueMatch::Regex => ValueMatcher::Regex(whole_regex(pattern)?),
            ValueMatch::Contains => ValueMatcher::Contains(pattern.to_owned()),
        })
    }

    /// Whether every value matches (no pattern).
    pub fn is_any(&self) -> bool {
        matches!(self, ValueMatcher::Any)
    }

    /// Whether `value` matches.
    pub fn matches(&self, value: &str) -> bool {
        match self {
            ValueMatcher::Any => true,
            ValueMatcher::Exact(pattern) => value == pattern,
            ValueMatcher::Prefix(pattern) => value.starts_with(pattern.as_str()),
            ValueMatcher::Regex(regex) => regex.is_match(value),
            ValueMatcher::Contains(pattern) => value.contains(pattern.as_str()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_regex_predicate_matches_the_whole_path_as_javas_matches() {
        let m = PathMatcher::new("/items/[0-9]+", PathMatch::Regex).unwrap();
        assert!(m.matches("/items/42"));
        assert!(!m.matches("/items/42/x"));
        assert!(!m.matches("/v1/items/42"));
        assert!(!m.matches("/items/abc"));
        // An alternation is grouped before the anchors.
        let m = PathMatcher::new("/a|/b", PathMatch::Regex).unwrap();
        assert!(m.matches("/a") && m.matches("/b"));
        assert!(!m.matches("/ab") && !m.matches("/a/b"));
    }

    #[test]
    fn an_ant_prefix_matches_its_base_and_what_is_under_it() {
        let m = PathMatcher::new("/orders/**", PathMatch::Prefix).unwrap();
        for path in ["/orders", "/orders/", "/orders/7", "/orders/7/items"] {
            assert!(m.matches(path), "{path}");
        }
        for path in ["/ordersx", "/order", "/", "/v1/orders"] {
            assert!(!m.matches(path), "{path}");
        }
        let all = PathMatcher::new("/**", PathMatch::Prefix).unwrap();
        for path in ["/", "/a", "/a/b/c"] {
            assert!(all.matches(path), "{path}");
        }
        assert!(!all.matches("a"));
        // A bare star: an empty base, which every path starts with.
        let any = PathMatcher::new("*", PathMatch::Prefix).unwrap();
        for path in ["", "/", "a", "/a/b"] {
            assert!(any.matches(path), "{path}");
        }
        let m = PathMatcher::new("/ord", PathMatch::Prefix).unwrap();
        assert!(m.matches("/orders") && !m.matches("/x"));
    }

    #[test]
    fn value_patterns_match_as_sentinels_parser() {
        let contains = ValueMatcher::new(Some("bot"), ValueMatch::Contains).unwrap();
        assert!(contains.matches("googlebot/2.1") && contains.matches("bot"));
        assert!(!contains.matches("curl/8"));
        let regex = ValueMatcher::new(Some("k-[0-9]{3}"), ValueMatch::Regex).unwrap();
        assert!(regex.matches("k-123") && !regex.matches("k-1234") && !regex.matches("xk-123"));
        let prefix = ValueMatcher::new(Some("10."), ValueMatch::Prefix).unwrap();
        assert!(prefix.matches("10.1.2.3") && !prefix.matches("110.1.2.3"));
        let exact = ValueMatcher::new(Some("a"), ValueMatch::Exact).unwrap();
        assert!(exact.matches("a") && !exact.matches("ab"));
        assert!(matches!(
            ValueMatcher::new(Some(""), ValueMatch::Exact).unwrap(),
            ValueMatcher::Any
        ));
    }

    #[test]
    fn oversized_and_invalid_patterns_are_refused() {
        let long = "a".repeat(MAX_PATTERN_LEN + 1);
        assert!(
            PathMatcher::new(&long, PathMatch::Exact)
                .unwrap_err()
                .contains("longer than")
        );
        assert!(
            PathMatcher::new("(", PathMatch::Regex)
                .unwrap_err()
                .starts_with("invalid regular")
        );
        // Small text, huge program: a counted repetition of a Unicode class.
        let huge = r"\w{1000}\w{1000}";
        assert!(
            ValueMatcher::new(Some(huge), ValueMatch::Regex)
                .unwrap_err()
                .contains("larger than")
        );
        assert!(PathMatcher::new("", PathMatch::Prefix).is_err());
    }

    /// A pattern that closes the group it is anchored in is no regular
    /// expression on its own; wrapped, it made one whose anchors no longer
    /// held (`/a)|(/b` matched every path starting with `/a`).
    #[test]
    fn a_pattern_that_closes_its_anchoring_group_is_refused_not_left_unanchored() {
        for pattern in ["/a)|(/b", ".*)|(x"] {
            let error = PathMatcher::new(pattern, PathMatch::Regex).unwrap_err();
            assert!(error.starts_with("invalid regular"), "{pattern}: {error}");
            let error = ValueMatcher::new(Some(pattern), ValueMatch::Regex).unwrap_err();
            assert!(error.starts_with("invalid regular"), "{pattern}: {error}");
        }
    }
}
