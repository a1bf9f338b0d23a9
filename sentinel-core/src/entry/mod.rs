//! The entry API: [`Entry`] guards, the [`EntryBuilder`], [`Resource`]
//! handles, and [`BlockError`].

mod builder;
mod error;
mod guard;
mod kinds;
mod resource;
pub(crate) mod spare;

pub use builder::EntryBuilder;
pub use error::BlockError;
pub use guard::Entry;
pub use kinds::{BlockKind, EntryType};
pub use resource::Resource;

pub(crate) use builder::Request;
pub(crate) use guard::Active;
