//! The live page in a real browser: headless Chromium opens the page of a
//! running `CommandCenter` with traffic (reads restricted to a token given
//! in the page's URL) and must show the busy resource with a non-zero pass rate and draw
//! its chart, with no console error, no uncaught exception and no failed
//! request, in light and dark mode.
//!
//! Needs Chromium (`apt-get install -y chromium`; or `CHROMIUM=/path`):
//! without it the test fails and says so. Set `LIVE_PAGE_SCREENSHOTS=dir`
//! to keep the screenshots out of the test's temporary directory, and
//! `LIVE_PAGE_WARMUP_SECS=n` (at most 60) to let the traffic run n seconds
//! before the page opens (a fuller chart on the screenshots).

#[path = "live_page/cdp.rs"]
mod cdp;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use sentinel_flow_core::adaptive::{AdaptiveAlgorithm, AdaptiveRule};
use sentinel_flow_core::authority::{AuthorityRule, AuthorityStrategy};
use sentinel_flow_core::degrade::{DegradeGrade, DegradeRule};
use sentinel_flow_core::flow::FlowRule;
use sentinel_flow_core::param_flow::{ParamFlowItem, ParamFlowRule};
use sentinel_flow_core::system::SystemRule;
use sentinel_flow_core::{RuleBook, Sentinel};
use serde_json::Value;

/// How long the page may take to show the traffic.
const PAGE_DEADLINE: Duration = Duration::from_secs(20);
/// How long after that a later second must be shown.
const REFRESH_DEADLINE: Duration = Duration::from_secs(5);
/// The traffic stops by itself after this, whatever happens to the test.
const TRAFFIC_LIMIT: Duration = Duration::from_secs(150);

/// What the test reads from the page: the busy resource's row, the chart's
/// marks, and how many pixels of the chart are the pass colour.
const PROBE: &str = r#"(() => {
  const row = [...document.querySelectorAll('#resources tbody tr')]
    .find((tr) => tr.dataset.name === 'GET:/orders');
  const canvas = document.getElementById('chart');
  // Still on about:blank, or the page is loading.
  if (!canvas) return { loading: true };
  // Pixels of the chart in a colour of the page's palette.
  const pixels = (name) => {
    if (canvas.width <= 1 || canvas.height <= 1) return 0;
    const color = getComputedStyle(document.documentElement).getPropertyValue(name).trim();
    const want = [1, 3, 5].map((i) => parseInt(color.slice(i, i + 2), 16));
    const px = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height).data;
    let count = 0;
    for (let i = 0; i < px.length; i += 4) {
      if (px[i + 3] > 200 && want.every((v, k) => Math.abs(px[i + k] - v) < 24)) count++;
    }
    return count;
  };
  const passPixels = pixels('--pass');
  return {
    // A row being redrawn may have its cell without its text yet.
    passText: row?.children[1]?.firstChild?.textContent ?? null,
    drawn: canvas.dataset.drawn,
    maxPass: canvas.dataset.maxPass || null,
    passPixels,
    limit: canvas.dataset.limit || null,
    limitPoints: Number(canvas.dataset.limitPoints || 0),
    limitPixels: pixels('--limit'),
    limitLegend: !document.getElementById('legend-limit').hidden,
    title: document.getElementById('chart-title').textContent,
    breakers: document.querySelectorAll('#breakers li').length,
    rules: document.getElementById('rules').textContent,
    sources: document.querySelectorAll('#sources li').length,
    sourceText: document.getElementById('sources').textContent,
    status: document.getElementById('status').dataset.state,
    markup: document.querySelectorAll('main img, main [onerror]').length,
    markupRow: [...document.querySelectorAll('#resources td.name')]
      .some((td) => td.textContent === '<img src=x onerror=alert(1)>'),
    statusText: document.getElementById('status-text').textContent,
  };
})()"#;

fn rules() -> RuleBook {
    let mut book = RuleBook::default();
    book.flow.push(FlowRule::new("GET:/orders", 200.0));
    book.degrade.push(DegradeRule::new(
        "GET:/orders",
        DegradeGrade::ErrorRatio,
        0.5,
    ));
    let mut payments = DegradeRule::new("POST:/payments", DegradeGrade::ErrorRatio, 0.5);
    payments.time_window_sec = 3;
    book.degrade.push(payments);
    book.authority.push(AuthorityRule::new(
        "GET:/admin",
        AuthorityStrategy::White,
        ["ops", "cron"],
    ));
    let mut hot = ParamFlowRule::new("GET:/orders", 0, 20.0);
    hot.param_flow_item_list
        .push(ParamFlowItem::new("tenant-vip", 200.0));
    book.param_flow.push(hot);
    // AIMD's defaults: a limit of 20 that one call at a time never grows.
    book.adaptive
        .push(AdaptiveRule::new("GET:/orders", AdaptiveAlgorithm::aimd()));
    book.system.push(SystemRule {
        qps: Some(100_000.0),
        ..SystemRule::default()
    });
    book
}

