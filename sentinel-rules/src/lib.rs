//! YAML rule files for `sentinel-core`: schema, validation and hot reload.
//!
//! Rule files arrive with the rule kinds they describe; until then this crate
//! only reserves its place in the workspace so that the layout, lints and CI
//! cover it from the start.
