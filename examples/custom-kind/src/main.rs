//! A rule kind of the application's own, "deny after N" (a resource may be
//! entered `n` times, then is refused), in a rule file and in Sentinel's
//! command API: its rule, its description and its check are all this file
//! adds; the library is used as published.
//!
//! It loads a rule file with a `deny_after` section, enters the resource
//! until it is refused, changes `n` through `setRules` over HTTP on
//! 127.0.0.1 (the change is written to the file, then put in force), and
//! enters again.
//!
//! `cargo run --release -p custom-kind`

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use sentinel_flow::describe::{Describe, DescribeRule, Fields, Name};
use sentinel_flow::rules::{LoadOptions, RuleFileStore};
use sentinel_flow::slot::{EntryContext, order};
use sentinel_flow::transport::CommandCenter;
use sentinel_flow::{BlockKind, Rule, RuleError, Sentinel, UserKind, UserKindRules};

/// Lets `resource` be entered `n` times, then refuses it.
#[derive(Clone, Debug, Default, PartialEq)]
struct DenyAfter {
    resource: String,
    n: u64,
}

impl std::fmt::Display for DenyAfter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "deny {} after {}", self.resource, self.n)
    }
}

impl Rule for DenyAfter {
    fn resource(&self) -> &str {
        &self.resource
    }
    fn block_kind(&self) -> BlockKind {
        BlockKind::Custom(DenyAfterKind::NAME)
    }
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

/// The most entries a rule may let through.
const MAX_N: u64 = 1_000_000_000;

/// The rule described once: its fields' names in a rule file and in
/// Sentinel's JSON; reading, writing back and the command API follow.
impl Describe for DenyAfter {
    fn describe<F: Fields>(&mut self, f: &mut F) {
        let resource = Name::new("resource", "resource").required().names_rule();
        f.string(resource.first(), &mut self.resource, "");
        f.whole(Name::new("n", "n").required(), &mut self.n, 0);
    }
}

impl DescribeRule for DenyAfter {
    const KIND: &'static str = DenyAfterKind::NAME;
    const FILE_ORDER: u32 = 100;

    fn problems(&self, index: usize, max_name_len: usize) -> Vec<RuleError> {
        let mut problems = Vec::new();
        if self.n > MAX_N {
            let why = format!("must be at most {MAX_N}, got {}", self.n);
            problems.push(RuleError::new(Self::KIND, index, &self.resource, "n", why));
        }
        if self.resource.len() > max_name_len {
            let why = format!("is longer than {max_name_len} bytes");
            let resource = &self.resource;
            problems.push(RuleError::new(Self::KIND, index, resource, "resource", why));
        }
        problems
    }
}

/// The kind: its rules are counted per rule, from the rule's load.
struct DenyAfterKind;

impl UserKind for DenyAfterKind {
    type Rule = DenyAfter;
    type Compiled = AtomicU64;
    const NAME: &'static str = "deny_after";
    const ORDER: i32 = order::DEGRADE + 1;

    fn compile(_: &DenyAfter) -> AtomicU64 {
        AtomicU64::new(0)
    }

    fn check(rule: &DenyAfter, seen: &AtomicU64, _: &EntryContext<'_>) -> bool {
        seen.fetch_add(1, Ordering::Relaxed) < rule.n
    }
}

const RULES: &str = "\
# Orders are limited by QPS; the export may run 3 times.
flow:
  - {resource: GET:/orders, count: 1000}
deny_after:
  - {resource: export, n: 3}
";

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let rules = UserKindRules::<DenyAfterKind>::new();
    let sentinel = Arc::new(Sentinel::builder().kind(&rules).build());

    let dir = tempfile::tempdir()?;
    let path = dir.path().join("rules.yaml");
    std::fs::write(&path, RULES)?;
    let store = RuleFileStore::open_with(&path, LoadOptions::default().kind(&rules))?;
    let loaded = store.reload(&sentinel)?;
    println!(
        "loaded {}: {} flow rule(s), {} deny_after rule(s)",
        path.display(),
        loaded.count("flow"),
        loaded.count("deny_after")
    );
    enter(&sentinel, 5);

    let server = CommandCenter::new(Arc::clone(&sentinel))
        .port(0)
        .allow_writes(true)
        .rule_file(store)
        .kind(&rules)
        .start_with_own_runtime()?;
    let addr = server.local_addr();
    println!("command center on http://{addr}");

    let (status, body) = call(addr, "GET", "/getRules?type=deny_after", "")?;
    println!("getRules?type=deny_after: {status} {body}");

    let data = r#"[{"resource":"export","n":2}]"#;
    let form = format!("type=deny_after&data={}", form_encode(data));
    let (status, body) = call(addr, "POST", "/setRules", &form)?;
    println!("setRules {data}: {status} {body}");
    println!(
        "the rule file now:\n{}",
        std::fs::read_to_string(&path)?.trim_end()
    );
    // A changed rule starts counting anew.
    enter(&sentinel, 4);

    let bad = r#"[{"resource":"export","n":-1}]"#;
    let form = format!("type=deny_after&data={}", form_encode(bad));
    let (status, body) = call(addr, "POST", "/setRules", &form)?;
    println!("setRules {bad}: {status} {body}");
    println!("rules in force: {:?}", rules.rules());
    Ok(())
}

/// Enters `export` `tries` times and prints what happened.
fn enter(sentinel: &Sentinel, tries: usize) {
    let mut outcomes = Vec::new();
    for _ in 0..tries {
        match sentinel.entry("export") {
            Ok(entry) => {
                drop(entry);
                outcomes.push("passed".to_owned());
            }
            Err(block) => outcomes.push(format!("refused ({:?})", block.kind())),
        }
    }
    println!("export x{tries}: {}", outcomes.join(", "));
}

/// One HTTP/1.1 request to the command center: its status and body.
fn call(addr: SocketAddr, method: &str, path: &str, form: &str) -> std::io::Result<(u16, String)> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(2))?;
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    let mut request = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    if method == "POST" {
        request.push_str("Content-Type: application/x-www-form-urlencoded\r\n");
        request.push_str(&format!("Content-Length: {}\r\n", form.len()));
    }
    request.push_str("\r\n");
    request.push_str(form);
    stream.write_all(request.as_bytes())?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer)?;
    let status = answer
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = answer.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    Ok((status, body.to_owned()))
}

/// `text` as a form value.
fn form_encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}
