//! `#[sentinel_resource]` on a sync and an async function, under flow rules.
//!
//! `create_order` returns `Result`: a blocked call becomes
//! `Err(OrderError::Blocked)`, an `Err` from the body is recorded as an
//! exception of the resource unless `exceptions_to_ignore` matches it.
//! `check_stock` is an `async fn` whose blocked calls are answered by a
//! block handler (a cached figure). Each is called ten times in a burst
//! under a QPS rule that admits fewer; the program prints what each call
//! returned and what each resource's node counted.
//!
//! Run: `cargo run -p examples --example macro`

use sentinel_flow_core::flow::{self, FlowRule};
use sentinel_flow_core::{BlockError, global};
use sentinel_flow_macros::sentinel_resource;

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

#[sentinel_resource("inventory:check", entry_type = inbound, block_handler = cached_stock)]
async fn check_stock(sku: &str) -> u32 {
    // A real service would await a database here; the entry is held across it.
    tokio::task::yield_now().await;
    sku.len() as u32 * 10
}

/// What a blocked `check_stock` answers: the last known figure.
async fn cached_stock(_sku: &str, block: BlockError) -> u32 {
    println!(
        "  check_stock blocked by {}: answering from cache",
        block.kind()
    );
    0
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
        println!("  stock {}", check_stock("sku-42").await);
    }

    println!("\nwhat the nodes counted (errors: quantity 0; out of stock is ignored):");
    print_node("orders:create");
    print_node("inventory:check");
}
