//! A document's spanned tree: the direct reader (`fast.rs`) where it
//! takes the text, the event parser (`tree.rs`) for the rest. Both build
//! the same nodes; this file picks one, so neither reader knows the other.

use super::fast;
use super::tree::{Node, from_events};
use crate::error::Problem;

/// The document's root node (`None` for a file with no content), with
/// problems that do not stop the build (anchors, aliases, tags) pushed to
/// `problems`. `Err` is a problem that stops it: a syntax error, nesting
/// deeper than `max_depth`, a second document.
pub(crate) fn build<'t>(
    text: &'t str,
    max_depth: usize,
    problems: &mut Vec<Problem>,
) -> Result<Option<Node<'t>>, Problem> {
    if let Some(root) = fast::build(text, max_depth) {
        return Ok(Some(root));
    }
    from_events(text, max_depth, problems)
}
