//! Keys of the name index: a name's text, or a request path seen as the
//! name it cleans to, hashed and compared piece by piece, so that a path
//! with identifiers is found without writing its cleaned form.
//!
//! A name's text is cut at its `{id}` segments into pieces; a request path
//! at the segments [`clean_path`](crate::clean_path) replaces. Both hash
//! the pieces with a mark between them, so a path and the text it cleans
//! to have one hash, and a path matches a text when the text is its pieces
//! joined by `{id}`: the cleaned path, exactly. (A path with a literal
//! `{id}` segment, which cleaning keeps, hashes apart from its name: it is
//! named the slower way, through the maps. A match is exact either way.)

use std::hash::{BuildHasher, Hasher};

use crate::segment::{next_id, next_marked};

/// The most marks a key holds; a text or path with more is not in the
/// index (it is named the slower way, through the maps).
const MAX_MARKS: usize = 6;

/// What a name has where a path has an identifier.
const ID: &[u8] = b"{id}";

/// A text cut at its marked segments (start and end of each).
pub(crate) struct Key<'t> {
    text: &'t str,
    marks: [(u16, u16); MAX_MARKS],
    len: usize,
}

impl<'t> Key<'t> {
    /// The key of a name's text (a path, a route template, or a whole
    /// name): marked at its `{id}` segments. `None`: too many of them.
    #[inline]
    pub(crate) fn of_text(text: &'t str) -> Option<Self> {
        // Most texts have no `{` at all: one search, no walk of segments.
        if !text.as_bytes().contains(&b'{') {
            return Some(Key::whole(text));
        }
        let next = |from| next_marked(text.as_bytes(), from, |first| first == b'{', |s| s == ID);
        match next(0) {
            None => Some(Key::whole(text)),
            Some(first) => Key::marked_from(text, first, next),
        }
    }

    /// The key of a request path whose first identifier segment is
    /// `first` (from [`first_id`](crate::segment::first_id)): marked where
    /// [`clean_path`] puts `{id}`, so that it is the key of the cleaned
    /// path. `None`: too many identifiers. (A path with no identifier is
    /// its own text: [`whole`](Self::whole).)
    ///
    /// [`clean_path`]: crate::clean_path
    #[inline(always)]
    pub(crate) fn of_path(path: &'t str, first: (usize, usize)) -> Option<Self> {
        Key::marked_from(path, first, |from| next_id(path.as_bytes(), from))
    }

    /// The key of `text` with no marks: the text itself. For a request
    /// path, only when it has no identifier.
    #[inline(always)]
    pub(crate) fn whole(text: &'t str) -> Self {
        Key {
            text,
            marks: [(0, 0); MAX_MARKS],
            len: 0,
        }
    }

    /// `text` marked at `first` and at each segment `next` finds after the
    /// last mark (`next(from)`: the first marked segment from `from` on).
    #[inline(always)]
    fn marked_from(
        text: &'t str,
        first: (usize, usize),
        next: impl Fn(usize) -> Option<(usize, usize)>,
    ) -> Option<Self> {
        // Marks are kept as `u16`s: a longer text is not indexed.
        if text.len() > usize::from(u16::MAX) {
            return None;
        }
        let mut key = Key::whole(text);
        let mut mark = Some(first);
        while let Some((start, end)) = mark {
            if key.len == MAX_MARKS {
                return None;
            }
            // Within `u16`: checked above.
            key.marks[key.len] = (start as u16, end as u16);
            key.len += 1;
            mark = next(end + 1);
        }
        Some(key)
    }
}

/// What the index is searched by: a name's text as it is, or a [`Key`].
pub(crate) trait Lookup {
    /// The hash of the name this stands for: the same for a path and the
    /// text it cleans to.
    fn hash(&self, hasher: &impl BuildHasher) -> u64;

    /// Whether `text` is the name this stands for.
    fn matches(&self, text: &str) -> bool;
}

/// A text with no marks: most paths, as they are.
impl Lookup for str {
    #[inline(always)]
    fn hash(&self, hasher: &impl BuildHasher) -> u64 {
        hasher.hash_one(self)
    }

    #[inline(always)]
    fn matches(&self, text: &str) -> bool {
        self == text
    }
}

