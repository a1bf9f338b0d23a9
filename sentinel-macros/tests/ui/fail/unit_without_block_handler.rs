use sentinel_flow_macros::sentinel_resource;

#[sentinel_resource("audit")]
fn audit(event: &str) {
    println!("{event}");
}

fn main() {
    audit("login");
}
