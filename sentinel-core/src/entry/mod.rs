//! The entry API: [`Entry`] guards, the [`EntryBuilder`], [`Resource`]
//! handles, and [`BlockError`].

mod builder;
mod error;
mod guard;
mod resource;
pub(crate) mod spare;

pub use builder::{EntryBuilder, EntryType};
pub use error::{BlockError, BlockKind};
pub use guard::Entry;
pub use resource::Resource;

pub(crate) use builder::Request;
pub(crate) use guard::Active;
