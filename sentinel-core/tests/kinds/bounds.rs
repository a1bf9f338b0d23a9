//! Bounded cost for any rule: every size-like field has a documented bound
//! and a value past it is refused with the field and the rule's place; the
//! rules in force fit the instance's rule memory budget, a load past it is
//! refused whole with the figures; and no rule value, however extreme,
//! makes a load or an entry overflow or panic.

use std::time::Duration;

use sentinel_flow_core::authority::{AuthorityRule, AuthorityStrategy, MAX_AUTHORITY_ORIGINS};
use sentinel_flow_core::degrade::{
    DegradeGrade, DegradeRule, MAX_ERROR_COUNT, MAX_MIN_REQUEST_AMOUNT, MAX_SLOW_RT_MS,
    MAX_TIME_WINDOW_SEC,
};
use sentinel_flow_core::flow::{
    ClusterFlowConfig, ControlBehavior, FlowGrade, FlowRule, MAX_QUEUEING_TIME_MS,
    MAX_STAT_INTERVAL_MS, MAX_STAT_SAMPLE_COUNT, MAX_WARM_UP_COLD_FACTOR, MAX_WARM_UP_PERIOD_SEC,
};
use sentinel_flow_core::param_flow::{
    MAX_PARAM_CAPACITY, MAX_PARAM_COUNT, MAX_PARAM_DURATION_SEC, MAX_PARAM_ITEMS,
    MAX_PARAM_QUEUEING_TIME_MS, PARAM_VALUE_BYTES, ParamControlBehavior, ParamFlowGrade,
    ParamFlowItem, ParamFlowRule,
};
use sentinel_flow_core::system::{MAX_SYSTEM_AVG_RT_MS, MAX_SYSTEM_THREADS, SystemRule};
use sentinel_flow_core::{DEFAULT_RULE_MEMORY_BUDGET, ParamValue, RuleBook, RuleErrors};

use crate::support::{instance, instance_with, load, refusals};

/// The one error of a refused load: `(kind, index, field)`.
fn refused(result: Result<(), RuleErrors>) -> (&'static str, usize, &'static str) {
    let errors = result.expect_err("the load should be refused");
    let found = refusals(&errors);
    assert_eq!(found.len(), 1, "one error expected: {errors}");
    found[0]
}

// ---- the bombs ----

#[test]
fn flow_rule_with_a_window_of_a_hundred_million_buckets_is_refused() {
    let (_, sentinel) = instance();
    load(&sentinel, [FlowRule::new("good", 5.0)]);
    let bomb = FlowRule {
        stat_interval_ms: 100_000_000,
        stat_sample_count: 100_000_000,
        ..FlowRule::new("r", 1.0)
    };
    let errors = sentinel
        .flow_rules()
        .load(vec![FlowRule::new("ok", 1.0), bomb.clone()])
        .unwrap_err();
    assert_eq!(
        refusals(&errors),
        [
            ("flow", 1, "stat_interval_ms"),
            ("flow", 1, "stat_sample_count")
        ]
    );
    assert_eq!(
        errors.errors()[0].to_string(),
        "flow[1] (r): stat_interval_ms must be <= 3600000, got 100000000"
    );
    // Through a rule book too; the last good rules stay.
    let book = RuleBook {
        flow: vec![bomb],
        ..RuleBook::default()
    };
    assert!(sentinel.load_rule_book(book).is_err());
    assert_eq!(sentinel.flow_rules().rules(), [FlowRule::new("good", 5.0)]);
}

#[test]
fn flow_rule_with_u32_max_window_fields_from_json_is_refused() {
    // What a `setRules` with statIntervalMs and statSampleCount of
    // 4294967295 reads into.
    let (_, sentinel) = instance();
    let bomb = FlowRule {
        stat_interval_ms: u64::from(u32::MAX),
        stat_sample_count: u32::MAX,
        ..FlowRule::new("r", 1.0)
    };
    let errors = sentinel.flow_rules().load(vec![bomb]).unwrap_err();
    assert_eq!(
        refusals(&errors),
        [
            ("flow", 0, "stat_interval_ms"),
            ("flow", 0, "stat_sample_count")
        ]
    );
    let cluster = FlowRule {
        cluster_mode: true,
        cluster_config: ClusterFlowConfig {
            flow_id: Some(1),
            window_interval_ms: u64::from(u32::MAX),
            sample_count: u32::MAX,
            ..ClusterFlowConfig::default()
        },
        ..FlowRule::new("r", 1.0)
    };
    let errors = sentinel.flow_rules().load(vec![cluster]).unwrap_err();
    assert_eq!(
        refusals(&errors),
        [
            ("flow", 0, "cluster_config.window_interval_ms"),
            ("flow", 0, "cluster_config.sample_count")
        ]
    );
}

