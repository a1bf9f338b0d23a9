use sentinel_flow_core::BlockError;
use sentinel_flow_macros::sentinel_resource;

#[sentinel_resource(args(user_id, sku))]
fn orders(user_id: u64) -> Result<u64, BlockError> {
    Ok(user_id)
}

fn main() {
    let _ = orders(1);
}
