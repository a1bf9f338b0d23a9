//! The contract every built-in rule kind keeps, run for each kind from one
//! table: a row per kind ([`flow`], [`degrade`], [`param_flow`],
//! [`authority`], [`system`], [`adaptive`], [`gateway`]) gives a valid rule, a way to make it block,
//! the entry it checks, invalid rules with the field each error names, and
//! one error's exact text; each case below runs on every row.
//!
//! The cases: a loaded rule blocks and names itself; a bad list changes
//! nothing (the rules in force keep their state and still block) and its
//! errors name the kind, place, resource and field, every one in order; an
//! unchanged rule keeps its state across a load; listeners hear each load of
//! their kind and no refused one, nor another kind's; an empty list stops
//! every check; and a resource no longer named stops being checked (a
//! system rule, which names no resource, guards every inbound entry).

use sentinel_flow_core::adaptive::{AdaptiveAlgorithm, AdaptiveRule};
use sentinel_flow_core::authority::{AuthorityRule, AuthorityStrategy};
use sentinel_flow_core::degrade::{DegradeGrade, DegradeRule};
use sentinel_flow_core::flow::{ControlBehavior, FlowRule, FlowStrategy};
use sentinel_flow_core::gateway::{GatewayParamItem, GatewayRule, ValueMatch};
use sentinel_flow_core::param_flow::{
    ParamControlBehavior, ParamFlowGrade, ParamFlowItem, ParamFlowRule,
};
use sentinel_flow_core::system::SystemRule;
use sentinel_flow_core::{BlockError, BlockKind, EntryType, ManualClock, Sentinel};

use crate::support::{Kind, fail, instance, load, refusals, rule_of};

