use sentinel_flow_core::BlockError;
use sentinel_flow_macros::sentinel_resource;

#[sentinel_resource(name = orders)]
fn orders() -> Result<(), BlockError> {
    Ok(())
}

fn main() {
    let _ = orders();
}
