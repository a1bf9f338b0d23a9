//! The response body: the inner service's, or the text of a block; and
//! the kinds of body a layer hands out ([`BodyKind`]).

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::StatusCode;
use http_body::{Body, Frame, SizeHint};
use pin_project_lite::pin_project;
use sentinel_flow_core::Entry;

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
        // A body of known length: its entry exited at the head, and the
        // wrapper is the body itself.
        Buffered {
            #[pin]
            body: B,
        },
        // A stream that holds its entry, or a block's text. Boxed: the
        // wrapper then has the size of `B` (for axum's `Body`, the box is
        // kept in the niche of its pointer), and the response moves as
        // cheaply as the inner one, several times on its way out.
        Other {
            other: Pin<Box<Other<B>>>,
        },
    }
}

pin_project! {
    #[project = OtherProj]
    enum Other<B> {
        Streamed {
            #[pin]
            body: B,
            // Exits when the body ends or is dropped.
            entry: Option<Entry<'static>>,
            // For a gRPC response: what classifies its trailers' status.
            grpc: Option<ErrorCheck>,
        },
        // Taken once.
        Blocked {
            data: Option<Bytes>,
        },
    }
}

impl<B: std::fmt::Debug> std::fmt::Debug for ResponseBody<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut out = f.debug_struct("ResponseBody");
        match &self.kind {
            Kind::Buffered { body } => out.field("body", body),
            Kind::Other { other } => match &**other {
                Other::Streamed { body, entry, .. } => {
                    out.field("body", body).field("entry", entry)
                }
                Other::Blocked { data } => out.field("blocked", data),
            },
        }
        .finish()
    }
}

impl<B> ResponseBody<B> {
    /// A body of known length, whose entry exited at the response head:
    /// the inner body and nothing else.
    #[inline]
    pub(crate) fn buffered(body: B) -> Self {
        ResponseBody {
            kind: Kind::Buffered { body },
        }
    }

    /// A streamed body: `entry` exits when it ends (or is dropped); `grpc`
    /// classifies the status in its trailers.
    pub(crate) fn streamed(body: B, entry: Entry<'static>, grpc: Option<ErrorCheck>) -> Self {
        ResponseBody {
            kind: Kind::Other {
                other: Box::pin(Other::Streamed {
                    body,
                    entry: Some(entry),
                    grpc,
                }),
            },
        }
    }

    pub(crate) fn blocked(data: Bytes) -> Self {
        ResponseBody {
            kind: Kind::Other {
                other: Box::pin(Other::Blocked {
                    data: (!data.is_empty()).then_some(data),
                }),
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
    /// A streamed body that holds its entry.
    #[doc(hidden)]
    fn wrapped(body: ResponseBody<B>) -> Self::Body;
    /// The body of a blocked request.
    #[doc(hidden)]
    fn blocked(data: Bytes) -> Self::Body;
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

    fn blocked(data: Bytes) -> ResponseBody<B> {
        ResponseBody::blocked(data)
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

    fn blocked(data: Bytes) -> axum::body::Body {
        axum::body::Body::from(data)
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
        let other = match self.project().kind.project() {
            KindProj::Buffered { body } => return body.poll_frame(cx),
            KindProj::Other { other } => other.as_mut().project(),
        };
        match other {
            OtherProj::Streamed { body, entry, grpc } => {
                let frame = body.poll_frame(cx);
                match &frame {
                    Poll::Ready(Some(Ok(frame))) => {
                        if let (Some(check), Some(trailers), Some(entry)) =
                            (&*grpc, frame.trailers_ref(), &*entry)
                            && check.is_error(StatusCode::OK, trailers, true)
                        {
                            entry.set_error("grpc-status in trailers");
                        }
                    }
                    Poll::Ready(Some(Err(_))) => {
                        if let Some(entry) = entry.take() {
                            entry.set_error("response body error");
                        }
                    }
                    Poll::Ready(None) => drop(entry.take()),
                    Poll::Pending => {}
                }
                frame
            }
            OtherProj::Blocked { data } => Poll::Ready(data.take().map(|d| Ok(Frame::data(d)))),
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.kind {
            Kind::Buffered { body } => body.is_end_stream(),
            Kind::Other { other } => match &**other {
                Other::Streamed { body, .. } => body.is_end_stream(),
                Other::Blocked { data } => data.is_none(),
            },
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.kind {
            Kind::Buffered { body } => body.size_hint(),
            Kind::Other { other } => match &**other {
                Other::Streamed { body, .. } => body.size_hint(),
                Other::Blocked { data } => {
                    SizeHint::with_exact(data.as_ref().map_or(0, |d| d.len() as u64))
                }
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(feature = "axum")]
    #[test]
    fn the_wrapper_of_an_axum_body_is_the_size_of_the_body() {
        // The response then moves as cheaply as one without the layer.
        assert_eq!(
            std::mem::size_of::<ResponseBody<axum::body::Body>>(),
            std::mem::size_of::<axum::body::Body>()
        );
    }

    #[test]
    fn a_block_body_is_its_text_once() {
        let body = ResponseBody::<http_body_util::Empty<Bytes>>::blocked(Bytes::from_static(b"no"));
        assert_eq!(body.size_hint().exact(), Some(2));
        assert!(!body.is_end_stream());
        let mut body = std::pin::pin!(body);
        let mut cx = Context::from_waker(std::task::Waker::noop());
        let Poll::Ready(Some(Ok(frame))) = body.as_mut().poll_frame(&mut cx) else {
            panic!("the text first");
        };
        assert_eq!(frame.into_data().unwrap(), "no");
        assert!(matches!(
            body.as_mut().poll_frame(&mut cx),
            Poll::Ready(None)
        ));
        assert!(body.is_end_stream());
    }
}
