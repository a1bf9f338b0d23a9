//! `ClusterBuilderSlot` ([`order::CLUSTER_BUILDER`](super::order::CLUSTER_BUILDER)):
//! the caller's origin and its node under the resource.
//!
//! The origin is the one the entry gives, or else its parent's. Its node is
//! made on first use; past the origin cap every further origin shares one
//! node per resource (see [`ResourceNode::origin_node`]). The resource
//! node itself was found before the chain (by name, or by a handle).

use super::placement::Placement;
use crate::node::{OriginNode, ResourceNode};

/// Finds (or makes) the origin's node of an entry.
pub(crate) struct ClusterBuilderSlot;

impl ClusterBuilderSlot {
    /// The entry's origin name (given, or inherited from `parent`; `""`
    /// for none) and its node.
    #[inline(always)]
    pub(crate) fn origin<'a, 's>(
        resource: &'s ResourceNode,
        given: &'a str,
        parent: Option<&'a Placement<'s>>,
    ) -> (&'a str, Option<&'s OriginNode>) {
        let name = match (given, parent) {
            ("", Some(parent)) => parent.origin_name(),
            (origin, _) => origin,
        };
        let node = match name {
            "" => None,
            name => resource.origin_node(name),
        };
        (name, node)
    }
}
