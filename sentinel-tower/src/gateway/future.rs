//! The gateway's response future (the entries held to the response, a
//! rate limiter's wait before the call, or a block's answer) and its body,
//! which holds the entries until it ends.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use bytes::Bytes;
use http::{Request, Response};
use http_body::{Body, Frame, SizeHint};
use pin_project_lite::pin_project;
use sentinel_flow_core::{Entry, Queued};
use tower_service::Service;

/// The entries of one request: its route's and its API groups'. The
/// first in place: a request that enters one resource allocates nothing
/// for it; the others (a request in several API groups) behind one
/// pointer, so that the future and the body that carry the entries stay
/// small to move.
#[derive(Default)]
pub(crate) struct Entries {
    first: Option<Entry<'static>>,
    #[allow(clippy::box_collection)]
    rest: Option<Box<Vec<Entry<'static>>>>,
}

impl Entries {
    #[inline]
    pub(crate) fn push(&mut self, entry: Entry<'static>) {
        match self.first {
            None => self.first = Some(entry),
            Some(_) => self.rest.get_or_insert_default().push(entry),
        }
    }

    fn len(&self) -> usize {
        usize::from(self.first.is_some()) + self.rest.as_ref().map_or(0, |rest| rest.len())
    }

    fn set_error<E: ?Sized>(&self, error: &E) {
        let rest = self.rest.iter().flat_map(|rest| rest.iter());
        for entry in self.first.iter().chain(rest) {
            entry.set_error(error);
        }
    }
}

/// Exits `entries`, the last entered first.
fn exit(entries: &mut Entries) {
    if let Some(rest) = &mut entries.rest {
        while let Some(entry) = rest.pop() {
            drop(entry);
        }
    }
    entries.first = None;
}

pin_project! {
    /// The body of a response through a [`GatewayLayer`](super::GatewayLayer):
    /// the inner body, which holds the request's entries until it ends
    /// (or is dropped), or the text of a refusal.
    pub struct GatewayBody<B> {
        #[pin]
        kind: BodyKind<B>,
    }
}

pin_project! {
    #[project = BodyProj]
    enum BodyKind<B> {
        Inner {
            #[pin]
            body: B,
            entries: Entries,
        },
        Blocked {
            data: Option<Bytes>,
        },
    }
}

impl<B> GatewayBody<B> {
    fn inner(body: B, entries: Entries) -> Self {
        GatewayBody {
            kind: BodyKind::Inner { body, entries },
        }
    }

    fn blocked(data: Bytes) -> Self {
        GatewayBody {
            kind: BodyKind::Blocked {
                data: (!data.is_empty()).then_some(data),
            },
        }
    }
}

impl<B: Body<Data = Bytes>> Body for GatewayBody<B> {
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        match self.project().kind.project() {
            BodyProj::Inner { mut body, entries } => {
                let frame = ready!(body.as_mut().poll_frame(cx));
                if !matches!(frame, Some(Ok(_))) || body.is_end_stream() {
                    exit(entries);
                }
                Poll::Ready(frame)
            }
            BodyProj::Blocked { data } => {
                Poll::Ready(data.take().map(|data| Ok(Frame::data(data))))
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.kind {
            BodyKind::Inner { body, .. } => body.is_end_stream(),
            BodyKind::Blocked { data } => data.is_none(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.kind {
            BodyKind::Inner { body, .. } => body.size_hint(),
            BodyKind::Blocked { data } => {
                SizeHint::with_exact(data.as_ref().map_or(0, |data| data.len() as u64))
            }
        }
    }
}

impl<B> fmt::Debug for GatewayBody<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match &self.kind {
            BodyKind::Inner { entries, .. } => {
                return f
                    .debug_struct("GatewayBody")
                    .field("entries", &entries.len())
                    .finish_non_exhaustive();
            }
            BodyKind::Blocked { .. } => "blocked",
        };
        f.debug_struct("GatewayBody").field("kind", &kind).finish()
    }
}

pin_project! {
    /// Requests a rate limiter queued: what their wait and call need.
    /// Boxed: it waits milliseconds, and the box keeps the future small.
    struct Waiting<S, ReqB> {
        #[pin]
        sleep: tokio::time::Sleep,
        queued: Vec<Queued<'static>>,
        entries: Entries,
        call: Option<(S, Request<ReqB>)>,
    }
}

pin_project! {
    /// The response future of a [`GatewayService`](super::GatewayService).
    pub struct GatewayFuture<S, ReqB>
    where
        S: Service<Request<ReqB>>,
    {
        #[pin]
        state: State<S, ReqB>,
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
            entries: Entries,
        },
        Waiting {
            waiting: Pin<Box<Waiting<S, ReqB>>>,
        },
        Blocked {
            response: Option<Response<Bytes>>,
        },
        Done,
    }
}