/// One built-in kind, as the contract needs it.
struct Row<R> {
    /// The kind's name in errors (`RuleError::kind`).
    name: &'static str,
    /// What a block by this kind reports.
    block_kind: BlockKind,
    /// Whether a rule guards the resource it names only (a system rule
    /// guards every inbound entry).
    by_resource: bool,
    /// A valid rule guarding `resource`.
    rule: fn(&str) -> R,
    /// Makes the next [`enter`](Row::enter) of `resource`, at the same
    /// instant, refused by [`rule`](Row::rule) (an entry that spends its
    /// count, a call that opens its breaker, or nothing for a rule that
    /// refuses the entry's caller outright).
    arm: fn(&ManualClock, &Sentinel, &str),
    /// One entry of `resource` as the kind checks it (its origin, argument
    /// or entry type), exited at once.
    enter: fn(&Sentinel, &str) -> Result<(), BlockError>,
    /// Invalid rules, each with the field its error names.
    invalid: fn() -> Vec<(&'static str, R)>,
    /// A rule refused alone, and the text of the refusal.
    message: (fn() -> R, &'static str),
}

/// Runs every case on `$row`, one test per case.
macro_rules! cases {
    ($row:expr) => {
        #[test]
        fn a_loaded_rule_blocks_and_names_itself() {
            super::a_loaded_rule_blocks_and_names_itself(&$row);
        }

        #[test]
        fn a_bad_list_changes_nothing_and_names_the_field() {
            super::a_bad_list_changes_nothing_and_names_the_field(&$row);
        }

        #[test]
        fn every_error_of_a_list_is_reported_in_order() {
            super::every_error_of_a_list_is_reported_in_order(&$row);
        }

        #[test]
        fn a_refusal_reads_as_the_rows_message() {
            super::a_refusal_reads_as_the_rows_message(&$row);
        }

        #[test]
        fn an_unchanged_rule_keeps_its_state_across_a_load() {
            super::an_unchanged_rule_keeps_its_state_across_a_load(&$row);
        }

        #[test]
        fn listeners_hear_each_load_of_their_kind_and_no_refused_one() {
            super::listeners_hear_each_load_of_their_kind_and_no_refused_one(&$row);
        }

        #[test]
        fn an_empty_list_stops_every_check() {
            super::an_empty_list_stops_every_check(&$row);
        }

        #[test]
        fn a_resource_no_longer_named_stops_being_checked() {
            super::a_resource_no_longer_named_stops_being_checked(&$row);
        }
    };
}

mod flow {
    cases!(super::flow());
}

mod degrade {
    cases!(super::degrade());
}

mod param_flow {
    cases!(super::param_flow());
}

mod gateway {
    cases!(super::gateway());
}

mod authority {
    cases!(super::authority());
}

mod system {
    cases!(super::system());
}

mod adaptive {
    cases!(super::adaptive());
}

// ---- the table ----

fn flow() -> Row<FlowRule> {
    Row {
        name: "flow",
        block_kind: BlockKind::Flow,
        by_resource: true,
        rule: |resource| FlowRule::new(resource, 1.0),
        arm: |_, sentinel, resource| plain(sentinel, resource).expect("the one pass"),
        enter: plain,
        invalid: || {
            let base = || FlowRule::new("r", 1.0);
            vec![
                ("count", FlowRule::new("r", -1.0)),
                ("count", FlowRule::new("r", f64::NAN)),
                (
                    "ref_resource",
                    FlowRule {
                        strategy: FlowStrategy::Relate,
                        ..base()
                    },
                ),
                (
                    "ref_resource",
                    FlowRule {
                        strategy: FlowStrategy::Chain,
                        ..base()
                    },
                ),
                (
                    "limit_app",
                    FlowRule {
                        limit_app: String::new(),
                        ..base()
                    },
                ),
                (
                    "limit_app",
                    FlowRule {
                        limit_app: "a,b".into(),
                        ..base()
                    },
                ),
                (
                    "warm_up_period_sec",
                    FlowRule {
                        control_behavior: ControlBehavior::WarmUp,
                        warm_up_period_sec: 0,
                        ..base()
                    },
                ),
                (
                    "warm_up_cold_factor",
                    FlowRule {
                        control_behavior: ControlBehavior::WarmUp,
                        warm_up_cold_factor: 1,
                        ..base()
                    },
                ),
                (
                    "stat_interval_ms",
                    FlowRule {
                        stat_interval_ms: 0,
                        ..base()
                    },
                ),
            ]
        },
        message: (
            || FlowRule::new("r", -1.0),
            "flow[0] (r): count must be a finite number >= 0, got -1",
        ),
    }
}

fn degrade() -> Row<DegradeRule> {
    Row {
        name: "degrade",
        block_kind: BlockKind::Degrade,
        by_resource: true,
        // Opens at the first error, for 10 s.
        rule: |resource| DegradeRule {
            min_request_amount: 1,
            time_window_sec: 10,
            ..DegradeRule::new(resource, DegradeGrade::ErrorCount, 0.0)
        },
        arm: |_, sentinel, resource| fail(sentinel, resource),
        enter: plain,
        invalid: || {
            let base = || DegradeRule::new("r", DegradeGrade::ErrorCount, 1.0);
            vec![
                (
                    "count",
                    DegradeRule::new("r", DegradeGrade::ErrorCount, -1.0),
                ),
                (
                    "count",
                    DegradeRule::new("r", DegradeGrade::SlowRequestRatio, -0.5),
                ),
                (
                    "count",
                    DegradeRule::new("r", DegradeGrade::ErrorRatio, 1.5),
                ),
                (
                    "count",
                    DegradeRule::new("r", DegradeGrade::ErrorCount, f64::NAN),
                ),
                (
                    "time_window_sec",
                    DegradeRule {
                        time_window_sec: 0,
                        ..base()
                    },
                ),
                (
                    "probe_num",
                    DegradeRule {
                        probe_num: 0,
                        ..base()
                    },
                ),
                (
                    "stat_interval_ms",
                    DegradeRule {
                        stat_interval_ms: 0,
                        ..base()
                    },
                ),
                (
                    "min_request_amount",
                    DegradeRule {
                        min_request_amount: 0,
                        ..base()
                    },
                ),
                (
                    "slow_ratio_threshold",
                    DegradeRule {
                        slow_ratio_threshold: 1.5,
                        ..DegradeRule::new("r", DegradeGrade::SlowRequestRatio, 100.0)
                    },
                ),
                (
                    "resource",
                    DegradeRule {
                        resource: String::new(),
                        ..base()
                    },
                ),
            ]
        },
        message: (
            || DegradeRule {
                probe_num: 0,
                ..DegradeRule::new("r", DegradeGrade::ErrorCount, 1.0)
            },
            "degrade[0] (r): probe_num must be in 1..=32767, got 0",
        ),
    }
}

fn param_flow() -> Row<ParamFlowRule> {
    Row {
        name: "param_flow",
        block_kind: BlockKind::ParamFlow,
        by_resource: true,
        // One token a second for each value of the first argument.
        rule: |resource| ParamFlowRule::new(resource, 0, 1.0),
        arm: |_, sentinel, resource| with_arg(sentinel, resource).expect("the value's token"),
        enter: with_arg,
        invalid: || {
            let base = || ParamFlowRule::new("r", 0, 1.0);
            let items = |list: Vec<ParamFlowItem>| ParamFlowRule {
                param_flow_item_list: list,
                ..base()
            };
            vec![
                ("count", ParamFlowRule::new("r", 0, -1.0)),
                ("count", ParamFlowRule::new("r", 0, f64::NAN)),
                ("resource", ParamFlowRule::new(" ", 0, 1.0)),
                (
                    "duration_in_sec",
                    ParamFlowRule {
                        duration_in_sec: 0,
                        ..base()
                    },
                ),
                (
                    "control_behavior",
                    ParamFlowRule {
                        grade: ParamFlowGrade::Concurrency,
                        control_behavior: ParamControlBehavior::RateLimiter,
                        ..base()
                    },
                ),
                (
                    "param_flow_item_list",
                    items(vec![
                        ParamFlowItem::new("x", 1.0),
                        ParamFlowItem::new("x", 2.0),
                    ]),
                ),
                (
                    "param_flow_item_list",
                    items(vec![
                        ParamFlowItem::new(7u8, 1.0),
                        ParamFlowItem::new(7i64, 1.0),
                    ]),
                ),
                (
                    "param_flow_item_list",
                    items(vec![ParamFlowItem::new("x", -1.0)]),
                ),
                (
                    "capacity",
                    ParamFlowRule {
                        capacity: Some(0),
                        ..base()
                    },
                ),
            ]
        },
        message: (
            || ParamFlowRule {
                duration_in_sec: 0,
                ..ParamFlowRule::new("r", 0, 1.0)
            },
            "param_flow[0] (r): duration_in_sec must be > 0",
        ),
    }
}

fn gateway() -> Row<GatewayRule> {
    Row {
        name: "gateway",
        block_kind: BlockKind::Gateway,
        by_resource: true,
        // One request a second for each value of a header (the first
        // argument of the resource's entries).
        rule: |resource| {
            GatewayRule::route(resource, 1.0).param_item(GatewayParamItem::header("k"))
        },
        arm: |_, sentinel, resource| with_arg(sentinel, resource).expect("the value's token"),
        enter: with_arg,
        invalid: || {
            let base = || GatewayRule::route("r", 1.0);
            vec![
                ("count", GatewayRule::route("r", -1.0)),
                ("resource", GatewayRule::route(" ", 1.0)),
                (
                    "interval_sec",
                    GatewayRule {
                        interval_sec: 0,
                        ..base()
                    },
                ),
                (
                    "param_item.pattern",
                    base()
                        .param_item(GatewayParamItem::header("k").pattern("(", ValueMatch::Regex)),
                ),
                (
                    "param_item.field_name",
                    base().param_item(GatewayParamItem::header("not a header")),
                ),
            ]
        },
        message: (
            || GatewayRule {
                interval_sec: 0,
                ..GatewayRule::route("r", 1.0)
            },
            "gateway[0] (r): interval_sec must be > 0",
        ),
    }
}

fn authority() -> Row<AuthorityRule> {
    Row {
        name: "authority",
        block_kind: BlockKind::Authority,
        by_resource: true,
        // Only caller "a"; the contract's entries come from "b".
        rule: |resource| AuthorityRule::new(resource, AuthorityStrategy::White, ["a"]),
        arm: |_, _, _| {},
        enter: |sentinel, resource| {
            sentinel
                .entry_builder(resource)
                .origin("b")
                .enter()
                .map(drop)
        },
        invalid: || {
            vec![
                (
                    "resource",
                    AuthorityRule::new("", AuthorityStrategy::White, ["a"]),
                ),
                (
                    "limit_app",
                    AuthorityRule::new("s", AuthorityStrategy::White, ["x,y"]),
                ),
                (
                    "limit_app",
                    AuthorityRule::new("t", AuthorityStrategy::White, Vec::<String>::new()),
                ),
            ]
        },
        message: (
            || AuthorityRule::new("r", AuthorityStrategy::Black, Vec::<String>::new()),
            "authority[0] (r): limit_app must name at least one origin",
        ),
    }
}

fn system() -> Row<SystemRule> {
    Row {
        name: "system",
        block_kind: BlockKind::System,
        by_resource: false,
        // One inbound pass a second, whatever the resource.
        rule: |_| SystemRule {
            qps: Some(1.0),
            ..SystemRule::default()
        },
        arm: |_, sentinel, resource| inbound(sentinel, resource).expect("the one pass"),
        enter: inbound,
        invalid: || {
            vec![
                (
                    "highest_cpu_usage",
                    SystemRule {
                        highest_cpu_usage: Some(1.2),
                        ..SystemRule::default()
                    },
                ),
                ("highest_system_load", SystemRule::default()),
                (
                    "qps",
                    SystemRule {
                        qps: Some(-1.0),
                        ..SystemRule::default()
                    },
                ),
            ]
        },
        message: (
            || SystemRule {
                qps: Some(f64::NAN),
                ..SystemRule::default()
            },
            "system[0] (): qps must be a finite number >= 0, got NaN",
        ),
    }
}

fn adaptive() -> Row<AdaptiveRule> {
    Row {
        name: "adaptive",
        block_kind: BlockKind::Adaptive,
        by_resource: true,
        // A limit of one call in flight, until a window moves it.
        rule: |resource| AdaptiveRule {
            initial_limit: 1,
            min_limit: 1,
            ..AdaptiveRule::new(resource, AdaptiveAlgorithm::vegas())
        },
        // One call that never exits holds the one place.
        arm: |_, sentinel, resource| {
            std::mem::forget(sentinel.entry(resource).expect("the one place"))
        },
        enter: plain,
        invalid: || {
            let base = || AdaptiveRule::new("r", AdaptiveAlgorithm::aimd());
            vec![
                (
                    "resource",
                    AdaptiveRule::new(" ", AdaptiveAlgorithm::aimd()),
                ),
                (
                    "limit_app",
                    AdaptiveRule {
                        limit_app: "a,b".into(),
                        ..base()
                    },
                ),
                (
                    "backoff_ratio",
                    AdaptiveRule::new(
                        "r",
                        AdaptiveAlgorithm::Aimd {
                            backoff_ratio: 0.4,
                            timeout_ms: 5_000,
                        },
                    ),
                ),
                (
                    "smoothing",
                    AdaptiveRule::new(
                        "r",
                        AdaptiveAlgorithm::Gradient2 {
                            smoothing: 0.0,
                            rtt_tolerance: 1.5,
                            long_window: 600,
                            queue_size: 4,
                        },
                    ),
                ),
                (
                    "beta",
                    AdaptiveRule::new(
                        "r",
                        AdaptiveAlgorithm::Vegas {
                            alpha: Some(6),
                            beta: Some(3),
                            smoothing: 1.0,
                            probe_multiplier: 30,
                        },
                    ),
                ),
                (
                    "max_limit",
                    AdaptiveRule {
                        max_limit: 10,
                        min_limit: 11,
                        initial_limit: 11,
                        ..base()
                    },
                ),
                (
                    "initial_limit",
                    AdaptiveRule {
                        initial_limit: 0,
                        ..base()
                    },
                ),
                (
                    "window_ms",
                    AdaptiveRule {
                        window_ms: 99,
                        ..base()
                    },
                ),
                (
                    "min_samples",
                    AdaptiveRule {
                        min_samples: 0,
                        ..base()
                    },
                ),
            ]
        },
        message: (
            || AdaptiveRule {
                max_limit: 2_000_000,
                ..AdaptiveRule::new("r", AdaptiveAlgorithm::vegas())
            },
            "adaptive[0] (r): max_limit must be <= 1000000, got 2000000",
        ),
    }
}

fn plain(sentinel: &Sentinel, resource: &str) -> Result<(), BlockError> {
    sentinel.entry(resource).map(drop)
}

fn with_arg(sentinel: &Sentinel, resource: &str) -> Result<(), BlockError> {
    sentinel
        .entry_builder(resource)
        .args(&["a".into()])
        .enter()
        .map(drop)
}

fn inbound(sentinel: &Sentinel, resource: &str) -> Result<(), BlockError> {
    sentinel
        .entry_builder(resource)
        .entry_type(EntryType::Inbound)
        .enter()
        .map(drop)
}

// ---- the cases ----

/// The row's rule on "r", loaded and armed: the next entry of "r" is
/// refused by it.
fn blocking<R: Kind + PartialEq>(row: &Row<R>) -> (ManualClock, Sentinel) {
    let (clock, sentinel) = instance();
    load(&sentinel, [(row.rule)("r")]);
    (row.arm)(&clock, &sentinel, "r");
    (clock, sentinel)
}

/// Whether the next entry of `resource` is refused by this kind.
fn blocked<R: Kind>(row: &Row<R>, sentinel: &Sentinel, resource: &str) -> bool {
    match (row.enter)(sentinel, resource) {
        Ok(()) => false,
        Err(err) => {
            assert_eq!(err.kind(), row.block_kind, "{}: {err}", row.name);
            true
        }
    }
}

fn a_loaded_rule_blocks_and_names_itself<R: Kind + PartialEq>(row: &Row<R>) {
    let (clock, sentinel) = instance();
    let rule = (row.rule)("r");
    load(&sentinel, [rule.clone()]);
    (row.arm)(&clock, &sentinel, "r");
    let err = (row.enter)(&sentinel, "r").expect_err("armed, the rule refuses");
    assert_eq!(err.kind(), row.block_kind, "{err}");
    assert_eq!(rule_of::<R>(&err), &rule, "{err}");
    assert_eq!(R::manager(&sentinel).rules(), vec![rule]);
}

fn a_bad_list_changes_nothing_and_names_the_field<R: Kind + PartialEq>(row: &Row<R>) {
    let (_clock, sentinel) = blocking(row);
    let in_force = vec![(row.rule)("r")];
    assert!(blocked(row, &sentinel, "r"));
    let cases = (row.invalid)();
    assert!(
        !cases.is_empty(),
        "{}: no invalid rule in the row",
        row.name
    );
    for (field, bad) in cases {
        // A good rule first that would lift the limit if the list went in.
        let errors = R::manager(&sentinel)
            .load(vec![(row.rule)("fresh"), bad.clone()])
            .expect_err(field);
        let [error] = errors.errors() else {
            panic!("{}: one error for {bad:?}: {errors}", row.name);
        };
        assert_eq!(
            (error.kind, error.index, error.field),
            (row.name, 1, field),
            "{bad:?}: {error}"
        );
        assert_eq!(error.resource, bad.resource(), "{error}");
        let shown = error.to_string();
        let start = format!("{}[1] ({}): {field} ", row.name, bad.resource());
        assert!(shown.starts_with(&start), "{shown}");
        assert_eq!(R::manager(&sentinel).rules(), in_force, "after {field}");
        // The rule in force kept its state: still armed, still refusing.
        assert!(blocked(row, &sentinel, "r"), "after {field}");
    }
}

fn every_error_of_a_list_is_reported_in_order<R: Kind + PartialEq>(row: &Row<R>) {
    let (clock, sentinel) = instance();
    let invalid = (row.invalid)();
    let ((first_field, first), (last_field, last)) = (&invalid[0], &invalid[invalid.len() - 1]);
    let errors = R::manager(&sentinel)
        .load(vec![first.clone(), (row.rule)("r"), last.clone()])
        .unwrap_err();
    assert_eq!(
        refusals(&errors),
        [(row.name, 0, *first_field), (row.name, 2, *last_field)]
    );
    let shown = errors.to_string();
    let (head, tail) = (
        format!(
            "2 invalid rule(s): {}[0] ({}): {first_field} ",
            row.name,
            first.resource()
        ),
        format!("; {}[2] ({}): {last_field} ", row.name, last.resource()),
    );
    assert!(shown.starts_with(&head), "{shown}");
    assert!(shown.contains(&tail), "{shown}");
    assert!(R::manager(&sentinel).rules().is_empty());
    // The refused list's good rule is not in force.
    (row.arm)(&clock, &sentinel, "r");
    assert!(!blocked(row, &sentinel, "r"));
}

fn a_refusal_reads_as_the_rows_message<R: Kind + PartialEq>(row: &Row<R>) {
    let (_clock, sentinel) = instance();
    let (bad, text) = row.message;
    let errors = R::manager(&sentinel).load(vec![bad()]).unwrap_err();
    assert_eq!(errors.to_string(), format!("1 invalid rule(s): {text}"));
}

fn an_unchanged_rule_keeps_its_state_across_a_load<R: Kind + PartialEq>(row: &Row<R>) {
    let (_clock, sentinel) = blocking(row);
    assert!(blocked(row, &sentinel, "r"));
    // The same list again, then the same rule beside a new one.
    load(&sentinel, [(row.rule)("r")]);
    assert!(blocked(row, &sentinel, "r"), "after the same list");
    let both = vec![(row.rule)("elsewhere"), (row.rule)("r")];
    load(&sentinel, both.clone());
    assert_eq!(R::manager(&sentinel).rules(), both);
    assert!(blocked(row, &sentinel, "r"), "beside a new rule");
}

fn listeners_hear_each_load_of_their_kind_and_no_refused_one<R: Kind + PartialEq>(row: &Row<R>) {
    let (_clock, sentinel) = instance();
    let heard: std::sync::Arc<parking_lot::Mutex<Vec<Vec<R>>>> = Default::default();
    let log = std::sync::Arc::clone(&heard);
    R::manager(&sentinel).on_change(move |rules| log.lock().push(rules.to_vec()));

    let first = vec![(row.rule)("r"), (row.rule)("s")];
    R::manager(&sentinel).load(first.clone()).unwrap();
    let (_, bad) = (row.invalid)().remove(0);
    assert!(R::manager(&sentinel).load(vec![bad]).is_err());
    load_another_kind(&sentinel, row.name);
    assert_eq!(R::manager(&sentinel).rules(), first, "another kind's load");
    R::manager(&sentinel).load(vec![]).unwrap();

    assert_eq!(*heard.lock(), [first, vec![]]);
}

/// Loads one rule of a kind other than `name`.
fn load_another_kind(sentinel: &Sentinel, name: &str) {
    if name == "flow" {
        load(
            sentinel,
            [AuthorityRule::new("r", AuthorityStrategy::Black, ["x"])],
        );
    } else {
        load(sentinel, [FlowRule::new("r", 100.0)]);
    }
}

fn an_empty_list_stops_every_check<R: Kind + PartialEq>(row: &Row<R>) {
    let (_clock, sentinel) = blocking(row);
    assert!(blocked(row, &sentinel, "r"));
    R::manager(&sentinel).load(vec![]).unwrap();
    assert!(R::manager(&sentinel).rules().is_empty());
    for i in 0..5 {
        assert!(!blocked(row, &sentinel, "r"), "no rule, no limit ({i})");
    }
}

fn a_resource_no_longer_named_stops_being_checked<R: Kind + PartialEq>(row: &Row<R>) {
    let (clock, sentinel) = blocking(row);
    assert!(blocked(row, &sentinel, "r"));
    load(&sentinel, [(row.rule)("s")]);
    assert_eq!(
        !blocked(row, &sentinel, "r"),
        row.by_resource,
        "{}: an entry of r after a rule on s alone",
        row.name
    );
    // The resource now named is checked (a system rule, spent on r's
    // entry, refuses s's at once).
    if row.by_resource {
        (row.arm)(&clock, &sentinel, "s");
    }
    assert!(blocked(row, &sentinel, "s"));
}
