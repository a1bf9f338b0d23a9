//! The `#[sentinel_resource]` attribute for `sentinel-core`.
//!
//! The attribute itself arrives with the entry API it expands to; until then
//! this crate only reserves its place in the workspace so that the layout,
//! lints and CI cover it from the start.