#[test]
fn param_flow_rule_with_a_capacity_of_16777216_is_refused() {
    let (_, sentinel) = instance();
    let bomb = ParamFlowRule {
        capacity: Some(16_777_216),
        ..ParamFlowRule::new("r", 0, 5.0)
    };
    let errors = sentinel.param_flow_rules().load(vec![bomb]).unwrap_err();
    assert_eq!(refusals(&errors), [("param_flow", 0, "capacity")]);
    assert_eq!(
        errors.errors()[0].message,
        format!("must be <= {MAX_PARAM_CAPACITY}, got 16777216")
    );
}

// ---- every bound, at it and past it ----

/// Each rule is accepted as is; with `past` applied, refused on `field`.
fn at_and_past<R: Clone + std::fmt::Debug>(
    accepts: impl Fn(&R) -> Result<(), sentinel_flow_core::RuleError>,
    at: R,
    past: impl FnOnce(&mut R),
    field: &str,
) {
    assert_eq!(accepts(&at), Ok(()), "{at:?} at the bound");
    let mut bad = at;
    past(&mut bad);
    let error = accepts(&bad).expect_err("past the bound");
    assert_eq!(error.field, field, "{bad:?}: {error}");
    assert_eq!(error.index, 7, "the rule's place is named");
}

#[test]
fn every_flow_bound_is_accepted_at_it_and_refused_past_it() {
    let check = |r: &FlowRule| r.validate(7);
    let warm = || FlowRule {
        control_behavior: ControlBehavior::WarmUpRateLimiter,
        warm_up_period_sec: MAX_WARM_UP_PERIOD_SEC,
        warm_up_cold_factor: MAX_WARM_UP_COLD_FACTOR,
        max_queueing_time_ms: MAX_QUEUEING_TIME_MS,
        stat_interval_ms: MAX_STAT_INTERVAL_MS,
        stat_sample_count: MAX_STAT_SAMPLE_COUNT,
        ..FlowRule::new("r", 10.0)
    };
    at_and_past(
        check,
        warm(),
        |r| r.warm_up_period_sec += 1,
        "warm_up_period_sec",
    );
    at_and_past(
        check,
        warm(),
        |r| r.warm_up_cold_factor += 1,
        "warm_up_cold_factor",
    );
    at_and_past(
        check,
        warm(),
        |r| r.max_queueing_time_ms += 1,
        "max_queueing_time_ms",
    );
    at_and_past(
        check,
        warm(),
        |r| r.stat_interval_ms = 2 * MAX_STAT_INTERVAL_MS,
        "stat_interval_ms",
    );
    at_and_past(
        check,
        warm(),
        |r| r.stat_sample_count = 2 * MAX_STAT_SAMPLE_COUNT,
        "stat_sample_count",
    );
    let cluster = || FlowRule {
        cluster_mode: true,
        cluster_config: ClusterFlowConfig {
            flow_id: Some(3),
            window_interval_ms: MAX_STAT_INTERVAL_MS,
            sample_count: MAX_STAT_SAMPLE_COUNT,
            ..ClusterFlowConfig::default()
        },
        ..FlowRule::new("r", 10.0)
    };
    at_and_past(
        check,
        cluster(),
        |r| r.cluster_config.window_interval_ms = 2 * MAX_STAT_INTERVAL_MS,
        "cluster_config.window_interval_ms",
    );
    at_and_past(
        check,
        cluster(),
        |r| r.cluster_config.sample_count = 2 * MAX_STAT_SAMPLE_COUNT,
        "cluster_config.sample_count",
    );
    // A count is any finite number >= 0; NaN and infinities are refused.
    for count in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, -1.0] {
        let error = FlowRule::new("r", count).validate(7).unwrap_err();
        assert_eq!(error.field, "count", "{count}");
    }
    for count in [0.0, f64::MIN_POSITIVE, u64::MAX as f64, f64::MAX] {
        assert_eq!(FlowRule::new("r", count).validate(7), Ok(()), "{count}");
    }
}