impl<S, ReqB> GatewayFuture<S, ReqB>
where
    S: Service<Request<ReqB>>,
{
    pub(crate) fn called(entries: Entries, future: S::Future) -> Self {
        GatewayFuture {
            state: State::Called { future, entries },
        }
    }

    /// Waits for the longest wait of `queued`, then admits them all and
    /// calls `service`.
    pub(crate) fn queued(
        entries: Entries,
        queued: Vec<Queued<'static>>,
        service: S,
        request: Request<ReqB>,
    ) -> Self {
        let wait = queued.iter().map(Queued::wait).max().unwrap_or_default();
        GatewayFuture {
            state: State::Waiting {
                waiting: Box::pin(Waiting {
                    sleep: tokio::time::sleep(wait),
                    queued,
                    entries,
                    call: Some((service, request)),
                }),
            },
        }
    }

    pub(crate) fn blocked(response: Response<Bytes>) -> Self {
        GatewayFuture {
            state: State::Blocked {
                response: Some(response),
            },
        }
    }
}

impl<S, ReqB, ResB> Future for GatewayFuture<S, ReqB>
where
    S: Service<Request<ReqB>, Response = Response<ResB>>,
    ResB: Body<Data = Bytes>,
{
    type Output = Result<Response<GatewayBody<ResB>>, S::Error>;

    #[inline(never)]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut state = self.project().state;
        loop {
            match state.as_mut().project() {
                StateProj::Called { future, entries } => {
                    let result = ready!(future.poll(cx));
                    // Only the entries move out; the finished future is
                    // dropped in place (moving the whole state out would
                    // copy the future too).
                    let mut entries = std::mem::take(entries);
                    state.set(State::Done);
                    return Poll::Ready(match result {
                        Ok(response) => {
                            if response.status().is_server_error() {
                                entries.set_error(&response.status());
                            }
                            Ok(response.map(|body| GatewayBody::inner(body, entries)))
                        }
                        Err(error) => {
                            entries.set_error(&error);
                            exit(&mut entries);
                            Err(error)
                        }
                    });
                }
                StateProj::Waiting { waiting } => {
                    let waiting = waiting.as_mut().project();
                    ready!(waiting.sleep.poll(cx));
                    let mut entries = std::mem::take(waiting.entries);
                    for queued in waiting.queued.drain(..) {
                        entries.push(queued.admit());
                    }
                    let call = waiting.call;
                    let (mut service, request) = call.take().expect("polled after completion");
                    let future = service.call(request);
                    state.set(State::Called { future, entries });
                }
                StateProj::Blocked { response } => {
                    let response = response.take().expect("polled after completion");
                    state.set(State::Done);
                    return Poll::Ready(Ok(response.map(GatewayBody::blocked)));
                }
                StateProj::Done => panic!("polled after completion"),
            }
        }
    }
}

impl<S, ReqB> fmt::Debug for GatewayFuture<S, ReqB>
where
    S: Service<Request<ReqB>>,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match &self.state {
            State::Called { .. } => "called",
            State::Waiting { .. } => "waiting",
            State::Blocked { .. } => "blocked",
            State::Done => "done",
        };
        f.debug_struct("GatewayFuture")
            .field("state", &state)
            .finish_non_exhaustive()
    }
}
