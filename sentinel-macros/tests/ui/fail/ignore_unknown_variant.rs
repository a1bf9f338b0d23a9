use sentinel_flow_core::BlockError;
use sentinel_flow_macros::sentinel_resource;

#[derive(Debug)]
enum MyError {
    Blocked,
    NotFound,
}

impl From<BlockError> for MyError {
    fn from(_: BlockError) -> Self {
        MyError::Blocked
    }
}

// `NotFund` is not in scope: an error, not a binding that ignores everything.
#[sentinel_resource(exceptions_to_ignore(NotFund))]
fn orders() -> Result<(), MyError> {
    Err(MyError::NotFound)
}

fn main() {
    let _ = orders();
}
