use sentinel_flow_core::BlockError;
use sentinel_flow_macros::sentinel_resource;

#[sentinel_resource]
const fn limit() -> Result<u32, BlockError> {
    Ok(10)
}

fn main() {
    let _ = limit();
}
