//! Each command against golden JSON (compared as JSON values), and the
//! rules' round trip: our YAML file -> getRules JSON -> setRules -> the
//! same rules.

mod common;

use std::sync::Arc;

use common::{T0, assert_golden, get, instance, post_form, writable_server};
use sentinel_flow_core::Sentinel;
use sentinel_flow_core::system::ManualStatus;
use sentinel_flow_transport::CommandCenter;

fn load_golden_rules(sentinel: &Sentinel) {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/golden/rules.yaml");
    let file =
        sentinel_flow_rules::load_file(path, &sentinel_flow_rules::LoadOptions::default()).unwrap();
    sentinel_flow_rules::apply(sentinel, file).unwrap();
}

const KINDS: [&str; 4] = ["flow", "degrade", "system", "authority"];

#[tokio::test]
async fn rules_read_as_sentinel_json_and_write_back_the_same() {
    let (from, _) = instance();
    load_golden_rules(&from);
    let source = CommandCenter::new(Arc::clone(&from))
        .port(0)
        .start()
        .unwrap();
    let (to, _) = instance();
    let target = writable_server(&to);

    for kind in KINDS {
        let answer = get(source.local_addr(), &format!("/getRules?type={kind}")).await;
        assert_eq!(answer.status, 200, "{kind}: {}", answer.body);
        assert_golden(&format!("{kind}.json"), &answer.json());
        let set = post_form(
            target.local_addr(),
            "/setRules",
            &[("type", kind), ("data", &answer.body)],
        )
        .await;
        assert_eq!(
            (set.status.as_u16(), set.body.as_str()),
            (200, "success"),
            "{kind}"
        );
    }
    let answer = get(source.local_addr(), "/getParamFlowRules").await;
    assert_golden("param_flow.json", &answer.json());
    let set = post_form(
        target.local_addr(),
        "/setParamFlowRules",
        &[("data", &answer.body)],
    )
    .await;
    assert_eq!(set.body, "success");

    assert_eq!(to.flow_rules().rules(), from.flow_rules().rules());
    assert_eq!(to.degrade_rules().rules(), from.degrade_rules().rules());
    assert_eq!(to.system_rules().rules(), from.system_rules().rules());
    assert_eq!(to.authority_rules().rules(), from.authority_rules().rules());
    assert_eq!(
        to.param_flow_rules().rules(),
        from.param_flow_rules().rules()
    );
    assert_eq!(from.flow_rules().rules().len(), 2);
}

#[tokio::test]
async fn nodes_and_tree_carry_the_dashboards_field_names() {
    let (sentinel, clock) = instance();
    // One second of traffic: 3 passes of 10 ms in context "web" from
    // "checkout", one of them failing, and a nested call.
    for i in 0..3 {
        let outer = sentinel
            .entry_builder("GET:/orders")
            .context("web")
            .origin("checkout")
            .enter()
            .unwrap();
        let inner = sentinel
            .entry_builder("SELECT orders")
            .parent(&outer)
            .enter()
            .unwrap();
        clock.advance_ms(10);
        if i == 0 {
            outer.set_error(&std::io::Error::other("boom"));
        }
        drop(inner);
        drop(outer);
    }
    let _inbound = sentinel
        .entry_builder("GET:/health")
        .entry_type(sentinel_flow_core::EntryType::Inbound)
        .enter()
        .unwrap();
    let server = CommandCenter::new(Arc::clone(&sentinel))
        .port(0)
        .start()
        .unwrap();
    let addr = server.local_addr();

    assert_golden("cluster_node.json", &get(addr, "/clusterNode").await.json());
    assert_golden(
        "cluster_node_by_id.json",
        &get(addr, "/clusterNodeById?id=GET:/orders").await.json(),
    );
    assert_eq!(
        get(addr, "/clusterNodeById?id=nope").await.json(),
        serde_json::json!({})
    );
    assert_golden("json_tree.json", &get(addr, "/jsonTree").await.json());
    assert_golden(
        "system_status.json",
        &get(addr, "/systemStatus").await.json(),
    );

    let tree = get(addr, "/tree").await.body;
    assert!(
        tree.starts_with("EntranceNode: machine-root(t:1 pq:4"),
        "{tree}"
    );
    assert!(tree.contains("\n-EntranceNode: web(t:0 pq:3"), "{tree}");
    assert!(tree.contains("\n--GET:/orders(t:0 pq:3"), "{tree}");
    assert!(tree.contains("\n---SELECT orders(t:0 pq:3"), "{tree}");
    let web = get(addr, "/tree?id=web").await.body;
    assert!(web.starts_with("-EntranceNode: web(t:0 pq:3"), "{web}");
    assert_eq!(web.lines().count(), 3, "{web}");
    assert_eq!(
        get(addr, "/tree?id=nope").await.body,
        "Can't find node with id nope"
    );
    let cnode = get(addr, "/cnode?id=orders").await.body;
    assert!(cnode.starts_with("idx  id"), "{cnode}");
    assert_eq!(cnode.lines().count(), 3, "{cnode}");
    let origin = get(addr, "/origin?id=GET:/orders").await.body;
    assert!(
        origin.starts_with("id: GET:/orders\n\nidx  origin"),
        "{origin}"
    );
    assert!(
        origin
            .lines()
            .nth(3)
            .unwrap()
            .starts_with("1    checkout  0       3         0         3"),
        "{origin}"
    );
    assert_eq!(sentinel.now_ms(), T0 + 30);
}

