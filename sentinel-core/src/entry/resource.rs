//! `Resource`: a handle that finds its node once.

use std::fmt;

use super::builder::EntryBuilder;
use super::guard::Entry;
use crate::BlockError;
use crate::engine::Engine;
use crate::node::ResourceNode;

/// A resource whose node was found once, so entering skips the registry.
///
/// Keep one in a `static` for a resource entered often:
///
/// ```
/// use once_cell::sync::Lazy;
/// use sentinel_flow_core::Resource;
///
/// static ORDERS: Lazy<Resource<'static>> = Lazy::new(|| Resource::new("GET:/orders"));
///
/// fn list_orders() -> Result<Vec<u64>, sentinel_flow_core::BlockError> {
///     let _entry = ORDERS.entry()?;
///     Ok(vec![1, 2, 3])
/// }
/// assert_eq!(list_orders().unwrap().len(), 3);
/// ```
#[derive(Clone)]
pub struct Resource<'s> {
    engine: &'s Engine,
    name: Box<str>,
    node: Option<&'s ResourceNode>,
}

impl<'s> Resource<'s> {
    pub(crate) fn on(engine: &'s Engine, name: &str) -> Self {
        Resource {
            engine,
            name: name.into(),
            node: engine.parts.nodes.resolve_quietly(name),
        }
    }

    /// Enters the resource with the default settings.
    #[inline]
    pub fn entry(&self) -> Result<Entry<'s>, BlockError> {
        self.builder().enter()
    }

    /// A builder for an entry of this resource with more settings.
    #[inline]
    pub fn builder(&self) -> EntryBuilder<'_, 's> {
        EntryBuilder::on(self.engine, &self.name).resolved(self.node)
    }

    /// The resource's node; `None` if the handle was made past the
    /// instance's resource cap (entries then pass unchecked and uncounted).
    pub fn node(&self) -> Option<&'s ResourceNode> {
        self.node
    }

    /// Turns response-time percentiles of the resource on or off, as
    /// [`Sentinel::track_percentiles`](crate::Sentinel::track_percentiles); returns whether they are tracked
    /// after the call (`false` for a handle made past the resource cap).
    pub fn track_percentiles(&self, on: bool) -> bool {
        self.node
            .is_some_and(|node| node.track_percentiles_by(crate::stat::BY_CODE, on))
    }

    pub(crate) fn engine(&self) -> &'s Engine {
        self.engine
    }

    /// The resource's name.
    pub fn name(&self) -> &str {
        &self.name
    }
}

impl fmt::Debug for Resource<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Resource")
            .field("name", &self.name)
            .field("counted", &self.node.is_some())
            .finish()
    }
}
