use sentinel_flow_core::BlockError;
use sentinel_flow_macros::sentinel_resource;

#[sentinel_resource(block_handler = on_block)]
fn sum((a, b): (u32, u32)) -> u32 {
    a + b
}

fn on_block(_: (u32, u32), _: BlockError) -> u32 {
    0
}

fn main() {
    let _ = sum((1, 2));
}
