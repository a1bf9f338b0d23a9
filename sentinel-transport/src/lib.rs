//! Sentinel's command API (what the Sentinel dashboard calls), the
//! dashboard heartbeat, and a live page of our own, for a `sentinel-core`
//! instance.
//!
//! ```no_run
//! use std::sync::Arc;
//! use sentinel_core::Sentinel;
//! use sentinel_transport::CommandCenter;
//!
//! # async fn run() -> Result<(), sentinel_transport::StartError> {
//! let sentinel = Arc::new(Sentinel::builder().build());
//! let server = CommandCenter::new(Arc::clone(&sentinel))
//!     .app("orders")
//!     .dashboard("127.0.0.1:8080") // heartbeats every 10 s
//!     .allow_writes(true)          // let the dashboard push rules
//!     .start()?;                   // port 8719, or the next free one
//! println!("http://{}/", server.local_addr());
//! # Ok(()) }
//! ```

mod center;
mod commands;
mod handle;
mod heartbeat;
mod info;
mod json;
mod live;
mod net;
mod security;
mod shared;
mod store;

pub use center::{CommandCenter, DEFAULT_HEARTBEAT_INTERVAL, DEFAULT_MAX_BODY_BYTES, DEFAULT_PORT};
pub use handle::{CommandCenterHandle, StartError};
pub use info::SENTINEL_VERSION;
pub use live::live_page;
