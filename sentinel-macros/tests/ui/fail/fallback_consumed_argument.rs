use sentinel_flow_core::BlockError;
use sentinel_flow_macros::sentinel_resource;

#[derive(Debug)]
struct Order;

fn save(_: Order) -> Result<u64, BlockError> {
    Ok(1)
}

#[sentinel_resource(fallback = retry_later)]
fn create(order: Order) -> Result<u64, BlockError> {
    save(order)
}

fn retry_later(_: Order, _: BlockError) -> Result<u64, BlockError> {
    Ok(0)
}

fn main() {
    let _ = create(Order);
}
