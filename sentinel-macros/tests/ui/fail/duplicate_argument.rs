use sentinel_flow_core::BlockError;
use sentinel_flow_macros::sentinel_resource;

#[sentinel_resource("orders", entry_type = inbound, name = "orders:v2")]
fn orders() -> Result<(), BlockError> {
    Ok(())
}

fn main() {
    let _ = orders();
}
