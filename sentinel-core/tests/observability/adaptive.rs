//! The adaptive rules' gauges in the Prometheus text: each rule's limit in
//! force, calls in flight and RTT estimates, after calls on a
//! `ManualClock` whose windows fold at known instants.

use std::collections::HashMap;

use sentinel_flow_core::adaptive::{AdaptiveAlgorithm, AdaptiveRule};
use sentinel_flow_core::prometheus::render_prometheus;

use crate::support::prometheus::{Key, key, parse};
use crate::support::{call_taking, enter, instance, load};

/// The gauges of the rule with these labels, in order: limit, in flight,
/// last window's RTT, reference RTT (`None`: no series).
fn gauges(samples: &HashMap<Key, f64>, labels: &[(&str, &str)]) -> (f64, f64, f64, Option<f64>) {
    let one = |name| {
        *samples
            .get(&key(name, labels))
            .unwrap_or_else(|| panic!("no {name} for {labels:?}"))
    };
    (
        one("sentinel_adaptive_limit"),
        one("sentinel_adaptive_in_flight"),
        one("sentinel_adaptive_last_rtt_ms"),
        samples
            .get(&key("sentinel_adaptive_reference_rtt_ms", labels))
            .copied(),
    )
}

fn series(samples: &HashMap<Key, f64>, prefix: &str) -> usize {
    samples
        .keys()
        .filter(|(name, _)| name.starts_with(prefix))
        .count()
}

/// Two rules on one resource fed the same calls (Vegas, no id, first;
/// AIMD with an id), and an unused Gradient2 rule for one origin.
fn rules() -> [AdaptiveRule; 3] {
    let small = |resource: &str, algorithm| AdaptiveRule {
        initial_limit: 4,
        min_limit: 1,
        max_limit: 10,
        window_ms: 100,
        min_samples: 2,
        ..AdaptiveRule::new(resource, algorithm)
    };
    [
        small("GET:/orders", AdaptiveAlgorithm::vegas()),
        AdaptiveRule {
            id: Some(7),
            ..small("GET:/orders", AdaptiveAlgorithm::aimd())
        },
        AdaptiveRule {
            limit_app: "svc-a".to_owned(),
            ..AdaptiveRule::new("export", AdaptiveAlgorithm::gradient2())
        },
    ]
}

#[test]
fn adaptive_gauges_show_each_rules_limit_in_flight_and_rtts() {
    let (clock, sentinel) = instance();
    load(&sentinel, rules());
    let vegas = [
        ("resource", "GET:/orders"),
        ("limit_app", "default"),
        ("algorithm", "vegas"),
        ("rule", "0"),
    ];
    let aimd = [
        ("resource", "GET:/orders"),
        ("limit_app", "default"),
        ("algorithm", "aimd"),
        ("rule", "7"),
    ];
    let gradient2 = [
        ("resource", "export"),
        ("limit_app", "svc-a"),
        ("algorithm", "gradient2"),
        ("rule", "0"),
    ];

    let (samples, types) = parse(&render_prometheus(&sentinel));
    for family in [
        "sentinel_adaptive_limit",
        "sentinel_adaptive_in_flight",
        "sentinel_adaptive_last_rtt_ms",
        "sentinel_adaptive_reference_rtt_ms",
    ] {
        assert_eq!(types[family], "gauge", "{family}");
    }
    // Before any call: the initial limits, nothing measured.
    assert_eq!(gauges(&samples, &vegas), (4.0, 0.0, 0.0, Some(0.0)));
    assert_eq!(gauges(&samples, &aimd), (4.0, 0.0, 0.0, None));
    assert_eq!(gauges(&samples, &gradient2), (20.0, 0.0, 0.0, Some(0.0)));

    // Two calls held open; a call of 30 ms opens the window, one of 50 ms
    // 150 ms later folds it: 40 ms on average, at most 3 in flight.
    let held = [
        enter(&sentinel, "GET:/orders"),
        enter(&sentinel, "GET:/orders"),
    ];
    call_taking(&clock, &sentinel, "GET:/orders", 30);
    clock.advance_ms(100);
    call_taking(&clock, &sentinel, "GET:/orders", 50);

    let (samples, _) = parse(&render_prometheus(&sentinel));
    // Vegas takes the window's fastest call (30 ms) as its no-load RTT: a
    // queue of ceil(4 x (1 - 30/40)) = 1 call, at most log10(limit), so it
    // grows by beta (6); AIMD, at least half used, adds one.
    assert_eq!(gauges(&samples, &vegas), (10.0, 2.0, 40.0, Some(30.0)));
    assert_eq!(gauges(&samples, &aimd), (5.0, 2.0, 40.0, None));
    assert_eq!(gauges(&samples, &gradient2), (20.0, 0.0, 0.0, Some(0.0)));
    // The same figures as the rules' snapshots.
    for (rule, state) in sentinel.adaptive_rules().limits() {
        let labels = if rule.resource == "export" {
            gradient2
        } else if rule.id == Some(7) {
            aimd
        } else {
            vegas
        };
        let (limit, in_flight, last, _) = gauges(&samples, &labels);
        assert_eq!(limit, f64::from(state.limit));
        assert_eq!(in_flight, f64::from(state.in_flight));
        assert_eq!(last, state.last_rtt_ms);
    }

    drop(held);
    let (samples, _) = parse(&render_prometheus(&sentinel));
    assert_eq!(gauges(&samples, &vegas).1, 0.0);
    assert_eq!(gauges(&samples, &aimd).1, 0.0);

    // Removed rules take their series with them.
    load(&sentinel, Vec::<AdaptiveRule>::new());
    let (samples, types) = parse(&render_prometheus(&sentinel));
    assert_eq!(series(&samples, "sentinel_adaptive_"), 0);
    assert_eq!(types["sentinel_adaptive_limit"], "gauge");
}
