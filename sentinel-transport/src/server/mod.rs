//! The HTTP server under the command routes, built so that no client can
//! starve it: a bounded number of connections (the one idle the longest
//! makes room for a new one), a deadline on every request head and body,
//! a 413 before reading a body announced over the cap, a 500 for a handler
//! that panics, and an accept loop that keeps going when the process runs
//! out of file descriptors.

mod catch;
mod conns;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::http::{HeaderValue, Request, StatusCode, header};
use axum::response::Response;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{oneshot, watch};
use tokio::task::JoinSet;

use crate::commands::{BodyReadTimeout, failure};
use catch::CatchPanic;
pub(crate) use catch::panic_message;
use conns::{Conns, Slot};

/// How long the accept loop waits after a failed accept (out of file
/// descriptors, most often) before it tries again.
const ACCEPT_RETRY: Duration = Duration::from_millis(10);

/// What bounds the server's use of memory, descriptors and time.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Limits {
    pub(crate) max_connections: usize,
    pub(crate) header_read_timeout: Duration,
    pub(crate) body_read_timeout: Duration,
    pub(crate) max_body_bytes: usize,
}

/// The two ends of the connection a request came on (a request extension).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Connection {
    /// The address the client connected to: one of this machine's.
    pub(crate) local: SocketAddr,
    /// The client's address.
    pub(crate) peer: SocketAddr,
}

/// Serves `router` on `listener` until `stop` resolves (or is dropped);
/// then answers the requests in progress, closes every connection and
/// returns. Aborting the task closes every connection at once.
pub(crate) async fn serve(
    listener: TcpListener,
    router: Router,
    limits: Limits,
    stop: oneshot::Receiver<()>,
) {
    let conns = Arc::new(Conns::default());
    let (shutdown, shutting_down) = watch::channel(false);
    let service = TowerToHyperService::new(router);
    let mut tasks = JoinSet::new();
    let mut stop = stop;
    let mut accept_failing = false;
    let mut refusing = false;
    loop {
        // Past the cap, a connection told to close still holds its socket
        // until its task ends: accept the next one only once it has, so
        // the sockets held stay within the cap plus the one accepted.
        tokio::select! {
            _ = &mut stop => break,
            () = conns.at_most(limits.max_connections) => {}
        }
        let accepted = tokio::select! {
            _ = &mut stop => break,
            accepted = listener.accept() => accepted,
        };
        while tasks.try_join_next().is_some() {}
        let (stream, peer) = match accepted {
            Ok(accepted) => {
                if accept_failing {
                    tracing::info!("sentinel command center: accepting connections again");
                    accept_failing = false;
                }
                accepted
            }
            Err(error) => {
                // Most often out of file descriptors: an idle connection
                // gives one back, and the connection waiting is taken on
                // the next try.
                if !accept_failing {
                    tracing::warn!(%error, open = conns.len(), "sentinel command center: cannot accept a connection; closing the longest idle one and retrying");
                    accept_failing = true;
                }
                conns.evict_oldest_idle();
                tokio::time::sleep(ACCEPT_RETRY).await;
                continue;
            }
        };
        if conns.len() >= limits.max_connections && !conns.evict_oldest_idle() {
            // Every connection is being answered: this one waits for none.
            if !refusing {
                tracing::warn!(
                    limit = limits.max_connections,
                    "sentinel command center: every connection is busy; refusing new ones until one is done"
                );
                refusing = true;
            }
            drop(stream);
            continue;
        }
        refusing = false;
        let Ok(local) = stream.local_addr() else {
            continue;
        };
        let (slot, evicted) = conns.open();
        tasks.spawn(connection(
            stream,
            Connection { local, peer },
            slot,
            evicted,
            service.clone(),
            limits,
            shutting_down.clone(),
        ));
    }
    drop(listener);
    let _ = shutdown.send(true);
    while tasks.join_next().await.is_some() {}
}

/// Serves one connection until the client closes it, a deadline passes, it
/// is evicted to make room, or the server stops.
async fn connection(
    stream: TcpStream,
    info: Connection,
    slot: Slot,
    mut evicted: oneshot::Receiver<()>,
    service: TowerToHyperService<Router>,
    limits: Limits,
    mut shutting_down: watch::Receiver<bool>,
) {
    let slot = Arc::new(slot);
    let handler = hyper::service::service_fn(move |request: Request<Incoming>| {
        let (service, slot) = (service.clone(), Arc::clone(&slot));
        async move {
            slot.busy();
            let _idle_after = IdleAfter(&slot);
            Ok::<_, Infallible>(respond(&service, request, info, limits).await)
        }
    });
    let served = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        .serve_connection(TokioIo::new(stream), handler);
    let mut served = std::pin::pin!(served);
    let mut draining = false;
    loop {
        tokio::select! {
            _ = served.as_mut() => break,
            _ = &mut evicted => break,
            _ = shutting_down.changed(), if !draining => {
                draining = true;
                served.as_mut().graceful_shutdown();
            }
        }
    }
}

/// Marks the connection idle when the answer is done (or dropped).
struct IdleAfter<'a>(&'a Slot);

impl Drop for IdleAfter<'_> {
    fn drop(&mut self) {
        self.0.idle();
    }
}

async fn respond(
    service: &TowerToHyperService<Router>,
    mut request: Request<Incoming>,
    info: Connection,
    limits: Limits,
) -> Response {
    let announced = announced_length(&request);
    if let Some(length) = announced.filter(|&n| n > limits.max_body_bytes as u64) {
        let mut answer = failure(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!(
                "the body announced ({length} bytes) is over this server's cap of {} bytes (CommandCenter::max_body_bytes)",
                limits.max_body_bytes
            ),
        );
        answer
            .headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
        return answer;
    }
    request.extensions_mut().insert(info);
    request
        .extensions_mut()
        .insert(BodyReadTimeout(limits.body_read_timeout));
    let path = request.uri().path().to_owned();
    let answer = hyper::service::Service::call(service, request);
    match CatchPanic::new(answer).await {
        Ok(Ok(answer)) => answer,
        Ok(Err(never)) => match never {},
        Err(message) => {
            tracing::error!(%path, %message, "sentinel command center: a command panicked; answered 500, still serving");
            failure(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("the command failed: {message}"),
            )
        }
    }
}

/// The body length a request announces, when it announces one.
fn announced_length<B>(request: &Request<B>) -> Option<u64> {
    request
        .headers()
        .get(header::CONTENT_LENGTH)?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// The most connections the process's descriptor limit leaves room for:
/// half the soft limit, the other half kept for the rest of the process
/// (log and rule files, other sockets). `None` when the limit is unknown
/// or unlimited.
pub(crate) fn descriptor_budget() -> Option<usize> {
    #[cfg(unix)]
    {
        let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile);
        limit
            .current
            .and_then(|soft| usize::try_from(soft / 2).ok())
    }
    #[cfg(not(unix))]
    {
        None
    }
}
