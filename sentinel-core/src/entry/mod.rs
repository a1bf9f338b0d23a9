//! The entry API: [`Entry`] guards, the [`EntryBuilder`], [`Resource`]
//! handles, and [`BlockError`].

mod builder;
mod error;
mod guard;
mod kinds;
#[cfg(feature = "tokio")]
mod queued;
mod request;
mod resource;
pub(crate) mod spare;

pub use builder::EntryBuilder;
pub use error::BlockError;
pub use guard::Entry;
pub use kinds::{BlockKind, EntryType};
#[cfg(feature = "tokio")]
pub use queued::{Entering, Queued};
pub use resource::Resource;

pub(crate) use guard::Active;
pub(crate) use request::Request;
