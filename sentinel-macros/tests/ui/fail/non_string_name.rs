use sentinel_core::BlockError;
use sentinel_macros::sentinel_resource;

#[sentinel_resource(name = orders)]
fn orders() -> Result<(), BlockError> {
    Ok(())
}

fn main() {
    let _ = orders();
}
