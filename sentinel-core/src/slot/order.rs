//! Orders of the built-in slots (smaller runs first), as in Sentinel.

/// Finds the entry's node in its context (the invocation tree).
pub const NODE_SELECTOR: i32 = -10_000;
/// Finds the resource node and the origin node.
pub const CLUSTER_BUILDER: i32 = -9_000;
/// Counts passes and blocks of the checks that follow it.
pub const STATISTIC: i32 = -7_000;
/// Origin white and black lists.
pub const AUTHORITY: i32 = -6_000;
/// System adaptive protection.
pub const SYSTEM: i32 = -5_000;
/// Hot-parameter rules.
pub const PARAM_FLOW: i32 = -3_000;
/// Flow rules.
pub const FLOW: i32 = -2_000;
/// Circuit breakers.
pub const DEGRADE: i32 = -1_000;
/// Adaptive concurrency limits (after the other kinds' checks but the
/// gateway's: a call they refuse takes no place in flight, and one the
/// gateway refuses gives its place back).
pub const ADAPTIVE: i32 = -500;
/// Gateway rules: after the other kinds' checks (Sentinel's gateway flow
/// slot runs before its hot-parameter slot; here the kind comes after the
/// kinds an instance without gateway rules uses, so that their entries
/// pass over it with no test at all).
pub const GATEWAY: i32 = -400;
/// API definitions (nothing to check: last).
pub const API_DEFINITIONS: i32 = -250;
