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

use super::held::Held;

/// The entries of one request: its route's and its API groups'. The
/// first in place; the next two (a request that enters its route's
/// resource and one or two API groups') in a block of the thread's pool
/// (see the `held` module), so that the future and the body that carry
/// the entries stay small to move and a request allocates nothing for
/// them; more still (a request in three or more API groups) in a vector
/// in that block. Dropped, they exit the last entered first.
#[derive(Default)]
pub(crate) struct Entries {
    // Declared first, dropped first: the later entries exit first.
    more: Option<Held<More>>,
    first: Option<Entry<'static>>,
}

/// The entries after a request's first.
#[derive(Default)]
struct More {
    next: [Option<Entry<'static>>; 2],
    rest: Vec<Entry<'static>>,
}

impl Entries {
    #[inline]
    pub(crate) fn push(&mut self, entry: Entry<'static>) {
        match self.first {
            None => self.first = Some(entry),
            Some(_) => self.more_entries().push(entry),
        }
    }

    /// Marked cold so that the path of a request in one resource stays
    /// short (16 instructions fewer); a request in two resources or more
    /// (in a `Router`, its route and an API group) takes it once.
    #[cold]
    fn more_entries(&mut self) -> &mut More {
        self.more.get_or_insert_with(|| Held::new(More::default()))
    }

    fn iter(&self) -> impl Iterator<Item = &Entry<'static>> {
        let more = self.more.iter().flat_map(|more| more.iter());
        self.first.iter().chain(more)
    }

    fn set_error<E: ?Sized>(&self, error: &E) {
        for entry in self.iter() {
            entry.set_error(error);
        }
    }

    /// Exits the entries, the last entered first.
    fn exit(&mut self) {
        self.more = None;
        self.first = None;
    }
}

impl More {
    fn push(&mut self, entry: Entry<'static>) {
        match self.next.iter_mut().find(|slot| slot.is_none()) {
            Some(slot) => *slot = Some(entry),
            None => self.rest.push(entry),
        }
    }

    fn iter(&self) -> impl Iterator<Item = &Entry<'static>> {
        self.next.iter().flatten().chain(&self.rest)
    }
}

impl Drop for More {
    /// Exits the entries, the last entered first.
    fn drop(&mut self) {
        while let Some(entry) = self.rest.pop() {
            drop(entry);
        }
        for slot in self.next.iter_mut().rev() {
            *slot = None;
        }
    }
}