#[test]
fn every_degrade_bound_is_accepted_at_it_and_refused_past_it() {
    let check = |r: &DegradeRule| r.validate(7);
    let slow = || DegradeRule {
        time_window_sec: MAX_TIME_WINDOW_SEC,
        min_request_amount: MAX_MIN_REQUEST_AMOUNT,
        ..DegradeRule::new("r", DegradeGrade::SlowRequestRatio, MAX_SLOW_RT_MS)
    };
    at_and_past(check, slow(), |r| r.count = MAX_SLOW_RT_MS + 1.0, "count");
    at_and_past(check, slow(), |r| r.time_window_sec += 1, "time_window_sec");
    at_and_past(
        check,
        slow(),
        |r| r.min_request_amount += 1,
        "min_request_amount",
    );
    let errors = DegradeRule::new("r", DegradeGrade::ErrorCount, MAX_ERROR_COUNT);
    at_and_past(check, errors, |r| r.count *= 2.0, "count");
    for count in [f64::NAN, f64::INFINITY] {
        let bad = DegradeRule::new("r", DegradeGrade::ErrorCount, count);
        assert_eq!(bad.validate(7).unwrap_err().field, "count");
    }
}

#[test]
fn every_hot_param_bound_is_accepted_at_it_and_refused_past_it() {
    let check = |r: &ParamFlowRule| r.validate(7);
    let queued = || ParamFlowRule {
        control_behavior: ParamControlBehavior::RateLimiter,
        max_queueing_time_ms: MAX_PARAM_QUEUEING_TIME_MS,
        duration_in_sec: MAX_PARAM_DURATION_SEC,
        capacity: Some(MAX_PARAM_CAPACITY),
        ..ParamFlowRule::new("r", 0, MAX_PARAM_COUNT as f64)
    };
    at_and_past(
        check,
        queued(),
        |r| r.max_queueing_time_ms += 1,
        "max_queueing_time_ms",
    );
    at_and_past(
        check,
        queued(),
        |r| r.duration_in_sec += 1,
        "duration_in_sec",
    );
    at_and_past(
        check,
        queued(),
        |r| r.capacity = Some(MAX_PARAM_CAPACITY + 1),
        "capacity",
    );
    at_and_past(check, queued(), |r| r.count += 1.0, "count");
    at_and_past(check, queued(), |r| r.burst_count = 1, "count");
    let items = (0..MAX_PARAM_ITEMS)
        .map(|i| ParamFlowItem::new(i as i64, 1.0))
        .collect();
    let listed = ParamFlowRule {
        param_flow_item_list: items,
        ..ParamFlowRule::new("r", 0, 5.0)
    };
    at_and_past(
        check,
        listed,
        |r| {
            r.param_flow_item_list
                .push(ParamFlowItem::new("one more", 1.0))
        },
        "param_flow_item_list",
    );
}

#[test]
fn authority_and_system_bounds_are_accepted_at_them_and_refused_past_them() {
    let origins = (0..MAX_AUTHORITY_ORIGINS).map(|i| format!("app-{i}"));
    let listed = AuthorityRule::new("r", AuthorityStrategy::White, origins);
    at_and_past(
        |r: &AuthorityRule| r.validate(7),
        listed,
        |r| r.limit_app.push("one-more".into()),
        "limit_app",
    );
    let system = SystemRule {
        avg_rt: Some(MAX_SYSTEM_AVG_RT_MS),
        max_thread: Some(MAX_SYSTEM_THREADS),
        ..SystemRule::default()
    };
    let check = |r: &SystemRule| r.validate(7);
    at_and_past(
        check,
        system.clone(),
        |r| r.avg_rt = Some(u64::MAX),
        "avg_rt",
    );
    at_and_past(
        check,
        system,
        |r| r.max_thread = Some(u64::MAX),
        "max_thread",
    );
}

