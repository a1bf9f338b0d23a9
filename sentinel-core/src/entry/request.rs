//! `Request`: what one entry asks for, as the builder and the handle fill
//! it in and the chain reads it.

use super::kinds::EntryType;
use crate::ParamValue;
use crate::node::ResourceNode;
use crate::slot::placement::Placement;

/// What one entry asks for.
pub(crate) struct Request<'a, 's> {
    pub(crate) name: &'a str,
    /// `Some` when a [`Resource`](crate::Resource) handle resolved the node
    /// (`Some(None)`: the handle was made past the resource cap).
    pub(crate) resource: Option<Option<&'s ResourceNode>>,
    pub(crate) entry_type: EntryType,
    pub(crate) batch: u32,
    pub(crate) origin: &'a str,
    pub(crate) context: Option<&'a str>,
    pub(crate) args: &'a [ParamValue],
    /// The entry this one is nested in, active in the same instance.
    pub(crate) parent: Option<&'a Placement<'s>>,
}

impl<'a> Request<'a, '_> {
    #[inline]
    pub(crate) fn new(name: &'a str) -> Self {
        Request {
            name,
            resource: None,
            entry_type: EntryType::Outbound,
            batch: 1,
            origin: "",
            context: None,
            args: &[],
            parent: None,
        }
    }
}
