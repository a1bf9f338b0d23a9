//! The open connections of one server, and which to close when a new one
//! needs the room: the one that has waited longest without a request in
//! progress (a slow or silent client), never one whose request is being
//! answered.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::{Notify, oneshot};

/// The table of open connections.
#[derive(Debug, Default)]
pub(crate) struct Conns {
    table: Mutex<Table>,
    /// Told each time a connection leaves the table (its socket closed).
    left: Notify,
}

#[derive(Debug, Default)]
struct Table {
    next_id: u64,
    /// Counts the moments connections turn idle: a smaller tick is an
    /// older one (an order without reading a clock).
    next_tick: u64,
    open: HashMap<u64, Conn>,
}

impl Table {
    fn tick(&mut self) -> u64 {
        self.next_tick += 1;
        self.next_tick
    }
}

#[derive(Debug)]
struct Conn {
    /// Since which tick no request of it is being answered; `None` while
    /// one is.
    idle_since: Option<u64>,
    /// Dropped (or sent) to close the connection.
    close: Option<oneshot::Sender<()>>,
}

/// A connection's place in the table; leaving the table when dropped.
#[derive(Debug)]
pub(crate) struct Slot {
    conns: Arc<Conns>,
    id: u64,
}

impl Conns {
    fn table(&self) -> std::sync::MutexGuard<'_, Table> {
        // The table is consistent after every statement: a panic elsewhere
        // while it was held leaves nothing half-done.
        self.table.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// How many connections are open.
    pub(crate) fn len(&self) -> usize {
        self.table().open.len()
    }

    /// Waits until at most `limit` connections are open: the ones told to
    /// close to make room still hold their sockets until their tasks end,
    /// and a flood of new connections must not outrun them.
    pub(crate) async fn at_most(&self, limit: usize) {
        loop {
            let left = self.left.notified();
            if self.len() <= limit {
                return;
            }
            left.await;
        }
    }

    /// Registers a new connection, idle from now on; the receiver
    /// resolves when the connection must close to make room for another.
    pub(crate) fn open(self: &Arc<Self>) -> (Slot, oneshot::Receiver<()>) {
        let (tx, rx) = oneshot::channel();
        let mut table = self.table();
        let id = table.next_id;
        table.next_id += 1;
        let now = table.tick();
        table.open.insert(
            id,
            Conn {
                idle_since: Some(now),
                close: Some(tx),
            },
        );
        let slot = Slot {
            conns: Arc::clone(self),
            id,
        };
        (slot, rx)
    }

    /// Closes the connection idle the longest, if any is idle; true when
    /// one was told to close.
    pub(crate) fn evict_oldest_idle(&self) -> bool {
        let mut table = self.table();
        let oldest = table
            .open
            .iter()
            .filter(|(_, c)| c.close.is_some())
            .filter_map(|(id, c)| c.idle_since.map(|t| (t, *id)))
            .min();
        let Some((_, id)) = oldest else {
            return false;
        };
        if let Some(close) = table.open.get_mut(&id).and_then(|c| c.close.take()) {
            let _ = close.send(());
        }
        true
    }
}

impl Slot {
    /// A request of this connection is being answered.
    pub(crate) fn busy(&self) {
        if let Some(c) = self.conns.table().open.get_mut(&self.id) {
            c.idle_since = None;
        }
    }

    /// The connection's answer is done: it is idle from now on.
    pub(crate) fn idle(&self) {
        let mut table = self.conns.table();
        let now = table.tick();
        if let Some(c) = table.open.get_mut(&self.id) {
            c.idle_since = Some(now);
        }
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.conns.table().open.remove(&self.id);
        self.conns.left.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_longest_idle_connection_is_closed_first_and_a_busy_one_never() {
        let conns = Arc::new(Conns::default());
        let (old, mut old_rx) = conns.open();
        let (busy, mut busy_rx) = conns.open();
        busy.busy();
        let (new, mut new_rx) = conns.open();
        // A connection answered and idle again counts from its answer.
        busy.idle();
        busy.busy();
        assert_eq!(conns.len(), 3);
        assert!(conns.evict_oldest_idle());
        assert!(old_rx.try_recv().is_ok());
        assert!(conns.evict_oldest_idle());
        assert!(new_rx.try_recv().is_ok());
        // Only the busy one is left: nothing more to close.
        assert!(!conns.evict_oldest_idle());
        assert!(busy_rx.try_recv().is_err());
        drop((old, new));
        assert_eq!(conns.len(), 1);
        drop(busy);
        assert_eq!(conns.len(), 0);
    }
}
