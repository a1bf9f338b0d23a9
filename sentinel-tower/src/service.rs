//! `SentinelService`: enters the resource, calls the inner service, records
//! its outcome, exits.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use http::{Request, Response};
use tower_service::Service;

use crate::block::{blocked_response, is_grpc};
use crate::body::ResponseBody;
use crate::layer::Config;

/// The service made by [`SentinelLayer`](crate::SentinelLayer).
#[derive(Clone)]
pub struct SentinelService<S> {
    inner: S,
    config: Arc<Config>,
}

impl<S> SentinelService<S> {
    pub(crate) fn new(inner: S, config: Arc<Config>) -> Self {
        SentinelService { inner, config }
    }
}

impl<S: fmt::Debug> fmt::Debug for SentinelService<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SentinelService")
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
}

type BoxedResult<B, E> = Pin<Box<dyn Future<Output = Result<Response<ResponseBody<B>>, E>> + Send>>;

/// The response future of [`SentinelService`]: holds the entry until the
/// inner response is ready (then its body holds it until it ends), so
/// dropping either (a client gone) exits the entry.
///
/// One allocation per request: the core's `enter_async` future has no
/// nameable type, so the entering and the inner call live in one box.
pub struct ResponseFuture<B, E> {
    inner: BoxedResult<B, E>,
}

impl<B, E> Future for ResponseFuture<B, E> {
    type Output = Result<Response<ResponseBody<B>>, E>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.inner.as_mut().poll(cx)
    }
}

impl<B, E> fmt::Debug for ResponseFuture<B, E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResponseFuture").finish_non_exhaustive()
    }
}

impl<S, ReqB, ResB> Service<Request<ReqB>> for SentinelService<S>
where
    S: Service<Request<ReqB>, Response = Response<ResB>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: 'static,
    ReqB: Send + 'static,
    ResB: 'static,
{
    type Response = Response<ResponseBody<ResB>>;
    type Error = S::Error;
    type Future = ResponseFuture<ResB, S::Error>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<ReqB>) -> Self::Future {
        // The ready service goes into the future; its clone stays for the
        // next poll_ready (tower's usual swap).
        let clone = self.inner.clone();
        let inner = std::mem::replace(&mut self.inner, clone);
        ResponseFuture {
            inner: Box::pin(run(Arc::clone(&self.config), inner, request)),
        }
    }
}

async fn run<S, ReqB, ResB>(
    config: Arc<Config>,
    mut inner: S,
    request: Request<ReqB>,
) -> Result<Response<ResponseBody<ResB>>, S::Error>
where
    S: Service<Request<ReqB>, Response = Response<ResB>>,
{
    let (parts, body) = request.into_parts();
    let resource = config
        .namer
        .with_name(&parts, |name| config.names.get(name));
    let entered = {
        let origin = config.origin_of(&parts);
        let mut builder = resource.builder().entry_type(config.entry_type);
        if let Some(origin) = origin.as_deref() {
            builder = builder.origin(origin);
        }
        builder.enter_async().await
    };
    let entry = match entered {
        Ok(entry) => entry,
        Err(block) => {
            let grpc = is_grpc(&parts.headers);
            let response = blocked_response(&block, grpc, config.block.as_ref());
            return Ok(response.map(ResponseBody::blocked));
        }
    };
    // Dropped with this future (a client gone before the response), or
    // moved into the body, which exits it when it ends or is dropped.
    let result = inner.call(Request::from_parts(parts, body)).await;
    match result {
        Ok(response) => {
            if (config.is_error)(response.status(), response.headers()) {
                entry.set_error(&response.status());
            }
            // A gRPC status may come in the trailers too.
            let grpc = is_grpc(response.headers()).then_some(config);
            Ok(response.map(|body| ResponseBody::inner(body, entry, grpc)))
        }
        Err(error) => {
            entry.set_error(&error);
            Err(error)
        }
    }
}
