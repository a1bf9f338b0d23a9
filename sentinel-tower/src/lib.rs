//! Tower middleware that runs each request through a Sentinel slot chain:
//! one [`SentinelLayer`] gives an axum, tonic or hyper service flow
//! control, circuit breaking, system protection and origin rules.
//!
//! ```no_run
//! use axum::{Router, routing::get};
//! use sentinel_flow_core::flow::FlowRule;
//! use sentinel_flow_tower::SentinelLayer;
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! sentinel_flow_core::global()
//!     .flow_rules()
//!     .load(vec![FlowRule::new("GET:/orders/{id}", 100.0)])?;
//! let app = Router::new()
//!     .route("/orders/{id}", get(|| async { "an order" }))
//!     .layer(SentinelLayer::new().origin_header("x-caller"));
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:3000").await?;
//! axum::serve(listener, app).await?;
//! # Ok(())
//! # }
//! ```
//!
//! A blocked request never reaches the inner service: HTTP clients get
//! `429 Too Many Requests` with `blocked by flow` (or `degrade`, `system`,
//! `authority`, `param_flow`; JSON to a client that accepts it), a
//! `Retry-After` header where waiting helps (see [`retry_after`]) and, for
//! a QPS flow rule, the IETF `RateLimit-Policy` / `RateLimit` headers
//! (see [`SentinelLayer::rate_limit_headers_on_admitted`] for the figures);
//! gRPC clients get `RESOURCE_EXHAUSTED`, or `UNAVAILABLE` for an open
//! breaker.
//!
//! The entry exits at the response head for a body of known length, at
//! the end of a streamed body (whose gRPC trailers are read), when the
//! inner service fails, or when the response future or body is dropped
//! (the client went away): concurrency never leaks. An admitted request
//! with a buffered body costs no allocation: [`ResponseFuture`] is a named
//! future, and [`ResponseBody`] around a buffered body is the body itself
//! (a stream boxes itself with its entry). Inside an axum `Router`, [`SentinelLayer::axum_body`]
//! hands out axum's `Body`, so axum does not box ours.

mod block;
mod body;
mod buffer;
mod cache;
mod config;
mod future;
pub mod gateway;
mod headers;
mod key;
mod layer;
mod name;
mod route;
mod segment;
mod service;

pub use block::retry_after;
#[cfg(feature = "axum")]
pub use body::AxumBody;
pub use body::{BodyKind, ResponseBody, WrappedBody};
pub use cache::{DEFAULT_MAX_RESOURCE_NAMES, OVERFLOW_RESOURCE};
pub use future::ResponseFuture;
pub use layer::SentinelLayer;
pub use name::clean_path;
pub use service::SentinelService;
