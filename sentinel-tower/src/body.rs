//! The response body: the inner service's, or the text of a block; and
//! the kinds of body a layer hands out ([`BodyKind`]).

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::StatusCode;
use http_body::{Body, Frame, SizeHint};
use pin_project_lite::pin_project;
use sentinel_core::Entry;

use crate::block::ErrorCheck;

pin_project! {
    /// The body of a response through [`SentinelService`](crate::SentinelService):
    /// the inner service's body, or the short body of a blocked request.
    ///
    /// A streamed inner body (one of unknown length, or any gRPC body)
    /// holds the request's entry until it ends (or is dropped, when the
    /// client goes away), so a streamed response counts as inside the
    /// resource while it streams, and a gRPC status sent in its trailers is
    /// recorded as the call's outcome. A body of known length (a buffered
    /// response) lets the entry exit at the response head.
    pub struct ResponseBody<B> {
        #[pin]
        kind: Kind<B>,
    }
}

pin_project! {
    #[project = KindProj]
    enum Kind<B> {
        Inner {
            #[pin]
            body: B,
            // A streamed body's entry; `None` for a body of known length
            // (its entry exited at the head). Boxed: most bodies have none,
            // and a wrapper of the body's size plus a pointer moves as
            // cheaply as the body itself (the response is moved several
            // times on its way out).
            stream: Option<Box<Stream>>,
        },
        // Taken once.
        Blocked {
            data: Option<Bytes>,
        },
    }
}

/// What a streamed body holds until it ends.
struct Stream {
    // Exits when the body ends or is dropped.
    entry: Entry<'static>,
    // For a gRPC response: what classifies its trailers' status.
    grpc: Option<ErrorCheck>,
}

impl<B: std::fmt::Debug> std::fmt::Debug for ResponseBody<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.kind {
            Kind::Inner { body, stream } => f
                .debug_struct("ResponseBody")
                .field("body", body)
                .field("entry", &stream.as_ref().map(|stream| &stream.entry))
                .finish(),
            Kind::Blocked { data } => f
                .debug_struct("ResponseBody")
                .field("blocked", data)
                .finish(),
        }
    }
}

impl<B> ResponseBody<B> {
    /// A body of known length, whose entry exited at the response head:
    /// the inner body and nothing else.
    #[inline]
    pub(crate) fn buffered(body: B) -> Self {
        ResponseBody {
            kind: Kind::Inner { body, stream: None },
        }
    }

    /// A streamed body: `entry` exits when it ends (or is dropped); `grpc`
    /// classifies the status in its trailers.
    pub(crate) fn streamed(body: B, entry: Entry<'static>, grpc: Option<ErrorCheck>) -> Self {
        ResponseBody {
            kind: Kind::Inner {
                body,
                stream: Some(Box::new(Stream { entry, grpc })),
            },
        }
    }

    pub(crate) fn blocked(data: Bytes) -> Self {
        ResponseBody {
            kind: Kind::Blocked {
                data: (!data.is_empty()).then_some(data),
            },
        }
    }
}

/// The body type of a layer's responses: [`WrappedBody`] (the default,
/// [`ResponseBody`] around the inner body) or `AxumBody` (axum's `Body`,
/// with the `axum` feature). Sealed: implemented by those two only.
pub trait BodyKind<B>: sealed::Sealed {
    /// The response body type.
    type Body;
    /// A body of known length, whose entry exited at the response head.
    #[doc(hidden)]
    fn buffered(body: B) -> Self::Body;
    /// A streamed body that holds its entry, or a block's body.
    #[doc(hidden)]
    fn wrapped(body: ResponseBody<B>) -> Self::Body;
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for super::WrappedBody {}
    #[cfg(feature = "axum")]
    impl Sealed for super::AxumBody {}
}

/// Responses carry [`ResponseBody`]`<B>` around the inner body `B`: what
/// any tower service (tonic, hyper, axum) takes. The default.
#[derive(Clone, Copy, Debug, Default)]
pub struct WrappedBody;

impl<B> BodyKind<B> for WrappedBody {
    type Body = ResponseBody<B>;

    #[inline]
    fn buffered(body: B) -> ResponseBody<B> {
        ResponseBody::buffered(body)
    }

    #[inline]
    fn wrapped(body: ResponseBody<B>) -> ResponseBody<B> {
        body
    }
}

/// Responses carry axum's [`Body`](axum::body::Body)
/// ([`SentinelLayer::axum_body`](crate::SentinelLayer::axum_body)): an
/// inner body that is one already (a handler's, a `Router`'s) is handed
/// on as it is when its entry exits at the head, where axum would box a
/// [`ResponseBody`] into a new `Body` (one allocation per request); a
/// streamed body is wrapped and boxed, as before.
#[cfg(feature = "axum")]
#[derive(Clone, Copy, Debug, Default)]
pub struct AxumBody;

#[cfg(feature = "axum")]
impl<B> BodyKind<B> for AxumBody
where
    B: Body<Data = Bytes> + Send + 'static,
    B::Error: Into<axum::BoxError>,
{
    type Body = axum::body::Body;

    #[inline]
    fn buffered(body: B) -> axum::body::Body {
        // No allocation when `B` is axum's `Body` (a downcast).
        axum::body::Body::new(body)
    }

    fn wrapped(body: ResponseBody<B>) -> axum::body::Body {
        axum::body::Body::new(body)
    }
}

impl<B> Body for ResponseBody<B>
where
    B: Body<Data = Bytes>,
{
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        match self.project().kind.project() {
            KindProj::Inner { body, stream } => {
                let frame = body.poll_frame(cx);
                if stream.is_none() {
                    return frame;
                }
                match &frame {
                    Poll::Ready(Some(Ok(frame))) => {
                        if let Some(Stream {
                            entry,
                            grpc: Some(check),
                        }) = stream.as_deref()
                            && let Some(trailers) = frame.trailers_ref()
                            && check.is_error(StatusCode::OK, trailers, true)
                        {
                            entry.set_error("grpc-status in trailers");
                        }
                    }
                    Poll::Ready(Some(Err(_))) => {
                        if let Some(stream) = stream.take() {
                            stream.entry.set_error("response body error");
                        }
                    }
                    Poll::Ready(None) => drop(stream.take()),
                    Poll::Pending => {}
                }
                frame
            }
            KindProj::Blocked { data } => Poll::Ready(data.take().map(|d| Ok(Frame::data(d)))),
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.kind {
            Kind::Inner { body, .. } => body.is_end_stream(),
            Kind::Blocked { data } => data.is_none(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.kind {
            Kind::Inner { body, .. } => body.size_hint(),
            Kind::Blocked { data } => {
                SizeHint::with_exact(data.as_ref().map_or(0, |d| d.len() as u64))
            }
        }
    }
}
