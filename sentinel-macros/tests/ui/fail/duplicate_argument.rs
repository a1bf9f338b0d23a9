use sentinel_core::BlockError;
use sentinel_macros::sentinel_resource;

#[sentinel_resource("orders", entry_type = inbound, name = "orders:v2")]
fn orders() -> Result<(), BlockError> {
    Ok(())
}

fn main() {
    let _ = orders();
}
