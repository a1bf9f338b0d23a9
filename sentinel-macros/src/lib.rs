//! `#[sentinel_resource]`: guard a function with one line, as Sentinel's
//! `@SentinelResource` does.
//!
//! Each call of the function enters its resource through
//! [`sentinel_flow_core`](https://docs.rs/sentinel-flow-core), and the entry exits when
//! the call ends, however it ends: a normal return, an early `return`, `?`, a
//! panic, or an `async fn`'s future completing or being dropped.
//!
//! ```
//! use sentinel_flow_core::BlockError;
//! use sentinel_flow_macros::sentinel_resource;
//!
//! #[derive(Debug)]
//! enum OrderError {
//!     Blocked(BlockError),
//!     OutOfStock,
//! }
//!
//! impl From<BlockError> for OrderError {
//!     fn from(block: BlockError) -> Self {
//!         OrderError::Blocked(block)
//!     }
//! }
//!
//! /// Resource `orders:create`; a blocked call returns `Err(OrderError::Blocked(..))`,
//! /// and an `Err` counts as an exception of the resource.
//! #[sentinel_resource("orders:create", args(sku))]
//! fn create_order(sku: &str, quantity: u32) -> Result<u64, OrderError> {
//!     if quantity > 10 {
//!         return Err(OrderError::OutOfStock);
//!     }
//!     Ok(42)
//! }
//!
//! /// Resource `<module path>::price`; a blocked call gets the price from
//! /// `cached_price`, with the same arguments and the `BlockError`.
//! #[sentinel_resource(block_handler = cached_price)]
//! fn price(sku: &str) -> u64 {
//!     1_000
//! }
//!
//! fn cached_price(_sku: &str, _block: BlockError) -> u64 {
//!     990
//! }
//!
//! assert_eq!(create_order("sku-1", 1).unwrap(), 42);
//! assert!(matches!(create_order("sku-1", 11), Err(OrderError::OutOfStock)));
//! assert_eq!(price("sku-1"), 1_000);
//! let node = sentinel_flow_core::global().resource_node("orders:create").unwrap();
//! assert_eq!(node.stats().total_exception(sentinel_flow_core::global().now_ms()), 1);
//! ```
//!
//! # Arguments
//!
//! All are optional, in any order, each at most once.
//!
//! | argument | meaning |
//! | --- | --- |
//! | `"name"` or `name = "name"` | the resource's name; by default the function's path, `concat!(module_path!(), "::", "fn_name")` |
//! | `entry_type = inbound` / `outbound` | the entry's [`EntryType`](https://docs.rs/sentinel-flow-core/latest/sentinel_flow_core/enum.EntryType.html) (default outbound) |
//! | `batch_count = 2` | permits each call takes (default 1) |
//! | `args(user_id, sku)` | parameters passed as the entry's arguments, for hot-parameter rules and slots |
//! | `block_handler = path::to::fn` | called instead of the body when the call is blocked |
//! | `fallback = path::to::fn` | called when the body returns `Err` |
//! | `exceptions_to_ignore(Pattern, ...)` | errors that are neither recorded nor handed to the fallback |
//! | `sentinel = path::to::fn` | a `fn() -> &'static Sentinel` for the instance to enter (default [`global`](https://docs.rs/sentinel-flow-core/latest/sentinel_flow_core/fn.global.html)) |
//! | `crate = path` | where the core's items are; by default the `sentinel-flow` or `sentinel-flow-core` dependency of the calling package, under the name its `Cargo.toml` gives it |
//!
//! # What a call does
//!
//! - **The resource** is looked up once, on the first call, and kept in a
//!   `static` inside the function: later calls go straight to the slot chain.
//!   A generic function has one resource for all its instantiations. Methods
//!   are named by module and method name, without the type: name them when
//!   two types of one module have methods of the same name.
//! - **Blocked**: with `block_handler`, the handler is called with the
//!   function's arguments (`self` first, for a method: write
//!   `block_handler = Self::on_block`) plus the
//!   [`BlockError`](https://docs.rs/sentinel-flow-core/latest/sentinel_flow_core/struct.BlockError.html),
//!   and its result is returned. Without one, the function must return
//!   `Result<T, E>` with `E: From<BlockError>`, and the call returns
//!   `Err(E::from(block))`, or hands that error to the `fallback` if there is
//!   one, as Sentinel does. A function that can do neither (it returns no
//!   `Result` and has no `block_handler`) does not compile. The return type
//!   counts as a `Result` when its last path segment is `Result`
//!   (`Result<T, E>`, `io::Result<T>`, `anyhow::Result<T>`).
//! - **Errors**: when the body returns `Err(e)`, the error is recorded on the
//!   entry (an exception of the resource, which error-ratio and error-count
//!   circuit breakers see), then `fallback`, if given, is called with the
//!   arguments plus `e` and its result is returned. The body runs in a
//!   closure that borrows what it only borrows, so the arguments are still
//!   there for the fallback; an argument the body consumes cannot be handed
//!   on, and the compiler says so at `fallback`.
//! - **`exceptions_to_ignore`**: Rust has one error type per function where
//!   Java has exception classes, so each item is a pattern matched against
//!   the error value: `exceptions_to_ignore(MyError::NotFound,
//!   MyError::Invalid(..))`. An error it matches is returned as it is: not
//!   recorded and not handed to the fallback. A lone name (`NotFound`) is
//!   read as a unit variant or struct, never as a binding that would match
//!   everything.
//! - **Panics** exit the entry and count as an error of the call.
//! - **`async fn`**: the entry is held across `.await`s and exits when the
//!   future completes or is dropped (a dropped future records no error).
//!   The handler and fallback of an `async fn` are `async fn`s, awaited.
//!   With sentinel-flow-core's `tokio` feature the entry is made with
//!   `enter_async`, so a rate limiter's queue is waited on with a tokio
//!   timer (the future must then run on a tokio runtime); without it, with
//!   `enter`, which sleeps the thread for a queued entry.
//! - The function's signature, attributes, docs and visibility are unchanged,
//!   and no bounds are added to its generics. `args(...)` takes integers,
//!   `bool`, `&str`, `String`, `Arc<str>`, references to them, and any
//!   `T: Clone` with `From<T> for ParamValue`.
//!
//! # An instance of its own
//!
//! Tests enter a [`Sentinel`](https://docs.rs/sentinel-flow-core/latest/sentinel_flow_core/struct.Sentinel.html)
//! of their own, on a manual clock:
//!
//! ```
//! use once_cell::sync::Lazy;
//! use sentinel_flow_core::flow::FlowRule;
//! use sentinel_flow_core::{BlockError, ManualClock, Sentinel};
//! use sentinel_flow_macros::sentinel_resource;
//!
//! static CLOCK: Lazy<ManualClock> = Lazy::new(|| ManualClock::new(1_700_000_000_000));
//! static SENTINEL: Lazy<Sentinel> =
//!     Lazy::new(|| Sentinel::builder().clock(CLOCK.clone()).build());
//!
//! fn sentinel() -> &'static Sentinel {
//!     &SENTINEL
//! }
//!
//! #[sentinel_resource("health", sentinel = sentinel)]
//! fn health() -> Result<&'static str, BlockError> {
//!     Ok("ok")
//! }
//!
//! assert_eq!(health().unwrap(), "ok");
//! sentinel().flow_rules().load(vec![FlowRule::new("health", 0.0)]).unwrap();
//! assert!(health().is_err());
//! let stats = sentinel().resource_node("health").unwrap().stats();
//! assert_eq!(stats.total_pass(sentinel().now_ms()), 1);
//! assert_eq!(stats.total_block(sentinel().now_ms()), 1);
//! ```

mod attr;
mod expand;

use proc_macro::TokenStream;

/// Guards a function with a Sentinel resource. See the [crate] docs for the
/// arguments and what a call does.
///
/// ```
/// # use sentinel_flow_core::BlockError;
/// #[sentinel_flow_macros::sentinel_resource(name = "inventory:reserve", batch_count = 2)]
/// async fn reserve(sku: &str) -> Result<u32, BlockError> {
///     Ok(sku.len() as u32)
/// }
/// ```
#[proc_macro_attribute]
pub fn sentinel_resource(args: TokenStream, item: TokenStream) -> TokenStream {
    expand::sentinel_resource(args.into(), item.into()).into()
}
