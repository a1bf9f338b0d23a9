//! The command API's rule pushes read Sentinel's JSON into the core's rules,
//! which the core validates: a push past a rule's bounds, or past the
//! instance's rule memory budget, is refused with the field and the rule's
//! place, nothing is allocated for it, and the rules in force stay.

mod common;

use common::{instance, post_form, writable_server};
use sentinel_flow_core::flow::FlowRule;

#[tokio::test]
async fn pushes_of_bomb_rules_are_refused_and_the_last_good_rules_stay() {
    let (sentinel, _) = instance();
    let server = writable_server(&sentinel);
    let addr = server.local_addr();

    let good = r#"[{"resource":"r","count":5,"grade":1}]"#;
    let set = post_form(addr, "/setRules", &[("type", "flow"), ("data", good)]).await;
    assert_eq!((set.status.as_u16(), set.body.as_str()), (200, "success"));

    // 140 bytes that asked for about 206 GB.
    let bomb = r#"[{"resource":"r","count":1,"grade":1,"statIntervalMs":4294967295,"statSampleCount":4294967295}]"#;
    let set = post_form(addr, "/setRules", &[("type", "flow"), ("data", bomb)]).await;
    assert_ne!(set.status.as_u16(), 200, "{}", set.body);
    assert!(
        set.body
            .contains("flow[0] (r): statIntervalMs: must be <= 3600000"),
        "{}",
        set.body
    );
    assert!(
        set.body
            .contains("flow[0] (r): statSampleCount: must be <= 3600"),
        "{}",
        set.body
    );
    assert_eq!(sentinel.flow_rules().rules(), [FlowRule::new("r", 5.0)]);

    // A table of 16 777 216 values (384 MiB) for one rule.
    let huge = r#"[{"resource":"p","paramIdx":0,"count":5,"grade":1,"capacity":16777216}]"#;
    let set = post_form(addr, "/setParamFlowRules", &[("data", huge)]).await;
    assert_ne!(set.status.as_u16(), 200, "{}", set.body);
    assert!(set.body.contains("capacity"), "{}", set.body);

    // Twenty rules at the largest capacity: 480 MiB, past the 256 MiB budget.
    let rule = |i: usize| {
        format!(r#"{{"resource":"p{i}","paramIdx":0,"count":5,"grade":1,"capacity":1048576}}"#)
    };
    let twenty = format!("[{}]", (0..20).map(rule).collect::<Vec<_>>().join(","));
    let set = post_form(addr, "/setParamFlowRules", &[("data", &twenty)]).await;
    assert_ne!(set.status.as_u16(), 200, "{}", set.body);
    assert!(
        set.body
            .contains("param_flow[10] (p10): capacity takes the rules past the rule memory budget"),
        "{}",
        set.body
    );
    assert!(sentinel.param_flow_rules().rules().is_empty());

    // The instance still takes a good push.
    let set = post_form(addr, "/setRules", &[("type", "flow"), ("data", "[]")]).await;
    assert_eq!((set.status.as_u16(), set.body.as_str()), (200, "success"));
    assert!(sentinel.flow_rules().rules().is_empty());
}
