//! The names a rule mentions (resources, contexts, origins), as each kind
//! lists them (`names()` on its rule): checked against the instance's name
//! length limit when rules are loaded, and reserved then, so that no cap
//! can leave a rule without its node.

use super::RuleError;

/// What a name in a rule names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum NameOf {
    /// A resource.
    Resource,
    /// A named context (a chain rule's `ref_resource`).
    Context,
    /// An origin of the rule's resource.
    Origin,
}

/// One name a rule mentions: its field, what it names, the name.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RuleName<'r> {
    pub(crate) field: &'static str,
    pub(crate) of: NameOf,
    pub(crate) name: &'r str,
}

impl<'r> RuleName<'r> {
    /// The rule's resource, in its `resource` field.
    pub(crate) fn resource(name: &'r str) -> Self {
        RuleName {
            field: "resource",
            of: NameOf::Resource,
            name,
        }
    }

    /// An origin the rule names in its `limit_app` field.
    pub(crate) fn origin(name: &'r str) -> Self {
        RuleName {
            field: "limit_app",
            of: NameOf::Origin,
            name,
        }
    }
}

/// The names of one rule kind's rule, its resource first.
pub(crate) type NamesOf<R> = for<'r> fn(&'r R) -> Names<'r>;

/// How many names [`Names`] keeps without allocating: as many as a flow
/// rule mentions, the most of any kind but an authority rule's origins.
const INLINE_NAMES: usize = 3;

/// The names of one rule, in order: up to [`INLINE_NAMES`] kept inline,
/// more in a vector. A load lists every rule's names several times
/// (length check, memory budget, reservation), so a list costs no
/// allocation in the usual case.
#[derive(Clone, Debug)]
pub(crate) struct Names<'r> {
    inline: [RuleName<'r>; INLINE_NAMES],
    len: usize,
    /// Every name, once there are more than [`INLINE_NAMES`].
    more: Vec<RuleName<'r>>,
}

impl<'r> Names<'r> {
    /// No name.
    pub(crate) fn new() -> Self {
        Names {
            inline: [RuleName::resource(""); INLINE_NAMES],
            len: 0,
            more: Vec::new(),
        }
    }

    /// `name` after the others.
    pub(crate) fn push(&mut self, name: RuleName<'r>) {
        if self.more.is_empty() && self.len < INLINE_NAMES {
            self.inline[self.len] = name;
            self.len += 1;
            return;
        }
        if self.more.is_empty() {
            self.more.extend_from_slice(&self.inline[..self.len]);
        }
        self.more.push(name);
    }
}

impl<'r> std::ops::Deref for Names<'r> {
    type Target = [RuleName<'r>];

    fn deref(&self) -> &[RuleName<'r>] {
        match self.more.is_empty() {
            true => &self.inline[..self.len],
            false => &self.more,
        }
    }
}

impl<'r> FromIterator<RuleName<'r>> for Names<'r> {
    fn from_iter<I: IntoIterator<Item = RuleName<'r>>>(names: I) -> Self {
        let mut all = Names::new();
        for name in names {
            all.push(name);
        }
        all
    }
}

/// The most of an over-long resource name an error repeats.
const QUOTED_BYTES: usize = 64;

/// An error per name of rule `kind[index]` longer than `max_name_len`
/// bytes.
pub(crate) fn too_long(
    kind: &'static str,
    index: usize,
    names: &[RuleName<'_>],
    max_name_len: usize,
) -> Vec<RuleError> {
    let resource = names.first().map_or("", |n| n.name);
    names
        .iter()
        .filter(|n| n.name.len() > max_name_len)
        .map(|n| {
            let message = format!(
                "is {} bytes long, over the limit of {max_name_len} (max_name_len)",
                n.name.len()
            );
            RuleError::new(kind, index, &quoted(resource), n.field, message)
        })
        .collect()
}

/// `name`, cut to its first [`QUOTED_BYTES`] (on a character boundary)
/// with `...` when longer: an error need not repeat a megabyte.
fn quoted(name: &str) -> String {
    if name.len() <= QUOTED_BYTES {
        return name.to_owned();
    }
    let mut end = QUOTED_BYTES;
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &name[..end])
}

/// The doc comment and body of a kind's public `name_problems`, the same
/// for every kind: `$kind` is the kind's name in errors.
macro_rules! name_problems {
    ($kind:expr) => {
        /// The rule's names (resource, and each `ref_resource` or
        /// `limit_app` origin it has) longer than `max_name_len` bytes,
        /// as errors of the rule at `index`. An instance refuses them
        /// when loading, against its
        /// [`max_name_len`](crate::SentinelBuilder::max_name_len);
        /// [`problems`](Self::problems) leaves them out, since the limit
        /// is the instance's.
        pub fn name_problems(&self, index: usize, max_name_len: usize) -> Vec<RuleError> {
            crate::rule::names::too_long($kind, index, &self.names(), max_name_len)
        }
    };
}
pub(crate) use name_problems;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_past_the_inline_ones_keep_their_order() {
        let words = ["r", "a", "b", "c", "d", "e"];
        for n in 0..=words.len() {
            let names: Names<'_> = words[..n].iter().map(|w| RuleName::origin(w)).collect();
            let listed: Vec<&str> = names.iter().map(|name| name.name).collect();
            assert_eq!(listed, words[..n]);
        }
    }
}
