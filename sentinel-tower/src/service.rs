//! `SentinelService`: names the request's resource, enters it, and calls
//! the inner service (or answers the block), all in `call`; the response
//! future records the outcome.

use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;
use std::task::{Context, Poll};

use http::request::Parts;
use http::{Request, Response};
use http_body::Body;
use sentinel_flow_core::flow::{FlowGrade, FlowQuota, FlowRule};
use sentinel_flow_core::{BlockError, BlockKind, Entering, Resource};
use tower_service::Service;

use crate::block::{
    BlockReply, accepts_json, blocked_response, duplicate_origin_response, is_grpc,
};
use crate::body::{BodyKind, WrappedBody};
use crate::config::{Config, DuplicateOrigin};
use crate::future::{Outcome, ResponseFuture};
use crate::name::Head;

/// The service made by [`SentinelLayer`](crate::SentinelLayer); `K`, the
/// [`BodyKind`] of its responses.
#[derive(Clone)]
pub struct SentinelService<S, K = WrappedBody> {
    inner: S,
    config: Arc<Config>,
    kind: PhantomData<fn() -> K>,
}

impl<S, K> SentinelService<S, K> {
    pub(crate) fn new(inner: S, config: Arc<Config>) -> Self {
        SentinelService {
            inner,
            config,
            kind: PhantomData,
        }
    }
}

impl<S: fmt::Debug, K> fmt::Debug for SentinelService<S, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SentinelService")
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
}

/// A request's admission: entered, queued, or refused, and the quota for
/// the rate-limit headers when they are wanted.
struct Admission {
    entering: Result<Entering<'static>, Refusal>,
    quota: Option<FlowQuota>,
}

/// Why a request is not let in.
enum Refusal {
    /// A rule or slot refused it (or, with `require_origin`, it names no
    /// origin where authority rules apply).
    Blocked(BlockError),
    /// Its origin header appears more than once.
    DuplicateOrigin,
}

impl Admission {
    #[cold]
    fn refused(refusal: Refusal) -> Self {
        Admission {
            entering: Err(refusal),
            quota: None,
        }
    }
}

impl Config {
    /// Names and enters the resource of a request.
    #[inline]
    fn admit(&self, head: &impl Head, parts: Option<&Parts>) -> Admission {
        let resource = match self.route.get(head.method(), head.extensions()) {
            Some(resource) => resource,
            None => match self.namer.find(&self.names, head) {
                Some(resource) => {
                    self.route
                        .remember(head.method(), head.extensions(), resource);
                    resource
                }
                None => return self.admit_named(head, parts),
            },
        };
        self.enter(resource, head, parts)
    }

    /// [`admit`](Self::admit) for a name the index does not find (first
    /// sight, a cleaned path, a user's namer, past the index's room).
    #[cold]
    #[inline(never)]
    fn admit_named(&self, head: &impl Head, parts: Option<&Parts>) -> Admission {
        self.namer
            .with_resource(&self.names, head, parts, |resource| {
                if !self.namer.needs_parts() {
                    self.route
                        .remember(head.method(), head.extensions(), resource);
                }
                self.enter(resource, head, parts)
            })
    }

    /// Enters `resource` for a request.
    #[inline]
    fn enter(
        &self,
        resource: &Resource<'static>,
        head: &impl Head,
        parts: Option<&Parts>,
    ) -> Admission {
        let origin = match self.origin_of(head, parts) {
            Ok(origin) => origin,
            Err(DuplicateOrigin) => return Admission::refused(Refusal::DuplicateOrigin),
        };
        let mut builder = resource.builder().entry_type(self.entry_type);
        match origin.as_deref() {
            Some(origin) => builder = builder.origin(origin),
            None if self.require_origin => {
                if let Some(block) = self.unnamed_refused(resource) {
                    return Admission::refused(Refusal::Blocked(block));
                }
            }
            None => {}
        }
        let entering = builder.enter_or_queue();
        let quota = match &entering {
            Ok(_) if self.headers.on_admitted && self.headers.any() => resource.flow_quota(None),
            Ok(_) => None,
            Err(block) => qps_rule(block)
                .filter(|_| self.headers.any())
                .and_then(|rule| resource.flow_quota_refused(rule)),
        };
        Admission {
            entering: entering.map_err(Refusal::Blocked),
            quota,
        }
    }

