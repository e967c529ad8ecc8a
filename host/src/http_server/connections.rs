//! The connections a server holds, counted per peer address and in total.
//! A connection is *idle* while no request of it is being answered (it has
//! not sent a whole request head yet, or waits between requests); only
//! idle ones are ever shed. A new connection over a cap takes the place of
//! the oldest idle one (its own address's, for the per-address cap), or is
//! closed at once when every one is busy; when the process runs out of
//! descriptors the oldest idle connection is shed so accepting can go on.

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use tokio::sync::Notify;

/// The caps: connections one address may hold, and all of them together.
#[derive(Debug, Clone, Copy)]
pub struct Caps {
    /// Per peer address (connections without an address, a Unix socket's,
    /// count only in the total).
    pub per_address: usize,
    /// In total.
    pub total: usize,
}

/// Every connection held.
pub struct Table {
    caps: Caps,
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    next: u64,
    total: usize,
    per_address: HashMap<IpAddr, usize>,
    /// Idle connections by age (oldest first): their address and the
    /// signal that sheds them.
    idle: BTreeMap<u64, (Option<IpAddr>, Arc<Notify>)>,
}

/// One connection's place in the table; dropping it gives the place back.
pub struct Slot {
    id: u64,
    address: Option<IpAddr>,
    table: Arc<Table>,
    shed: Arc<Notify>,
    /// Since when it is idle (None: a request is being answered).
    idle_since: Mutex<Option<Instant>>,
}

impl Table {
    /// An empty table with `caps`.
    pub fn new(caps: Caps) -> Arc<Self> {
        Arc::new(Self {
            caps,
            inner: Mutex::new(Inner::default()),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A place for a new connection from `address`, shedding an idle one
    /// where a cap is reached; None when every connection in the way is busy.
    pub fn admit(self: &Arc<Self>, address: Option<IpAddr>) -> Option<Slot> {
        let mut inner = self.lock();
        if let Some(ip) = address
            && inner.per_address.get(&ip).copied().unwrap_or(0) >= self.caps.per_address
        {
            let own = inner.idle.iter().find(|(_, (a, _))| *a == Some(ip)).map(|(id, _)| *id);
            inner.shed(own?);
        }
        if inner.total >= self.caps.total {
            let oldest = inner.idle.keys().next().copied();
            inner.shed(oldest?);
        }
        inner.next += 1;
        inner.total += 1;
        if let Some(ip) = address {
            *inner.per_address.entry(ip).or_default() += 1;
        }
        let (id, shed) = (inner.next, Arc::new(Notify::new()));
        inner.idle.insert(id, (address, shed.clone()));
        Some(Slot {
            id,
            address,
            table: self.clone(),
            shed,
            idle_since: Mutex::new(Some(Instant::now())),
        })
    }

    /// Sheds the oldest idle connection (when descriptors run out);
    /// whether there was one.
    pub fn shed_oldest_idle(&self) -> bool {
        let mut inner = self.lock();
        let oldest = inner.idle.keys().next().copied();
        oldest.is_some_and(|id| {
            inner.shed(id);
            true
        })
    }

    /// Connections held now.
    pub fn held(&self) -> usize {
        self.lock().total
    }
}

impl Inner {
    /// Signals idle connection `id` to close; it leaves the idle list at
    /// once, so it is never shed twice.
    fn shed(&mut self, id: u64) {
        if let Some((_, signal)) = self.idle.remove(&id) {
            signal.notify_one();
        }
    }
}

impl Slot {
    /// A request is being answered: not to be shed until it is done.
    pub fn busy(&self) {
        *self.idle_since.lock().unwrap_or_else(|e| e.into_inner()) = None;
        self.table.lock().idle.remove(&self.id);
    }

    /// The answer is given: idle (and sheddable) again.
    pub fn idle(&self) {
        *self.idle_since.lock().unwrap_or_else(|e| e.into_inner()) = Some(Instant::now());
        self.table
            .lock()
            .idle
            .insert(self.id, (self.address, self.shed.clone()));
    }

    /// Since when the connection has been idle, if it is.
    pub fn idle_since(&self) -> Option<Instant> {
        *self.idle_since.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Resolves when the table sheds this connection.
    pub async fn shed(&self) {
        self.shed.notified().await;
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut inner = self.table.lock();
        inner.idle.remove(&self.id);
        inner.total -= 1;
        if let Some(ip) = self.address
            && let Some(count) = inner.per_address.get_mut(&ip)
        {
            *count -= 1;
            if *count == 0 {
                inner.per_address.remove(&ip);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use futures_util::FutureExt;

    use super::*;

    fn ip(last: u8) -> Option<IpAddr> {
        Some(IpAddr::from([127, 0, 0, last]))
    }

    #[test]
    fn a_cap_sheds_the_oldest_idle_connection_and_never_a_busy_one() {
        let table = Table::new(Caps {
            per_address: 2,
            total: 3,
        });
        let a1 = table.admit(ip(1)).unwrap();
        let a2 = table.admit(ip(1)).unwrap();
        // Over the address's cap: its oldest idle one goes.
        let a3 = table.admit(ip(1)).unwrap();
        assert!(a1.shed.notified().now_or_never().is_some());
        drop(a1);
        a2.busy();
        a3.busy();
        // Every one of the address's is busy: the newcomer is refused.
        assert!(table.admit(ip(1)).is_none());
        let b1 = table.admit(ip(2)).unwrap();
        // The total is reached, the only idle one is b1.
        let c1 = table.admit(ip(3)).unwrap();
        assert!(b1.shed.notified().now_or_never().is_some());
        drop(b1);
        c1.busy();
        assert!(table.admit(ip(4)).is_none(), "all busy: refused");
        assert!(!table.shed_oldest_idle());
        a2.idle();
        assert!(table.shed_oldest_idle());
        assert_eq!(table.held(), 3);
        drop((a2, a3, c1));
        assert_eq!(table.held(), 0);
    }
}
