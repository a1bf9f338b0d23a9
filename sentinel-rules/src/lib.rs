//! YAML rule files for `sentinel-flow-core`: every rule kind in one file,
//! validated with an error per problem (file, line, column, rule, field),
//! loaded all-or-nothing, hot-reloaded by a watcher thread, and rewritten
//! when rules change through an API.
//!
//! ```
//! use sentinel_flow_core::{ManualClock, Sentinel};
//!
//! let sentinel = Sentinel::builder().clock(ManualClock::new(0)).build();
//! let file = sentinel_flow_rules::parse_str(
//!     "version: 7\n\
//!      flow:\n\
//!      \x20 - {resource: GET:/orders, count: 100}\n\
//!      degrade:\n\
//!      \x20 - {resource: GET:/orders, grade: error_ratio, count: 0.5}\n",
//!     "rules.yaml",
//! )?;
//! let loaded = sentinel_flow_rules::apply(&sentinel, file)?;
//! assert_eq!(loaded.version.as_deref(), Some("7"));
//! assert_eq!((loaded.count("flow"), loaded.count("degrade")), (1, 1));
//!
//! // Every problem of a bad file, each at its position; nothing changes.
//! let error = sentinel_flow_rules::parse_str(
//!     "flow:\n  - {resource: a, count: -5, grade: fast}\n  - {count: 1}\n",
//!     "rules.yaml",
//! )
//! .unwrap_err();
//! assert_eq!(
//!     error.lines(),
//!     [
//!         "rules.yaml:2:26: flow[0] (a): count must be a finite number >= 0, got -5",
//!         "rules.yaml:2:37: flow[0] (a): grade must be one of qps, concurrency, got \"fast\"",
//!         "rules.yaml:3:5: flow[1]: resource is required",
//!     ]
//! );
//! assert_eq!(sentinel.rule_book().flow.len(), 1);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! To follow a file as it changes, start a [`RuleWatcher`]; to write rules
//! changed through an API back to the file, use its
//! [`store`](WatchHandle::store) (a [`RuleFileStore`]). The format is
//! described in the crate's README, with an annotated example file.
//!
//! A kind of rule an application adds (`sentinel_flow_core::UserKind`)
//! is read and written the same way once its rules are registered on the
//! options ([`LoadOptions::kind`]); see [`UserKinds`].

mod change;
mod error;
pub mod json;
mod load;
mod options;
mod parse;
mod render;
pub mod source;
mod store;
mod user;
mod watch;

pub use change::{KindInfo, RuleChange};
pub use error::{FileError, Position, Problem, RuleRef};
pub use load::{Reloaded, apply, load_file, parse_bytes, parse_reader, parse_str, parse_str_with};
pub use options::{DEFAULT_MAX_DEPTH, DEFAULT_MAX_SIZE, LoadOptions};
pub use parse::RuleFile;
pub use store::{RuleFileStore, StoreError};
pub use user::{UserKinds, UserRules};
pub use watch::{DEFAULT_INTERVAL, MIN_INTERVAL, RuleWatcher, WatchHandle};
