//! Every argument form, on free functions.
#![deny(warnings)]

use sentinel_flow_core::{BlockError, Sentinel};
use sentinel_flow_macros::sentinel_resource;

#[derive(Debug)]
pub enum Error {
    Blocked,
    NotFound,
    Invalid(u32),
}

impl From<BlockError> for Error {
    fn from(_: BlockError) -> Self {
        Error::Blocked
    }
}

fn instance() -> &'static Sentinel {
    sentinel_flow_core::global()
}

#[sentinel_resource]
fn bare() -> Result<(), Error> {
    Ok(())
}

#[sentinel_resource("by-string")]
fn by_string() -> Result<(), Error> {
    Ok(())
}

#[sentinel_resource("first", entry_type = outbound)]
fn string_then_more() -> Result<(), Error> {
    Ok(())
}

/// Docs stay.
#[sentinel_resource(
    name = "everything",
    entry_type = inbound,
    batch_count = 2,
    args(user_id, sku),
    block_handler = on_block,
    fallback = on_error,
    exceptions_to_ignore(Error::NotFound, Error::Invalid(0..=9) | Error::Blocked),
    sentinel = instance,
)]
pub fn everything(user_id: u64, sku: &str) -> Result<String, Error> {
    Ok(format!("{user_id}{sku}"))
}

fn on_block(user_id: u64, sku: &str, _: BlockError) -> Result<String, Error> {
    Ok(format!("blocked {user_id}{sku}"))
}

fn on_error(user_id: u64, sku: &str, _: Error) -> Result<String, Error> {
    Ok(format!("failed {user_id}{sku}"))
}

/// `io::Result` reads as a `Result`; `io::Error` has no `From<BlockError>`,
/// so a handler answers blocks.
#[sentinel_resource(block_handler = io_blocked)]
fn io_result(path: &str) -> std::io::Result<usize> {
    if path.is_empty() {
        return Err(std::io::Error::other("empty"));
    }
    Ok(path.len())
}

fn io_blocked(_: &str, block: BlockError) -> std::io::Result<usize> {
    Err(std::io::Error::other(block))
}

fn main() {
    bare().unwrap();
    by_string().unwrap();
    string_then_more().unwrap();
    everything(1, "a").unwrap();
    let _ = io_result("x");
}
