//! A bounded cache of [`Resource`] handles by name, so a known name costs
//! one lookup.
//!
//! Names of the form `METHOD:path` with a standard method are kept in one
//! map per method, keyed by the path: the layer's default names are then
//! found from the request's method and path as they are, with no name
//! joined per request (a per-thread buffer, three copies) and a shorter
//! key hashed.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use arc_swap::ArcSwap;
use http::Method;
use sentinel_core::{Resource, Sentinel};

use crate::name::{OVERFLOW_RESOURCE, with_joined};

type Map = HashMap<Box<str>, Arc<Resource<'static>>, foldhash::fast::RandomState>;

/// The methods with a map of their own, in slot order.
const METHODS: [Method; 9] = [
    Method::GET,
    Method::POST,
    Method::PUT,
    Method::DELETE,
    Method::HEAD,
    Method::OPTIONS,
    Method::PATCH,
    Method::CONNECT,
    Method::TRACE,
];

/// The slot of a standard method.
#[inline]
fn slot_of(method: &Method) -> Option<usize> {
    METHODS.iter().position(|m| m == method)
}

/// The slot and path of a `METHOD:path` name with a standard method.
fn split(name: &str) -> Option<(usize, &str)> {
    let (method, path) = name.split_once(':')?;
    let slot = METHODS.iter().position(|m| m.as_str() == method)?;
    Some((slot, path))
}

/// One snapshot of the cache.
#[derive(Clone, Default)]
struct Names {
    /// Paths of `METHOD:path` names, by the method's slot.
    by_method: [Map; METHODS.len()],
    /// Every other name, whole.
    other: Map,
    /// Names in all maps.
    len: usize,
}

impl Names {
    fn get(&self, name: &str) -> Option<&Arc<Resource<'static>>> {
        match split(name) {
            Some((slot, path)) => self.by_method[slot].get(path),
            None => self.other.get(name),
        }
    }

    fn insert(&mut self, name: &str, resource: Arc<Resource<'static>>) {
        let map = match split(name) {
            Some((slot, path)) => self.by_method[slot].insert(path.into(), resource),
            None => self.other.insert(name.into(), resource),
        };
        if map.is_none() {
            self.len += 1;
        }
    }
}

/// Resource handles by name, at most `max` of them; read without a lock.
pub(crate) struct NameCache {
    sentinel: &'static Sentinel,
    map: ArcSwap<Names>,
    max: usize,
    overflow: OnceLock<Resource<'static>>,
    refused: AtomicU64,
    insert: Mutex<()>,
}

impl NameCache {
    pub(crate) fn new(sentinel: &'static Sentinel, max: usize) -> Self {
        NameCache {
            sentinel,
            map: ArcSwap::from_pointee(Names::default()),
            max,
            overflow: OnceLock::new(),
            refused: AtomicU64::new(0),
            insert: Mutex::new(()),
        }
    }

    pub(crate) fn sentinel(&self) -> &'static Sentinel {
        self.sentinel
    }

    pub(crate) fn refused(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }

    /// Calls `f` with the handle of `method:path`: for a standard method
    /// and a known name, found without joining the name.
    #[inline]
    pub(crate) fn with_route<T>(
        &self,
        method: &Method,
        path: &str,
        f: impl FnOnce(&Resource<'static>) -> T,
    ) -> T {
        if let Some(slot) = slot_of(method)
            && let Some(resource) = self.map.load().by_method[slot].get(path)
        {
            return f(resource);
        }
        with_joined(method.as_str(), path, |name| self.with(name, f))
    }

    /// Calls `f` with the handle of `name`, made on first sight; the
    /// overflow resource once `max` names are known, unless a rule names
    /// it. A known name costs a lock-free map read and no reference count.
    #[inline]
    pub(crate) fn with<T>(&self, name: &str, f: impl FnOnce(&Resource<'static>) -> T) -> T {
        let map = self.map.load();
        if let Some(resource) = map.get(name) {
            return f(resource);
        }
        if map.len >= self.max && !self.sentinel.is_reserved(name) {
            // Full: no lock for names that can never be added (asking the
            // instance takes none either).
            return f(self.overflow(name));
        }
        drop(map);
        f(&self.insert(name))
    }

    #[cold]
    fn insert(&self, name: &str) -> Arc<Resource<'static>> {
        // One writer at a time: the maps are copied on write, and names
        // are bounded, so a copy is at most `max` entries.
        let _writer = self
            .insert
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let current = self.map.load_full();
        if let Some(resource) = current.get(name) {
            return Arc::clone(resource);
        }
        // A name that rules mention is cached past the cap: their names
        // are bounded by the rules, not by traffic.
        if current.len >= self.max && !self.sentinel.is_reserved(name) {
            return Arc::new(self.overflow(name).clone());
        }
        let resource = Arc::new(self.sentinel.resource(name));
        let mut next = Names::clone(&current);
        next.insert(name, Arc::clone(&resource));
        self.map.store(Arc::new(next));
        resource
    }

    /// The overflow resource, for `name` refused by the cap.
    #[cold]
    fn overflow(&self, name: &str) -> &Resource<'static> {
        if self.refused.fetch_add(1, Ordering::Relaxed) == 0 {
            tracing::warn!(
                resource = name,
                max = self.max,
                overflow = OVERFLOW_RESOURCE,
                "sentinel-tower: resource name cap reached; further names enter the overflow resource"
            );
        }
        self.overflow
            .get_or_init(|| self.sentinel.resource(OVERFLOW_RESOURCE))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_past_the_cap_share_the_overflow_resource() {
        let sentinel: &'static Sentinel = Box::leak(Box::new(Sentinel::builder().build()));
        let cache = NameCache::new(sentinel, 3);
        let name = |n: &str| cache.with(n, |resource| resource.name().to_owned());
        let route = |m: Method, p: &str| cache.with_route(&m, p, |r| r.name().to_owned());
        assert_eq!(name("a"), "a");
        assert_eq!(route(Method::GET, "/b"), "GET:/b");
        // The same name, by either way in, is one entry.
        assert_eq!(name("GET:/b"), "GET:/b");
        assert_eq!(
            route(Method::from_bytes(b"PURGE").unwrap(), "/c"),
            "PURGE:/c"
        );
        assert_eq!(name("d"), OVERFLOW_RESOURCE);
        assert_eq!(route(Method::POST, "/b"), OVERFLOW_RESOURCE);
        assert_eq!(name("a"), "a");
        assert_eq!(route(Method::GET, "/b"), "GET:/b");
        assert_eq!(cache.refused(), 2);
    }
}