/// The body of a response through a [`GatewayLayer`](super::GatewayLayer):
/// the inner body, which holds the request's entries until it ends (or is
/// dropped), or the text of a refusal. Both are kept in a block of the
/// thread's pool, so that the response is as small to move as the inner
/// one (see the `held` module).
pub struct GatewayBody<B> {
    kind: Pin<Held<BodyKind<B>>>,
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
            kind: Held::pin(BodyKind::Inner { body, entries }),
        }
    }

    fn blocked(data: Bytes) -> Self {
        GatewayBody {
            kind: Held::pin(BodyKind::Blocked {
                data: (!data.is_empty()).then_some(data),
            }),
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
        match self.get_mut().kind.as_mut().project() {
            BodyProj::Inner { mut body, entries } => {
                let frame = ready!(body.as_mut().poll_frame(cx));
                if !matches!(frame, Some(Ok(_))) || body.is_end_stream() {
                    entries.exit();
                }
                Poll::Ready(frame)
            }
            BodyProj::Blocked { data } => {
                Poll::Ready(data.take().map(|data| Ok(Frame::data(data))))
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        match &*self.kind {
            BodyKind::Inner { body, .. } => body.is_end_stream(),
            BodyKind::Blocked { data } => data.is_none(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &*self.kind {
            BodyKind::Inner { body, .. } => body.size_hint(),
            BodyKind::Blocked { data } => {
                SizeHint::with_exact(data.as_ref().map_or(0, |data| data.len() as u64))
            }
        }
    }
}

impl<B> fmt::Debug for GatewayBody<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match &*self.kind {
            BodyKind::Inner { entries, .. } => {
                return f
                    .debug_struct("GatewayBody")
                    .field("entries", &entries.iter().count())
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
                            entries.exit();
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

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::{BodyExt, Full};
    use sentinel_flow_core::{ManualClock, Sentinel};

    const NAMES: [&str; 5] = ["route", "one", "two", "three", "four"];

    /// A request's entries in `NAMES`, as the layer pushes them.
    fn entered(sentinel: &'static Sentinel, n: usize) -> Entries {
        let mut entries = Entries::default();
        for name in &NAMES[..n] {
            entries.push(sentinel.entry_builder(name).enter().unwrap());
        }
        entries
    }

    fn in_flight(sentinel: &Sentinel) -> Vec<u64> {
        NAMES
            .iter()
            .map(|name| {
                sentinel
                    .resource_node(name)
                    .map_or(0, |node| node.stats().cur_concurrency())
            })
            .collect()
    }

    #[test]
    fn every_entry_is_held_until_the_body_ends_however_many_there_are() {
        let sentinel: &'static Sentinel = Box::leak(Box::new(
            Sentinel::builder().clock(ManualClock::new(0)).build(),
        ));
        for n in 0..=NAMES.len() {
            let entries = entered(sentinel, n);
            assert_eq!(entries.iter().count(), n);
            let held: Vec<u64> = (0..NAMES.len()).map(|k| u64::from(k < n)).collect();
            assert_eq!(in_flight(sentinel), held, "{n} entries");
            let mut body = GatewayBody::inner(Full::new(Bytes::from_static(b"body")), entries);
            let frame = block_on(body.frame()).unwrap().unwrap();
            assert_eq!(frame.into_data().unwrap(), "body");
            assert_eq!(
                in_flight(sentinel),
                [0; 5],
                "exited at the end, {n} entries"
            );
            drop(body);
            // Dropped before its end, the body exits them too.
            let body = GatewayBody::inner(Full::new(Bytes::new()), entered(sentinel, n));
            assert_eq!(in_flight(sentinel), held);
            drop(body);
            assert_eq!(
                in_flight(sentinel),
                [0; 5],
                "exited when dropped, {n} entries"
            );
        }
    }

    /// Records the resources of the entries that exit, in turn.
    #[derive(Debug, Default, Clone)]
    struct ExitOrder(std::sync::Arc<std::sync::Mutex<Vec<String>>>);

    impl sentinel_flow_core::slot::Slot for ExitOrder {
        fn order(&self) -> i32 {
            sentinel_flow_core::slot::order::AUTHORITY + 1
        }
        fn entry(
            &self,
            _: &sentinel_flow_core::slot::EntryContext<'_>,
        ) -> Result<(), sentinel_flow_core::BlockError> {
            Ok(())
        }
        fn exit(&self, ctx: &sentinel_flow_core::slot::ExitContext<'_>) {
            let mut order = self.0.lock().unwrap();
            order.push(ctx.resource_name().to_owned());
        }
    }

    #[test]
    fn the_last_entered_exits_first_at_the_end_and_when_dropped() {
        let order = ExitOrder::default();
        let sentinel: &'static Sentinel = Box::leak(Box::new(
            Sentinel::builder()
                .clock(ManualClock::new(0))
                .slot(order.clone())
                .build(),
        ));
        let reversed: Vec<String> = NAMES.iter().rev().map(|name| name.to_string()).collect();
        let mut entries = entered(sentinel, NAMES.len());
        entries.exit();
        assert_eq!(std::mem::take(&mut *order.0.lock().unwrap()), reversed);
        drop(entered(sentinel, NAMES.len()));
        assert_eq!(std::mem::take(&mut *order.0.lock().unwrap()), reversed);
        drop(GatewayBody::inner(
            Full::new(Bytes::new()),
            entered(sentinel, NAMES.len()),
        ));
        assert_eq!(std::mem::take(&mut *order.0.lock().unwrap()), reversed);
    }

    #[test]
    fn an_error_is_recorded_on_every_entry() {
        let sentinel: &'static Sentinel = Box::leak(Box::new(
            Sentinel::builder().clock(ManualClock::new(0)).build(),
        ));
        let mut entries = entered(sentinel, NAMES.len());
        entries.set_error(&"failed");
        entries.exit();
        let now = sentinel.now_ms();
        for name in NAMES {
            let stats = sentinel.resource_node(name).unwrap().stats();
            assert_eq!(stats.total_exception(now), 1, "{name}");
        }
    }

    /// Polls `future` on this thread until it is ready.
    fn block_on<F: Future>(future: F) -> F::Output {
        let mut future = std::pin::pin!(future);
        let mut cx = Context::from_waker(std::task::Waker::noop());
        loop {
            if let Poll::Ready(output) = future.as_mut().poll(&mut cx) {
                return output;
            }
        }
    }
}