// ---- the rule memory budget ----

/// A hot-parameter rule on `resource` tracking `capacity` values.
fn param(resource: &str, capacity: usize) -> ParamFlowRule {
    ParamFlowRule {
        capacity: Some(capacity),
        ..ParamFlowRule::new(resource, 0, 5.0)
    }
}

#[test]
fn twenty_hot_param_rules_of_the_largest_capacity_are_refused_by_the_default_budget() {
    let (_, sentinel) = instance();
    assert_eq!(
        sentinel.rule_memory_budget(),
        DEFAULT_RULE_MEMORY_BUDGET as u64
    );
    let good = param("good", 100);
    load(&sentinel, [good.clone()]);
    let in_force = sentinel.rule_memory();
    assert!(in_force > 0);

    let bombs: Vec<ParamFlowRule> = (0..20)
        .map(|i| param(&format!("r{i}"), MAX_PARAM_CAPACITY))
        .collect();
    let errors = sentinel.param_flow_rules().load(bombs).unwrap_err();
    // 24 MiB each at full capacity: the 11th takes them past 256 MiB.
    let table = (MAX_PARAM_CAPACITY * PARAM_VALUE_BYTES) as u64;
    assert_eq!(table, 24 << 20);
    assert_eq!(refusals(&errors), [("param_flow", 10, "capacity")]);
    let message = &errors.errors()[0].message;
    assert!(
        message.contains("over the budget of 268435456 bytes (256.0 MiB)"),
        "{message}"
    );
    assert!(message.contains("this rule takes up to 2516"), "{message}");
    // The figure is the whole load's, every rule of it.
    let total: u64 = message
        .split("at worst")
        .next()
        .and_then(|head| head.rsplit("up to ").next())
        .and_then(|figure| figure.split(' ').next())
        .and_then(|n| n.parse().ok())
        .expect("the total in the message");
    assert!(
        total >= 20 * table && total < 20 * table + (1 << 20),
        "{total}"
    );

    // The last good rules stay, and so does their figure.
    assert_eq!(sentinel.param_flow_rules().rules(), [good]);
    assert_eq!(sentinel.rule_memory(), in_force);
}

#[test]
fn a_load_under_the_budget_is_applied_with_its_figure() {
    let (_, sentinel) = instance_with(|b| b.rule_memory_budget(8 << 20));
    let rules: Vec<ParamFlowRule> = (0..20).map(|i| param(&format!("r{i}"), 10_000)).collect();
    load(&sentinel, rules);
    let table = 10_000 * PARAM_VALUE_BYTES as u64;
    let figure = sentinel.rule_memory();
    assert!(
        figure >= 20 * table && figure < 20 * table + 64 * 1024,
        "{figure}"
    );
    // Twice as many: the first past 8 MiB is named.
    let more: Vec<ParamFlowRule> = (0..40).map(|i| param(&format!("r{i}"), 10_000)).collect();
    let (kind, index, field) = refused(sentinel.param_flow_rules().load(more));
    assert_eq!((kind, field), ("param_flow", "capacity"));
    assert_eq!(index, (8 << 20) / table as usize);
    assert_eq!(sentinel.rule_memory(), figure);
}

#[test]
fn thirteen_thousand_default_hot_param_rules_are_refused_clearly() {
    // What a 1 MiB `setParamFlowRules` body can hold.
    let (_, sentinel) = instance();
    load(&sentinel, [FlowRule::new("kept", 1.0)]);
    let rules: Vec<ParamFlowRule> = (0..13_762)
        .map(|i| ParamFlowRule::new(format!("r{i}"), 0, 5.0))
        .collect();
    let error = sentinel.param_flow_rules().load(rules).unwrap_err();
    let [error] = error.errors() else {
        panic!("one error: {error}");
    };
    assert_eq!((error.kind, error.field), ("param_flow", "capacity"));
    // 4 000 values of 24 bytes each: about 94 KiB a rule, 2 700-odd fit.
    assert!((2_500..2_800).contains(&error.index), "{error}");
    assert!(error.message.contains("MiB)"), "{error}");
    assert_eq!(sentinel.flow_rules().rules(), [FlowRule::new("kept", 1.0)]);
    assert!(sentinel.param_flow_rules().rules().is_empty());
}