/// Entries on three resources until `stop` or the limit: `GET:/orders` at a
/// rate that swells and ebbs around 300 a second (its rule passes 200, one
/// call in fifty fails, each holds about 2 ms), `GET:/users` at an eighth,
/// `POST:/payments` at a sixteenth, mostly failing.
fn traffic(sentinel: Arc<Sentinel>, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        // A name that is markup: the page must show it as text (an `img`
        // parsed from it would fail to load and fail the test too).
        drop(sentinel.entry("<img src=x onerror=alert(1)>"));
        let started = Instant::now();
        let mut n = 0u64;
        while !stop.load(Ordering::Relaxed) && started.elapsed() < TRAFFIC_LIMIT {
            let swell = 1.0 + 0.6 * (started.elapsed().as_secs_f64() / 6.0).sin();
            let pause = Duration::from_secs_f64(0.0033 / swell);
            match sentinel.entry("GET:/orders") {
                Ok(entry) => {
                    if n % 50 == 0 {
                        entry.set_error("boom");
                    }
                    std::thread::sleep(pause.min(Duration::from_millis(2)));
                    drop(entry);
                    std::thread::sleep(pause.saturating_sub(Duration::from_millis(2)));
                }
                Err(_) => std::thread::sleep(pause),
            }
            if n % 8 == 0 {
                drop(sentinel.entry("GET:/users"));
            }
            // Two calls in three fail: its breaker opens, probes, reopens.
            if n % 16 == 0
                && let Ok(entry) = sentinel.entry("POST:/payments")
                && n % 48 != 0
            {
                entry.set_error("declined");
            }
            n += 1;
        }
    })
}

/// The command center restricts every request to this token (reads too):
/// every request of the page must carry the token of the page's URL on.
const TOKEN: &str = "s3cret/1";
const TOKEN_QUERY: &str = "token=s3cret%2F1";

fn digits(text: &str) -> u64 {
    text.chars()
        .filter(char::is_ascii_digit)
        .collect::<String>()
        .parse()
        .unwrap_or(0)
}

