//! `EntryBuilder`: an entry with settings beyond the resource name.

use super::guard::Entry;
use super::kinds::EntryType;
use super::request::Request;
use crate::engine::Engine;
use crate::node::ResourceNode;
use crate::slot::chain;
use crate::{BlockError, ParamValue};

/// An entry with settings: type, batch count, origin, context, arguments,
/// parent.
///
/// ```
/// use sentinel_flow_core::{EntryBuilder, EntryType, ManualClock, Sentinel};
///
/// let sentinel = Sentinel::builder().clock(ManualClock::new(0)).build();
/// let outer = sentinel
///     .entry_builder("GET:/orders")
///     .entry_type(EntryType::Inbound)
///     .origin("checkout")
///     .context("web")
///     .enter()?;
/// // A nested call: its node hangs under the outer entry's in the tree.
/// let inner = sentinel.entry_builder("db:orders").parent(&outer).batch_count(2).enter()?;
/// drop(inner);
/// drop(outer);
/// assert_eq!(sentinel.inbound_node().total_pass(sentinel.now_ms()), 1);
/// # Ok::<(), sentinel_flow_core::BlockError>(())
/// ```
#[must_use = "an entry builder does nothing until `enter` is called"]
pub struct EntryBuilder<'a, 's> {
    engine: &'s Engine,
    request: Request<'a, 's>,
}

impl<'a, 's> EntryBuilder<'a, 's> {
    pub(crate) fn on(engine: &'s Engine, resource: &'a str) -> Self {
        EntryBuilder {
            engine,
            request: Request::new(resource),
        }
    }

    pub(crate) fn resolved(mut self, node: Option<&'s ResourceNode>) -> Self {
        self.request.resource = Some(node);
        self
    }

    /// Inbound or outbound (default outbound).
    pub fn entry_type(mut self, entry_type: EntryType) -> Self {
        self.request.entry_type = entry_type;
        self
    }

    /// How many permits the entry takes (default 1; 0 is taken as 1).
    pub fn batch_count(mut self, count: u32) -> Self {
        self.request.batch = count.max(1);
        self
    }

    /// The caller's name, for rules by origin and per-origin statistics.
    /// An empty origin is no origin.
    pub fn origin(mut self, origin: &'a str) -> Self {
        self.request.origin = origin;
        self
    }

    /// The context (Sentinel's entrance); entries naming none share the
    /// default context. Ignored when a parent is given: a nested entry is in
    /// its parent's context.
    pub fn context(mut self, context: &'a str) -> Self {
        self.request.context = Some(context);
        self
    }

    /// Arguments for hot-parameter rules and user slots.
    pub fn args(mut self, args: &'a [ParamValue]) -> Self {
        self.request.args = args;
        self
    }

    /// The entry this one is made inside: it joins the parent's context
    /// (and origin, unless one is given) and its node becomes a child of the
    /// parent's node in the invocation tree. A parent from another instance,
    /// or one that passed unchecked, is ignored.
    pub fn parent(mut self, parent: &'a Entry<'s>) -> Self {
        self.request.parent = parent.active_in(self.engine);
        self
    }

    /// Runs the entry through the slot chain. A rate limiter that queues the
    /// entry makes this thread wait its turn on the instance's clock
    /// ([`Clock::sleep`](crate::Clock::sleep): the thread sleeps on the
    /// system clock; a [`ManualClock`](crate::ManualClock) moves forward by
    /// the wait and the call returns at once).
    #[inline]
    pub fn enter(self) -> Result<Entry<'s>, BlockError> {
        chain::enter(self.engine, self.request)
    }

    /// As [`enter`](Self::enter), but a rate limiter's queue is waited on
    /// with a tokio timer, so the executor thread stays free. Dropping the
    /// future while it waits counts nothing and gives back the concurrency
    /// its checks took; its place in the rate limiter's queue stays taken
    /// (later requests are paced behind it, as if it had run).
    #[cfg(feature = "tokio")]
    pub async fn enter_async(self) -> Result<Entry<'s>, BlockError> {
        chain::enter_async(self.engine, self.request).await
    }
    /// As [`enter`](Self::enter), but never waits: an entry a rate
    /// limiter queues comes back as [`Entering::Queued`](crate::Entering),
    /// for the caller to wait on with its own timer and then admit. For
    /// middleware whose future type must be named (no `async fn` inside).
    #[cfg(feature = "tokio")]
    #[inline]
    pub fn enter_or_queue(self) -> Result<super::queued::Entering<'s>, BlockError> {
        super::queued::enter_or_queue(self.engine, self.request)
    }
}

impl std::fmt::Debug for EntryBuilder<'_, '_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EntryBuilder")
            .field("resource", &self.request.name)
            .field("entry_type", &self.request.entry_type)
            .field("batch", &self.request.batch)
            .field("origin", &self.request.origin)
            .field("context", &self.request.context)
            .field("args", &self.request.args)
            .finish_non_exhaustive()
    }
}