#[test]
fn a_kind_load_counts_the_other_kinds_in_force() {
    let table = 20_000 * PARAM_VALUE_BYTES as u64;
    let (_, sentinel) = instance_with(|b| b.rule_memory_budget(2 * table as usize));
    load(&sentinel, [param("a", 20_000)]);
    // Two authority lists of about 300 KB each (1 000 origins of 100
    // bytes, three copies) fit in the budget, but not beside the table.
    let origins = (0..MAX_AUTHORITY_ORIGINS).map(|i| format!("{i:0>76}"));
    let big = AuthorityRule::new("a", AuthorityStrategy::Black, origins);
    let lists = vec![
        big.clone(),
        AuthorityRule {
            resource: "b".into(),
            ..big
        },
    ];
    let (kind, index, field) = refused(sentinel.authority_rules().load(lists.clone()));
    assert_eq!((kind, index, field), ("authority", 1, "limit_app"));
    // Once the hot-parameter rule is gone, the lists fit.
    load(&sentinel, Vec::<ParamFlowRule>::new());
    load(&sentinel, lists);
    // And now the table does not.
    let (kind, ..) = refused(sentinel.param_flow_rules().load(vec![param("a", 20_000)]));
    assert_eq!(kind, "param_flow");
}

#[test]
fn a_rule_book_past_the_budget_is_refused_whole() {
    let (_, sentinel) = instance_with(|b| b.rule_memory_budget(1 << 20));
    load(&sentinel, [FlowRule::new("kept", 1.0)]);
    let windowed = FlowRule {
        stat_interval_ms: MAX_STAT_INTERVAL_MS,
        stat_sample_count: MAX_STAT_SAMPLE_COUNT,
        ..FlowRule::new("w", 1.0)
    };
    let book = RuleBook {
        flow: vec![windowed.clone(), windowed.clone(), windowed],
        param_flow: vec![param("p", 1_000)],
        ..RuleBook::default()
    };
    let errors = sentinel.load_rule_book(book).unwrap_err();
    let [error] = errors.errors() else {
        panic!("one error: {errors}");
    };
    // 3 600 buckets of at least 48 bytes each, 173 KiB a rule at least.
    assert_eq!(error.kind, "flow");
    assert_eq!(error.field, "stat_sample_count");
    assert_eq!(sentinel.flow_rules().rules(), [FlowRule::new("kept", 1.0)]);
}

// ---- no overflow, no panic ----

/// Every flow behaviour with `count`, its warm-up and queue at their
/// largest, in force while entries run over a few seconds.
fn run_flow_extremes(count: f64) {
    let (clock, sentinel) = instance();
    let behaviours = [
        ControlBehavior::Reject,
        ControlBehavior::WarmUp,
        ControlBehavior::RateLimiter,
        ControlBehavior::WarmUpRateLimiter,
    ];
    let mut rules: Vec<FlowRule> = Vec::new();
    for (i, behaviour) in behaviours.into_iter().enumerate() {
        for (j, period) in [1, 10, MAX_WARM_UP_PERIOD_SEC].into_iter().enumerate() {
            rules.push(FlowRule {
                control_behavior: behaviour,
                warm_up_period_sec: period,
                warm_up_cold_factor: if j == 2 { MAX_WARM_UP_COLD_FACTOR } else { 3 },
                // No queue: an entry a rate limiter would queue is refused
                // rather than put to sleep.
                max_queueing_time_ms: 0,
                ..FlowRule::new(format!("r{i}-{j}"), count)
            });
        }
    }
    rules.push(FlowRule {
        grade: FlowGrade::Concurrency,
        ..FlowRule::new("threads", count)
    });
    rules.push(FlowRule {
        stat_interval_ms: 10_000,
        stat_sample_count: 10,
        ..FlowRule::new("windowed", count)
    });
    let names: Vec<String> = rules.iter().map(|r| r.resource.clone()).collect();
    load(&sentinel, rules);
    for _ in 0..4 {
        for name in &names {
            for _ in 0..3 {
                drop(sentinel.entry(name));
            }
        }
        clock.advance(Duration::from_millis(1_100));
    }
}

