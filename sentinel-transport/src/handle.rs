//! The running server: its address, and stopping it.

use std::fmt;
use std::net::SocketAddr;

use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// A running command center. Dropping it stops the server and the
/// heartbeat at once (the port is free again as soon as the runtime has
/// cancelled the tasks); [`shutdown`](Self::shutdown) stops gracefully and
/// waits.
pub struct CommandCenterHandle {
    addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    server: Option<JoinHandle<()>>,
    heartbeat: Option<JoinHandle<()>>,
    runtime: Option<tokio::runtime::Runtime>,
}

impl CommandCenterHandle {
    pub(crate) fn new(
        addr: SocketAddr,
        stop: oneshot::Sender<()>,
        server: JoinHandle<()>,
        heartbeat: Option<JoinHandle<()>>,
        runtime: Option<tokio::runtime::Runtime>,
    ) -> Self {
        CommandCenterHandle {
            addr,
            stop: Some(stop),
            server: Some(server),
            heartbeat,
            runtime,
        }
    }

    /// The address the server listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The port the server listens on (the asked one, or the next free one).
    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// Stops accepting, lets requests in flight finish, stops the
    /// heartbeat, and returns when the listener is closed.
    pub async fn shutdown(mut self) {
        if let Some(heartbeat) = self.heartbeat.take() {
            heartbeat.abort();
        }
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(server) = self.server.take() {
            let _ = server.await;
        }
    }
}

impl Drop for CommandCenterHandle {
    fn drop(&mut self) {
        if let Some(heartbeat) = self.heartbeat.take() {
            heartbeat.abort();
        }
        if let Some(server) = self.server.take() {
            server.abort();
        }
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

impl fmt::Debug for CommandCenterHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CommandCenterHandle")
            .field("addr", &self.addr)
            .field("heartbeat", &self.heartbeat.is_some())
            .field("own_runtime", &self.runtime.is_some())
            .finish()
    }
}

/// Why the server did not start.
#[derive(Debug)]
#[non_exhaustive]
pub enum StartError {
    /// `start` was called outside a tokio runtime.
    NoRuntime,
    /// No port could be bound from the one asked on.
    Bind {
        /// The port asked for (or the one that failed).
        port: u16,
        /// The last error.
        error: std::io::Error,
    },
    /// A setting is not usable.
    Invalid(String),
    /// The runtime or the listener could not be set up.
    Runtime(std::io::Error),
}

impl fmt::Display for StartError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StartError::NoRuntime => f.write_str(
                "no tokio runtime: call start inside one, or use start_with_own_runtime",
            ),
            StartError::Bind { port, error } => {
                write!(
                    f,
                    "cannot listen on port {port} or the ports after it: {error}"
                )
            }
            StartError::Invalid(why) => write!(f, "invalid command center settings: {why}"),
            StartError::Runtime(e) => write!(f, "cannot start the command center: {e}"),
        }
    }
}

impl std::error::Error for StartError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            StartError::Bind { error, .. } | StartError::Runtime(error) => Some(error),
            _ => None,
        }
    }
}