#[tokio::test]
async fn info_commands() {
    let (sentinel, _) = instance();
    let server = CommandCenter::new(Arc::clone(&sentinel))
        .port(0)
        .app("golden-app")
        .allow_writes(true)
        .start()
        .unwrap();
    let addr = server.local_addr();
    assert_eq!(
        get(addr, "/version").await.body,
        sentinel_flow_transport::SENTINEL_VERSION
    );
    assert_golden("api.json", &get(addr, "/api").await.json());
    assert_golden(
        "cluster_mode.json",
        &get(addr, "/getClusterMode").await.json(),
    );
    let info = get(addr, "/basicInfo").await.body;
    assert!(info.contains("app: golden-app\n"), "{info}");
    assert!(info.contains(&format!("port: {}\n", addr.port())), "{info}");

    assert_eq!(
        get(addr, "/getSwitch").await.body,
        "Sentinel switch value: true"
    );
    let off = post_form(addr, "/setSwitch", &[("value", "false")]).await;
    assert_eq!(off.body, "Sentinel set switch value: false");
    assert!(!sentinel.is_enabled());
    assert_eq!(
        get(addr, "/getSwitch").await.body,
        "Sentinel switch value: false"
    );
    let typo = post_form(addr, "/setSwitch", &[("value", "flase")]).await;
    assert_eq!(typo.status, 400);
    assert!(!sentinel.is_enabled(), "a bad value changes nothing");
    post_form(addr, "/setSwitch", &[("value", "true")]).await;
    assert!(sentinel.is_enabled());
}

#[tokio::test]
async fn metric_adds_machine_lines_without_identity() {
    let status = ManualStatus::new();
    status.set_cpu_usage(Some(0.25));
    status.set_load_average(Some(1.5));
    let clock = sentinel_flow_core::ManualClock::new(T0 + 1_500);
    let sentinel = Arc::new(
        Sentinel::builder()
            .clock(clock)
            .system_status(status)
            .build(),
    );
    let server = CommandCenter::new(Arc::clone(&sentinel))
        .port(0)
        .start()
        .unwrap();
    let body = get(
        server.local_addr(),
        &format!("/metric?startTime={T0}&endTime={}", T0 + 5_000),
    )
    .await
    .body;
    assert_eq!(
        body,
        format!(
            "{T0}|__system_load__|15000|0|0|0|0|0|0|0\n{T0}|__cpu_usage__|2500|0|0|0|0|0|0|0\n",
            T0 = T0 + 1_000
        )
    );
    let one = get(
        server.local_addr(),
        &format!("/metric?startTime={T0}&identity=x"),
    )
    .await;
    assert_eq!((one.status.as_u16(), one.body.as_str()), (200, ""));
    let bad = get(server.local_addr(), "/metric?endTime=5").await;
    assert_eq!(bad.status, 400);
    assert!(bad.body.contains("startTime"), "{}", bad.body);
}

#[tokio::test]
async fn metric_reads_the_log_by_end_time_or_by_whole_seconds_up_to_max_lines() {
    let dir = tempfile::tempdir().unwrap();
    let (sentinel, clock) = instance();
    let log = sentinel_flow_core::log::MetricLogConfig::new("lines").dir(dir.path());
    let mut writer = sentinel.metric_writer(log.clone());
    // Three seconds, two resources each: six lines.
    for _ in 0..3 {
        drop(sentinel.entry("a").unwrap());
        drop(sentinel.entry("b").unwrap());
        clock.advance_ms(1_000);
    }
    writer.write_pending(&sentinel).unwrap();
    let server = CommandCenter::new(Arc::clone(&sentinel))
        .port(0)
        .metric_log(&log)
        .start()
        .unwrap();
    let addr = server.local_addr();
    let lines = |body: String| body.lines().map(str::to_owned).collect::<Vec<_>>();

    let all = lines(
        get(
            addr,
            &format!("/metric?startTime={T0}&endTime={}", T0 + 2_000),
        )
        .await
        .body,
    );
    assert_eq!(all.len(), 6, "{all:?}");
    assert_eq!(all[0], format!("{T0}|a|1|0|1|0|0|0|0|0"));
    let window = lines(
        get(
            addr,
            &format!("/metric?startTime={}&endTime={}", T0 + 1_000, T0 + 1_999),
        )
        .await
        .body,
    );
    assert_eq!(window.len(), 2, "{window:?}");
    // maxLines 3 ends inside the second second: that second is kept whole.
    let capped = lines(
        get(addr, &format!("/metric?startTime={T0}&maxLines=3"))
            .await
            .body,
    );
    assert_eq!(capped.len(), 4, "{capped:?}");
    assert!(
        capped[3].starts_with(&format!("{}|b|", T0 + 1_000)),
        "{capped:?}"
    );
    let bad = get(addr, &format!("/metric?startTime={T0}&maxLines=lots")).await;
    assert_eq!(bad.status, 400);
}
