//! Sentinel's command API (what the Sentinel dashboard calls), the
//! dashboard heartbeat, and a live page of our own, for a `sentinel-flow-core`
//! instance.
//!
//! ```
//! use std::sync::Arc;
//! use sentinel_flow_core::Sentinel;
//! use sentinel_flow_transport::CommandCenter;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let sentinel = Arc::new(Sentinel::builder().build()); // or sentinel_flow_core::global()
//! let server = CommandCenter::new(Arc::clone(&sentinel))
//!     .port(0)                 // default 8719, or the next free one
//!     // .dashboard("10.0.0.5:8080")   heartbeats every 10 s
//!     // .allow_writes(true)           let the dashboard push rules
//!     .start()?;               // on the current tokio runtime
//! println!("live page and commands at http://{}/", server.local_addr());
//! assert!(server.local_addr().ip().is_loopback()); // 127.0.0.1 by default
//! drop(server);                // stops the server (and the heartbeat)
//! # Ok(()) }
//! ```
//!
//! See the crate's README for the commands, the rule JSON, the heartbeat
//! and the security settings.

mod center;
mod commands;
mod handle;
mod heartbeat;
mod info;
mod live;
mod net;
mod security;
mod server;
mod shared;
mod sources;
mod store;

pub use center::{
    CommandCenter, DEFAULT_BODY_READ_TIMEOUT, DEFAULT_HEADER_READ_TIMEOUT,
    DEFAULT_HEARTBEAT_INTERVAL, DEFAULT_MAX_BODY_BYTES, DEFAULT_MAX_CONNECTIONS, DEFAULT_PORT,
};
pub use handle::{CommandCenterHandle, StartError};
pub use info::SENTINEL_VERSION;
pub use live::live_page;
