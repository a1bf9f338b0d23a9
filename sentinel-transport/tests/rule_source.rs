//! With a writable rule source, `setRules` writes the store (guarded by
//! the value this instance last read) and then the instance; a write over
//! a value written meanwhile by someone else is refused with 409. The
//! store here is a map in memory behind the `RuleSource` trait.

mod common;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{instance, post_form};
use sentinel_flow_core::flow::FlowRule;
use sentinel_flow_rules::source::{
    KeyValue, RuleFormat, RuleSource, RuleWriter, SentinelKeys, SourceError, SourceWatcher, Values,
    WriteFailure,
};
use sentinel_flow_transport::CommandCenter;

type Map = Arc<Mutex<HashMap<String, Vec<u8>>>>;

/// A store in memory: read on every wait (no change notices).
struct MemorySource(Map);

impl RuleSource for MemorySource {
    fn name(&self) -> String {
        "memory".into()
    }
    fn connect(&mut self, _keys: &[String]) -> Result<(), SourceError> {
        Ok(())
    }
    fn read(&mut self, keys: &[String], _max: usize) -> Result<Values, SourceError> {
        let map = self.0.lock().unwrap();
        let entries = keys
            .iter()
            .map(|k| {
                let value = map
                    .get(k)
                    .cloned()
                    .map_or(KeyValue::Missing, KeyValue::Present);
                (k.clone(), value)
            })
            .collect();
        Ok(Values {
            revision: None,
            entries,
        })
    }
    fn wait(&mut self, timeout: Duration) -> Result<bool, SourceError> {
        std::thread::sleep(timeout.min(Duration::from_millis(10)));
        Ok(true)
    }
    fn writer(&self) -> Option<Arc<dyn RuleWriter>> {
        Some(Arc::new(MemoryWriter(self.0.clone())))
    }
}

struct MemoryWriter(Map);

impl RuleWriter for MemoryWriter {
    fn compare_and_set(
        &self,
        key: &str,
        expected: Option<&[u8]>,
        value: &[u8],
    ) -> Result<(), WriteFailure> {
        let mut map = self.0.lock().unwrap();
        if map.get(key).map(Vec::as_slice) != expected {
            return Err(WriteFailure::Conflict("the key holds another value".into()));
        }
        map.insert(key.to_owned(), value.to_vec());
        Ok(())
    }
}

#[tokio::test]
async fn set_rules_writes_the_store_and_refuses_a_write_over_an_unread_value() {
    let map: Map = Arc::default();
    map.lock().unwrap().insert(
        "app-flow-rules".into(),
        br#"[{"resource":"GET:/a","count":10}]"#.to_vec(),
    );
    let (sentinel, _) = instance();
    let handle = SourceWatcher::new(
        MemorySource(map.clone()),
        RuleFormat::sentinel_json(SentinelKeys::for_app("app")),
    )
    .start(Arc::clone(&sentinel))
    .unwrap();
    assert_eq!(
        sentinel.flow_rules().rules(),
        vec![FlowRule::new("GET:/a", 10.0)]
    );
    let server = CommandCenter::new(Arc::clone(&sentinel))
        .port(0)
        .allow_writes(true)
        .rule_source(handle.store().unwrap())
        .start()
        .unwrap();
    let addr = server.local_addr();

    let data = r#"[{"resource":"GET:/b","count":0,"grade":1}]"#;
    let set = post_form(addr, "/setRules", &[("type", "flow"), ("data", data)]).await;
    assert_eq!((set.status.as_u16(), set.body.as_str()), (200, "success"));
    assert_eq!(
        sentinel.flow_rules().rules(),
        vec![FlowRule::new("GET:/b", 0.0)]
    );
    let stored = String::from_utf8(map.lock().unwrap()["app-flow-rules"].clone()).unwrap();
    assert!(stored.contains(r#""resource":"GET:/b""#), "{stored}");

    // A bad list is refused before the store is touched.
    let bad = post_form(
        addr,
        "/setRules",
        &[("type", "flow"), ("data", r#"[{"count":-1}]"#)],
    )
    .await;
    assert_eq!(bad.status, 400, "{}", bad.body);
    assert_eq!(
        String::from_utf8(map.lock().unwrap()["app-flow-rules"].clone()).unwrap(),
        stored
    );

    // Hot parameters go to their own key.
    let data = r#"[{"resource":"GET:/b","paramIdx":0,"count":5,"grade":1}]"#;
    let set = post_form(addr, "/setParamFlowRules", &[("data", data)]).await;
    assert_eq!(set.status, 200, "{}", set.body);
    assert!(map.lock().unwrap().contains_key("app-param-rules"));
    assert_eq!(sentinel.param_flow_rules().rules().len(), 1);
    // The watcher stopped (its store lives on), another writer changes
    // the key: a push from an instance that has not read it is refused,
    // and the other writer's value stays.
    drop(handle);
    map.lock().unwrap().insert(
        "app-flow-rules".into(),
        br#"[{"resource":"GET:/z","count":1}]"#.to_vec(),
    );
    let data = r#"[{"resource":"GET:/c","count":1}]"#;
    let conflict = post_form(addr, "/setRules", &[("type", "flow"), ("data", data)]).await;
    assert_eq!(conflict.status, 409, "{}", conflict.body);
    assert!(conflict.body.contains("conflict"), "{}", conflict.body);
    assert_eq!(
        map.lock().unwrap()["app-flow-rules"],
        br#"[{"resource":"GET:/z","count":1}]"#.to_vec()
    );
}
