//! `cargo run --release -p resource-macro`
//!
//! `#[sentinel_resource]` on a sync and an async function, under flow rules,
//! through the umbrella crate (`sentinel-flow` with the `macros` feature):
//! the expansion names the crate this package depends on.
//!
//! `create_order` returns `Result`: a blocked call becomes
//! `Err(OrderError::Blocked)`, an `Err` from the body is recorded as an
//! exception of the resource unless `exceptions_to_ignore` matches it.
//! `check_stock` is an `async fn` that reads a (simulated) stock level and
//! remembers it per SKU; its blocked calls are answered by a block handler
//! from that memory, the last figure read. Each is called ten times in a
//! burst under a QPS rule that admits fewer; the program prints what each
//! call returned and what each resource's node counted.
//!
//! A tracing subscriber prints the library's log on stderr.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{LazyLock, Mutex};

use sentinel_flow::flow::{self, FlowRule};
use sentinel_flow::{BlockError, global, sentinel_resource};

#[derive(Debug)]
enum OrderError {
    Blocked(BlockError),
    InvalidQuantity,
    OutOfStock,
}

impl From<BlockError> for OrderError {
    fn from(block: BlockError) -> Self {
        OrderError::Blocked(block)
    }
}

/// Quantity 0 is an error of the call; 9 and above is out of stock, which
/// is a business answer rather than a failure, so it is not recorded.
#[sentinel_resource(
    "orders:create",
    args(sku),
    exceptions_to_ignore(OrderError::OutOfStock)
)]
fn create_order(sku: &str, quantity: u32) -> Result<u64, OrderError> {
    match quantity {
        0 => Err(OrderError::InvalidQuantity),
        9.. => Err(OrderError::OutOfStock),
        _ => Ok(u64::from(quantity) * 1_000 + sku.len() as u64),
    }
}

/// The stock level in the (simulated) database: one unit is sold between
/// two reads.
static STOCK: AtomicU32 = AtomicU32::new(120);

/// The last level read per SKU: what a blocked call answers.
static LAST_READ: LazyLock<Mutex<HashMap<String, u32>>> = LazyLock::new(Default::default);

#[sentinel_resource("inventory:check", entry_type = inbound, block_handler = cached_stock)]
async fn check_stock(sku: &str) -> u32 {
    // A real service would await a database here; the entry is held across it.
    tokio::task::yield_now().await;
    let level = STOCK.fetch_sub(1, Ordering::Relaxed);
    LAST_READ
        .lock()
        .expect("not poisoned")
        .insert(sku.to_owned(), level);
    println!("  stock {level} (read from the database)");
    level
}

/// What a blocked `check_stock` answers: the last figure read for the SKU,
/// 0 if it was never read.
async fn cached_stock(sku: &str, block: BlockError) -> u32 {
    let cached = LAST_READ.lock().expect("not poisoned").get(sku).copied();
    match cached {
        Some(level) => println!(
            "  stock {level} (blocked by {}: the last figure read, from the cache)",
            block.kind()
        ),
        None => println!(
            "  stock 0 (blocked by {}: nothing cached yet)",
            block.kind()
        ),
    }
    cached.unwrap_or(0)
}

fn print_node(name: &str) {
    let sentinel = global();
    let s = sentinel
        .resource_node(name)
        .expect("the resource was entered")
        .stats()
        .snapshot(sentinel.now_ms());
    println!(
        "{name:<16} pass {:>2}  block {:>2}  exception {:>2}  concurrency {}",
        s.total_pass, s.total_block, s.total_exception, s.concurrency
    );
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    tracing_subscriber::fmt()
        .with_max_level(tracing_subscriber::filter::LevelFilter::INFO)
        .with_writer(std::io::stderr)
        .init();
    flow::load_rules(vec![
        FlowRule::new("orders:create", 6.0),
        FlowRule::new("inventory:check", 3.0),
    ])
    .expect("valid rules");

    println!("create_order, 10 calls under a 6 QPS rule:");
    for quantity in [1, 0, 9, 2, 3, 4, 5, 6, 7, 8] {
        match create_order("sku-42", quantity) {
            Ok(order) => println!("  quantity {quantity}: order {order}"),
            Err(OrderError::Blocked(block)) => {
                println!("  quantity {quantity}: blocked by {}", block.kind())
            }
            Err(error) => println!("  quantity {quantity}: {error:?}"),
        }
    }

    println!("check_stock, 10 calls under a 3 QPS rule:");
    for _ in 0..10 {
        check_stock("sku-42").await;
    }

    println!("\nwhat the nodes counted (errors: quantity 0; out of stock is ignored):");
    print_node("orders:create");
    print_node("inventory:check");
}