#[test]
fn flow_counts_at_the_extremes_apply_and_run_without_overflow() {
    for count in [
        u64::MAX as f64,
        1e19,
        i64::MAX as f64,
        f64::MAX,
        1e300,
        0.0,
        f64::MIN_POSITIVE,
        1e-300,
        0.5,
    ] {
        run_flow_extremes(count);
    }
}

#[test]
fn flow_counts_that_are_not_finite_are_refused_for_every_behaviour() {
    let (_, sentinel) = instance();
    for behaviour in [
        ControlBehavior::Reject,
        ControlBehavior::WarmUp,
        ControlBehavior::RateLimiter,
        ControlBehavior::WarmUpRateLimiter,
    ] {
        for count in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            let rule = FlowRule {
                control_behavior: behaviour,
                ..FlowRule::new("r", count)
            };
            let (kind, index, field) = refused(sentinel.flow_rules().load(vec![rule]));
            assert_eq!((kind, index, field), ("flow", 0, "count"));
        }
    }
}

#[test]
fn param_flow_and_degrade_rules_at_their_bounds_run_without_overflow() {
    let (clock, sentinel) = instance();
    let base = |resource: &str, count: f64| ParamFlowRule {
        duration_in_sec: MAX_PARAM_DURATION_SEC,
        capacity: Some(64),
        ..ParamFlowRule::new(resource, 0, count)
    };
    load(
        &sentinel,
        [
            ParamFlowRule {
                burst_count: MAX_PARAM_COUNT - 1,
                ..base("tokens", 1.0)
            },
            base("full", MAX_PARAM_COUNT as f64),
            ParamFlowRule {
                control_behavior: ParamControlBehavior::RateLimiter,
                max_queueing_time_ms: 0,
                param_flow_item_list: vec![ParamFlowItem::new(1, MAX_PARAM_COUNT as f64)],
                ..base("paced", 1.0)
            },
            ParamFlowRule {
                grade: ParamFlowGrade::Concurrency,
                ..base("threads", MAX_PARAM_COUNT as f64)
            },
        ],
    );
    load(
        &sentinel,
        [
            DegradeRule {
                time_window_sec: MAX_TIME_WINDOW_SEC,
                min_request_amount: 1,
                slow_ratio_threshold: 0.0,
                ..DegradeRule::new("slow", DegradeGrade::SlowRequestRatio, MAX_SLOW_RT_MS)
            },
            DegradeRule {
                time_window_sec: MAX_TIME_WINDOW_SEC,
                min_request_amount: MAX_MIN_REQUEST_AMOUNT,
                ..DegradeRule::new("errors", DegradeGrade::ErrorCount, MAX_ERROR_COUNT)
            },
        ],
    );
    let args = [ParamValue::from(1), ParamValue::from(2)];
    for _ in 0..3 {
        for name in ["tokens", "full", "paced", "threads"] {
            for arg in &args {
                let entry = sentinel
                    .entry_builder(name)
                    .args(std::slice::from_ref(arg))
                    .batch_count(u32::MAX)
                    .enter();
                drop(entry);
                drop(sentinel.entry_builder(name).args(&args).enter());
            }
        }
        for name in ["slow", "errors"] {
            if let Ok(entry) = sentinel.entry(name) {
                clock.advance(Duration::from_millis(10));
                sentinel_flow_core::trace_error(&entry, "failed");
            }
        }
        clock.advance(Duration::from_secs(MAX_PARAM_DURATION_SEC));
    }
}

#[test]
fn sentinel_is_still_usable_after_extreme_rules() {
    // The instance stays whole: a good load after extreme ones applies.
    let (_, sentinel) = instance();
    load(&sentinel, [FlowRule::new("r", u64::MAX as f64)]);
    load(&sentinel, [FlowRule::new("r", 1.0)]);
    assert!(sentinel.entry("r").is_ok());
    assert!(sentinel.entry("r").is_err());
}
