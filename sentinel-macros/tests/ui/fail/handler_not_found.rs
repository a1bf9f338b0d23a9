use sentinel_flow_macros::sentinel_resource;

#[sentinel_resource(block_handler = handlers::on_block)]
fn orders(id: u64) -> u64 {
    id
}

mod handlers {}

fn main() {
    let _ = orders(1);
}
