//! Sentinel's command API (what the Sentinel dashboard calls), the
//! dashboard heartbeat, and a live page of our own, for a `sentinel-core`
//! instance.

mod live;
mod shared;

pub use live::live_page;