    /// The authority block of a request that names no origin, when the
    /// resource has authority rules (and the instance is on): refused by
    /// the resource's first one, before the entry.
    #[cold]
    #[inline(never)]
    fn unnamed_refused(&self, resource: &Resource<'static>) -> Option<BlockError> {
        if !self.names.sentinel().is_enabled() {
            return None;
        }
        let rule = resource.authority_rule()?;
        Some(BlockError::by_rule(BlockKind::Authority, rule))
    }

    #[inline(always)]
    fn outcome(&self, quota: Option<FlowQuota>) -> Outcome {
        Outcome {
            is_error: self.is_error.clone(),
            headers: quota.map(|quota| Box::new((quota, self.headers))),
        }
    }

    #[cold]
    fn refused(
        &self,
        refusal: &Refusal,
        head: &impl Head,
        quota: Option<FlowQuota>,
    ) -> Response<bytes::Bytes> {
        let headers = head.headers();
        let block = match refusal {
            Refusal::Blocked(block) => block,
            Refusal::DuplicateOrigin => return duplicate_origin_response(is_grpc(headers)),
        };
        let reply = BlockReply {
            grpc: is_grpc(headers),
            json: self.block.is_none() && accepts_json(headers),
            quota,
            headers: self.headers,
            custom: self.block.as_ref(),
        };
        blocked_response(block, reply)
    }
}

/// The QPS flow rule of a block, if a QPS flow rule blocked.
fn qps_rule(block: &BlockError) -> Option<&FlowRule> {
    if block.kind() != BlockKind::Flow {
        return None;
    }
    block
        .rule_as::<FlowRule>()
        .filter(|rule| rule.grade == FlowGrade::Qps)
}

impl<S, ReqB, ResB, K> Service<Request<ReqB>> for SentinelService<S, K>
where
    S: Service<Request<ReqB>, Response = Response<ResB>> + Clone,
    ResB: Body,
    K: BodyKind<ResB>,
{
    type Response = Response<K::Body>;
    type Error = S::Error;
    type Future = ResponseFuture<S, ReqB, K>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<ReqB>) -> Self::Future {
        // Borrowed apart: no reference count on the config per request.
        let SentinelService { inner, config, .. } = self;
        if config.needs_parts() {
            return call_with_parts(inner, config, request);
        }
        let admission = config.admit(&request, None);
        // The usual case matched here, not in `proceed`: the request then
        // moves once, straight into the inner future.
        match admission.entering {
            Ok(Entering::Entered(entry)) => {
                let outcome = config.outcome(admission.quota);
                ResponseFuture::called(entry, outcome, || inner.call(request))
            }
            entering => proceed(
                inner,
                config,
                Admission {
                    entering,
                    quota: admission.quota,
                },
                request,
            ),
        }
    }
}

/// `call` for a user function that reads `&Parts`: the request taken
/// apart. Out of line, so that the usual path moves the request once.
#[inline(never)]
fn call_with_parts<S, ReqB, K>(
    inner: &mut S,
    config: &Config,
    request: Request<ReqB>,
) -> ResponseFuture<S, ReqB, K>
where
    S: Service<Request<ReqB>> + Clone,
{
    let (parts, body) = request.into_parts();
    let admission = config.admit(&parts, Some(&parts));
    let request = Request::from_parts(parts, body);
    proceed(inner, config, admission, request)
}

/// Calls the inner service, or queues or answers the request: for a
/// request `call` did not call at once (queued or blocked), and for the
/// `&Parts` path.
#[inline(always)]
fn proceed<S, ReqB, K>(
    inner: &mut S,
    config: &Config,
    admission: Admission,
    request: Request<ReqB>,
) -> ResponseFuture<S, ReqB, K>
where
    S: Service<Request<ReqB>> + Clone,
{
    match admission.entering {
        Ok(Entering::Entered(entry)) => {
            // The inner service was made ready by `poll_ready`: call it
            // now, as a layer without a wait does.
            // The inner future is made inside the response future's
            // constructor, last: built where the response future keeps it.
            let outcome = config.outcome(admission.quota);
            ResponseFuture::called(entry, outcome, || inner.call(request))
        }
        Ok(Entering::Queued(queued)) => {
            // The ready service goes into the future, which calls it
            // after the wait; its clone stays for the next poll_ready
            // (tower's usual swap).
            let clone = inner.clone();
            let ready = std::mem::replace(inner, clone);
            ResponseFuture::queued(queued, ready, request, config.outcome(admission.quota))
        }
        Err(refusal) => {
            ResponseFuture::blocked(config.refused(&refusal, &request, admission.quota))
        }
    }
}
