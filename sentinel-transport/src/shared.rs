//! What every handler of the server reads: the instance it serves.

use std::ops::Deref;
use std::sync::Arc;

use sentinel_flow_core::Sentinel;

/// The instance a server serves: the global one (`&'static Sentinel`) or an
/// `Arc<Sentinel>`, behind one pointer so handlers are not generic.
pub(crate) type SentinelRef = Arc<dyn Deref<Target = Sentinel> + Send + Sync>;
