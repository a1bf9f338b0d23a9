//! `ResponseFuture`: the inner call's future with the request's entry, or
//! a rate limiter's wait before the call, or a block's response. A named
//! type: no allocation per request.

use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;

use std::task::{Context, Poll, ready};

use bytes::Bytes;
use http::{Request, Response};
use http_body::Body;
use pin_project_lite::pin_project;
use sentinel_flow_core::flow::FlowQuota;
use sentinel_flow_core::{Entry, Queued};
use tower_service::Service;

use crate::block::{ErrorCheck, is_grpc};
use crate::body::{BodyKind, ResponseBody, WrappedBody};
use crate::headers::{self, HeaderSettings};

/// What the response of an admitted request needs from the layer. Small:
/// it moves with the future.
pub(crate) struct Outcome {
    pub(crate) is_error: ErrorCheck,
    /// The rate-limit headers of an admitted response, when asked for
    /// (boxed: off by default, and the box keeps the future small).
    pub(crate) headers: Option<Box<(FlowQuota, HeaderSettings)>>,
}

pin_project! {
    /// A request a rate limiter queued: what its wait and its call need.
    /// Boxed: it waits milliseconds, and the box keeps the future small.
    struct Waiting<S, ReqB> {
        #[pin]
        sleep: tokio::time::Sleep,
        queued: Option<Queued<'static>>,
        call: Option<(S, Request<ReqB>)>,
        outcome: Option<Outcome>,
    }
}

pin_project! {
    /// The response future of [`SentinelService`](crate::SentinelService):
    /// holds the entry until the inner response is ready (then its body
    /// holds it while it streams), so dropping either (a client gone)
    /// exits the entry. A request a rate limiter queued waits here, on a
    /// tokio timer, before the inner service is called.
    pub struct ResponseFuture<S, ReqB, K = WrappedBody>
    where
        S: Service<Request<ReqB>>,
    {
        #[pin]
        state: State<S, ReqB>,
        kind: PhantomData<fn() -> K>,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<S, ReqB>
    where
        S: Service<Request<ReqB>>,
    {
        Called {
            #[pin]
            future: S::Future,
            entry: Option<Entry<'static>>,
            outcome: Option<Outcome>,
        },
        Queued {
            waiting: Pin<Box<Waiting<S, ReqB>>>,
        },
        Blocked {
            response: Option<Response<Bytes>>,
        },
        // Answered: the entry of a buffered response exited on the way in.
        Done,
    }
}

impl<S, ReqB, K> ResponseFuture<S, ReqB, K>
where
    S: Service<Request<ReqB>>,
{
    #[inline(always)]
    pub(crate) fn called(
        entry: Entry<'static>,
        outcome: Outcome,
        call: impl FnOnce() -> S::Future,
    ) -> Self {
        ResponseFuture {
            state: State::Called {
                future: call(),
                entry: Some(entry),
                outcome: Some(outcome),
            },
            kind: PhantomData,
        }
    }

    pub(crate) fn queued(
        queued: Queued<'static>,
        service: S,
        request: Request<ReqB>,
        outcome: Outcome,
    ) -> Self {
        ResponseFuture {
            state: State::Queued {
                waiting: Box::pin(Waiting {
                    sleep: tokio::time::sleep(queued.wait()),
                    queued: Some(queued),
                    call: Some((service, request)),
                    outcome: Some(outcome),
                }),
            },
            kind: PhantomData,
        }
    }

    pub(crate) fn blocked(response: Response<Bytes>) -> Self {
        ResponseFuture {
            state: State::Blocked {
                response: Some(response),
            },
            kind: PhantomData,
        }
    }
}

impl<S, ReqB, ResB, K> Future for ResponseFuture<S, ReqB, K>
where
    S: Service<Request<ReqB>, Response = Response<ResB>>,
    ResB: Body,
    K: BodyKind<ResB>,
{
    type Output = Result<Response<K::Body>, S::Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut state = self.project().state;
        loop {
            match state.as_mut().project() {
                StateProj::Called {
                    future,
                    entry,
                    outcome,
                } => {
                    let outcome = outcome.as_ref().expect("polled after completion");
                    let mut response = match future.poll(cx) {
                        Poll::Pending => return Poll::Pending,
                        Poll::Ready(Ok(response)) => response,
                        Poll::Ready(Err(error)) => {
                            if let Some(entry) = entry {
                                entry.set_error(&error);
                            }
                            state.set(State::Done);
                            return Poll::Ready(Err(error));
                        }
                    };
                    // The entry stays where it is unless a streamed body
                    // takes it: no copy of it for a buffered response.
                    let streamed = finish(&mut response, entry, outcome);
                    // Left before the answer is made: it is then made
                    // where it is returned, not copied there.
                    state.set(State::Done);
                    return Poll::Ready(Ok(match streamed {
                        None => response.map(K::buffered),
                        Some((entry, grpc)) => response
                            .map(|body| K::wrapped(ResponseBody::streamed(body, entry, grpc))),
                    }));
                }
                StateProj::Queued { waiting } => {
                    let waiting = waiting.as_mut().project();
                    ready!(waiting.sleep.poll(cx));
                    let entry = waiting
                        .queued
                        .take()
                        .expect("polled after completion")
                        .admit();
                    let (mut service, request) =
                        waiting.call.take().expect("polled after completion");
                    let outcome = waiting.outcome.take().expect("polled after completion");
                    let future = service.call(request);
                    state.set(State::Called {
                        future,
                        entry: Some(entry),
                        outcome: Some(outcome),
                    });
                }
                StateProj::Blocked { response } => {
                    let response = response.take().expect("polled after completion");
                    return Poll::Ready(Ok(response.map(K::blocked)));
                }
                StateProj::Done => panic!("polled after completion"),
            }
        }
    }
}

/// Records the inner response's outcome. The entry exits when the state
/// is left (dropped where it is) unless the body streams: then it is
/// taken and returned, with the error check of a gRPC body's trailers,
/// for the body to hold to its end.
#[inline(always)]
fn finish<ResB: Body>(
    response: &mut Response<ResB>,
    entry: &mut Option<Entry<'static>>,
    outcome: &Outcome,
) -> Option<(Entry<'static>, Option<ErrorCheck>)> {
    let grpc = is_grpc(response.headers());
    if let Some(entry) = entry
        && outcome
            .is_error
            .is_error(response.status(), response.headers(), grpc)
    {
        entry.set_error(&response.status());
    }
    if let Some(pair) = &outcome.headers {
        let (quota, settings) = &**pair;
        // The inner service's own headers win.
        headers::write(response.headers_mut(), quota, false, true, *settings);
    }
    let body = response.body();
    // The size hint first: a buffered body answers it, and an empty one
    // too, so one call of the body decides. A gRPC status may come in the
    // trailers too: never buffered.
    let buffered = !grpc && (body.size_hint().exact().is_some() || body.is_end_stream());
    // A body of known length is complete at the head: exit now, as
    // Sentinel's servlet filter does when the handler returns.
    if buffered {
        return None;
    }
    let entry = entry.take()?;
    Some((entry, grpc.then(|| outcome.is_error.clone())))
}

impl<S, ReqB, K> fmt::Debug for ResponseFuture<S, ReqB, K>
where
    S: Service<Request<ReqB>>,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match &self.state {
            State::Called { .. } => "called",
            State::Queued { .. } => "queued",
            State::Blocked { .. } => "blocked",
            State::Done => "done",
        };
        f.debug_struct("ResponseFuture")
            .field("state", &state)
            .finish_non_exhaustive()
    }
}
