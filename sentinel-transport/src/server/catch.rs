//! A handler that panics answers 500 with the panic's message, and the
//! server keeps serving.

use std::any::Any;
use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::Pin;
use std::task::{Context, Poll};

/// `future`, with a panic while polling it turned into `Err(message)`.
pub(crate) struct CatchPanic<F> {
    future: Pin<Box<F>>,
}

impl<F: Future> CatchPanic<F> {
    pub(crate) fn new(future: F) -> Self {
        CatchPanic {
            future: Box::pin(future),
        }
    }
}

impl<F: Future> Future for CatchPanic<F> {
    type Output = Result<F::Output, String>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // The future is dropped unpolled after a panic: nothing it shares
        // is observed half-updated by this future again.
        let future = self.future.as_mut();
        match catch_unwind(AssertUnwindSafe(move || future.poll(cx))) {
            Ok(Poll::Ready(output)) => Poll::Ready(Ok(output)),
            Ok(Poll::Pending) => Poll::Pending,
            Err(payload) => Poll::Ready(Err(panic_message(payload.as_ref()))),
        }
    }
}

/// The message a panic was given (`panic!("...")`), or a placeholder for
/// another payload.
pub(crate) fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic without a message".to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_panic_becomes_its_message() {
        let ok = CatchPanic::new(async { 7 }).await;
        assert_eq!(ok, Ok(7));
        let caught = CatchPanic::new(async {
            let n: u32 = "x".len() as u32;
            if n == 1 {
                panic!("boom {n}");
            }
            n
        })
        .await;
        assert_eq!(caught, Err("boom 1".to_owned()));
    }
}