fn shows_traffic(probe: &Value) -> bool {
    probe["passText"].as_str().is_some_and(|t| digits(t) > 0)
        && probe["drawn"] == "60"
        && probe["maxPass"].as_str().is_some_and(|t| digits(t) > 0)
        && probe["passPixels"].as_u64().unwrap_or(0) > 100
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_shows_live_traffic_and_draws_its_chart_without_errors() {
    let sentinel = Arc::new(Sentinel::builder().build());
    sentinel.load_rule_book(rules()).expect("valid rules");
    let stop = Arc::new(AtomicBool::new(false));
    let load = traffic(Arc::clone(&sentinel), Arc::clone(&stop));

    // A source that lost its store after one refusal; its name is markup,
    // to be shown as text.
    let mut source = sentinel_flow_rules::source::SourceState::default();
    source.name = "<img src=x onerror=alert(1)>".into();
    source.revision = Some("h:00000000000000ff".into());
    source.applied_at_ms = Some(1_700_000_000_000);
    source.last_error = Some("connection refused".into());
    (source.applies, source.refusals, source.disconnects) = (2, 1, 1);
    let rule_source = move || source.clone();
    let server = sentinel_flow_transport::CommandCenter::new(Arc::clone(&sentinel))
        .port(0)
        .token(TOKEN)
        .protect_reads(true)
        .source_state(rule_source)
        .start()
        .expect("the command center starts");
    let address = server.local_addr();
    let warmup = std::env::var("LIVE_PAGE_WARMUP_SECS")
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
        .unwrap_or(0)
        .min(60);
    tokio::time::sleep(Duration::from_secs(warmup)).await;

    let dir = tempfile::tempdir().unwrap();
    let browser = cdp::Browser::launch(&dir.path().join("profile")).await;
    let mut shots = Vec::new();
    for scheme in ["light", "dark"] {
        let page = browser.new_page(1360, 1100).await;
        browser
            .call(
                Some(&page),
                "Emulation.setEmulatedMedia",
                serde_json::json!({ "features": [{ "name": "prefers-color-scheme", "value": scheme }] }),
            )
            .await;
        browser
            .call(
                Some(&page),
                "Page.navigate",
                serde_json::json!({ "url": format!("http://{address}/?{TOKEN_QUERY}") }),
            )
            .await;
        let deadline = Instant::now() + PAGE_DEADLINE;
        let probe = loop {
            let probe = browser.eval(&page, PROBE).await;
            if shows_traffic(&probe) {
                break probe;
            }
            assert!(
                Instant::now() < deadline,
                "{scheme}: within {PAGE_DEADLINE:?} the page did not show GET:/orders with a \
                 non-zero pass rate and a drawn chart; last reading: {probe}; problems: {:?}",
                browser.problems.lock().unwrap()
            );
            tokio::time::sleep(Duration::from_millis(250)).await;
        };
        // The page goes on refreshing: a later second is shown within a few
        // polls (and errors of later renders are caught meanwhile). The
        // adaptive limit is drawn over the seconds it was recorded, which
        // grow by one a second: a page that loaded within the limit's first
        // seconds is read again until it has drawn a few of them.
        let refreshed = loop {
            let later = browser.eval(&page, PROBE).await;
            let limit_drawn = later["limitPoints"].as_u64().unwrap_or(0) >= 2
                && later["limitPixels"].as_u64().unwrap_or(0) > 40;
            if later["statusText"] != probe["statusText"] && shows_traffic(&later) && limit_drawn {
                break later;
            }
            assert!(
                Instant::now() < deadline + REFRESH_DEADLINE,
                "{scheme}: the page stopped refreshing at {} (the limit drawn over {} seconds, {} pixels)",
                later["statusText"],
                later["limitPoints"],
                later["limitPixels"]
            );
            tokio::time::sleep(Duration::from_millis(250)).await;
        };
        eprintln!(
            "{scheme}: {} then {}",
            probe["statusText"], refreshed["statusText"]
        );
        assert_eq!(
            refreshed["title"], "GET:/orders",
            "the busiest resource is charted"
        );
        assert_eq!(refreshed["status"], "live");
        assert_eq!(refreshed["markup"], 0, "a resource name was parsed as HTML");
        assert_eq!(
            refreshed["markupRow"], true,
            "a resource name shown as text"
        );
        assert_eq!(
            refreshed["breakers"], 2,
            "the breakers of the degrade rules are listed"
        );
        assert_eq!(refreshed["sources"], 1, "the rule source is listed");
        let source = refreshed["sourceText"].as_str().unwrap();
        assert!(
            source.starts_with("down<img src=x onerror=alert(1)>")
                && source.contains("revision h:00000000000000ff applied 2023-11-14T22:13:20.000Z")
                && source.contains("2 applied · 1 refused · 1 lost")
                && source.ends_with("connection refused"),
            "{source}"
        );
        let rules = refreshed["rules"].as_str().unwrap();
        assert!(
            rules.contains("≤ 200 QPS")
                && rules.contains("error ratio > 0.5")
                && rules.contains("aimd limit in 20..=200"),
            "{rules}"
        );
        // The adaptive rule's limit is drawn on the chart, with its legend.
        assert_eq!(refreshed["limit"], "20", "{refreshed}");
        assert!(
            refreshed["limitPoints"].as_u64().unwrap() >= 2,
            "{refreshed}"
        );
        assert!(
            refreshed["limitPixels"].as_u64().unwrap() > 40,
            "{refreshed}"
        );
        assert_eq!(refreshed["limitLegend"], true);
        let png = browser.screenshot(&page).await;
        assert!(png.starts_with(b"\x89PNG"), "a PNG screenshot");
        let file = dir.path().join(format!("live_page_{scheme}.png"));
        std::fs::write(&file, &png).unwrap();
        eprintln!("{scheme}: {probe}\nscreenshot: {}", file.display());
        shots.push(file);
    }
    // A resource without an adaptive rule: no limit on its chart, no
    // legend for one.
    let page = browser.new_page(1360, 1100).await;
    browser
        .call(
            Some(&page),
            "Page.navigate",
            serde_json::json!({ "url": format!("http://{address}/?resource=GET:/users&{TOKEN_QUERY}") }),
        )
        .await;
    let deadline = Instant::now() + PAGE_DEADLINE;
    let users = loop {
        let probe = browser.eval(&page, PROBE).await;
        if probe["drawn"] == "60" && probe["title"] == "GET:/users" {
            break probe;
        }
        assert!(
            Instant::now() < deadline,
            "the chart of GET:/users was not drawn: {probe}"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    assert_eq!(users["limit"], Value::Null, "{users}");
    assert_eq!(users["limitPoints"], 0);
    assert_eq!(users["limitPixels"], 0);
    assert_eq!(users["limitLegend"], false);

    stop.store(true, Ordering::Relaxed);
    load.join().unwrap();
    drop(server);

    if let Some(keep) = std::env::var_os("LIVE_PAGE_SCREENSHOTS") {
        for shot in &shots {
            std::fs::copy(
                shot,
                std::path::Path::new(&keep).join(shot.file_name().unwrap()),
            )
            .unwrap();
        }
    }
    let problems = browser.problems.lock().unwrap().clone();
    assert!(problems.is_empty(), "the page misbehaved: {problems:#?}");
}