impl Lookup for Key<'_> {
    /// The pieces (the text between marks), a mark between each two.
    #[inline(always)]
    fn hash(&self, hasher: &impl BuildHasher) -> u64 {
        if self.len == 0 {
            return Lookup::hash(self.text, hasher);
        }
        let text = self.text.as_bytes();
        let mut state = hasher.build_hasher();
        let mut at = 0;
        for &(start, end) in &self.marks[..self.len] {
            state.write(&text[at..start as usize]);
            // No byte of a `str` is 0xff: a mark is no piece's byte.
            state.write_u8(0xff);
            at = end as usize;
        }
        state.write(&text[at..]);
        state.finish()
    }

    /// Whether `text` is the pieces joined by `{id}`: for a request path,
    /// whether `text` is the path cleaned.
    #[inline(always)]
    fn matches(&self, text: &str) -> bool {
        if self.len == 0 {
            return self.text == text;
        }
        let pieces = self.text.as_bytes();
        let mut rest = text.as_bytes();
        let mut at = 0;
        for &(start, end) in &self.marks[..self.len] {
            let Some(after) = rest
                .strip_prefix(&pieces[at..start as usize])
                .and_then(|after| after.strip_prefix(ID))
            else {
                return false;
            };
            rest = after;
            at = end as usize;
        }
        rest == &pieces[at..]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clean_path;
    use crate::segment::first_id;

    fn hasher() -> foldhash::fast::RandomState {
        foldhash::fast::RandomState::default()
    }

    /// The key the cache looks a request path up by.
    fn path_key(path: &str) -> Option<Key<'_>> {
        match first_id(path) {
            None => Some(Key::whole(path)),
            Some(first) => Key::of_path(path, first),
        }
    }

    #[test]
    fn a_path_has_the_key_of_the_text_it_cleans_to() {
        let hasher = hasher();
        for path in [
            "/",
            "",
            "/orders",
            "/orders/42",
            "/orders/42/",
            "/orders/42/items/7",
            "/42",
            "42",
            "/a//b/1",
            "/users/8c6f3b8e-5a3c-4e1b-9d7a-2f4e6c8b1a0d/x",
            "/blobs/5f2b6c1d9e8a7b3c4d5e6f70",
            "/x/deadbeef",
            "/a/{idx}/{",
            "/é/1/ü",
        ] {
            let cleaned = clean_path(path);
            let by_path = path_key(path).unwrap();
            let by_text = Key::of_text(&cleaned).unwrap();
            assert_eq!(by_path.hash(&hasher), by_text.hash(&hasher), "{path:?}");
            assert!(by_path.matches(&cleaned), "{path:?} -> {cleaned:?}");
            assert!(by_text.matches(&cleaned), "{cleaned:?}");
        }
        // A literal `{id}` segment is no identifier: the path's key is the
        // path, which still matches its name (cleaning keeps `{id}`), but
        // hashes apart from the name's marked key: such a path is found
        // the slower way, through the maps.
        for path in ["/a/{id}", "/a/{id}/1"] {
            let cleaned = clean_path(path);
            assert!(path_key(path).unwrap().matches(&cleaned), "{path:?}");
        }
    }

    #[test]
    fn a_key_matches_its_cleaned_text_only() {
        let key = path_key("/orders/42/items").unwrap();
        assert!(key.matches("/orders/{id}/items"));
        for other in [
            "/orders/42/items",
            "/orders/{id}/item",
            "/orders/{id}/items/",
            "/orders/{id}x/items",
            "/orders/x{id}/items",
            "/orders/{id}",
            "/order/{id}/items",
            "",
        ] {
            assert!(!key.matches(other), "{other:?}");
        }
        // A template's digits are its own: not cleaned.
        let template = Key::of_text("/v1/42").unwrap();
        assert!(template.matches("/v1/42"));
        assert!(!template.matches("/v1/{id}"));
        assert!(!path_key("/v1/42").unwrap().matches("/v1/42"));
    }

    #[test]
    fn keys_of_other_texts_differ() {
        let hasher = hasher();
        let hash = |text: &str| Key::of_text(text).unwrap().hash(&hasher);
        // A mark is not its text: "{id}" pieces and marks hash apart.
        assert_ne!(hash("/a/{id}"), hash("/a/"));
        assert_ne!(hash("/a/{id}/b"), hash("/a//b"));
        assert_ne!(hash("/{id}/{id}"), hash("/{id}/"));
    }

    #[test]
    fn too_many_identifiers_are_no_key() {
        assert!(path_key("/1/2/3/4/5/6").is_some());
        assert!(path_key("/1/2/3/4/5/6/7").is_none());
        assert!(Key::of_text("/{id}/{id}/{id}/{id}/{id}/{id}/{id}").is_none());
        assert!(Key::of_text("/a/b/c/d/e/f/g/h").is_some());
    }
}
