use sentinel_flow_macros::sentinel_resource;

#[derive(Debug)]
struct MyError;

#[sentinel_resource]
fn orders() -> Result<(), MyError> {
    Ok(())
}

fn main() {
    let _ = orders();
}
