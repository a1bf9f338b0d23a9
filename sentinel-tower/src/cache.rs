//! A bounded cache of [`Resource`] handles by name, so a known name costs
//! one lookup; the cap on names and the overflow resource past it.
//!
//! Names of the form `METHOD:path` with a standard method are kept in one
//! map per method, keyed by the path: the layer's default names are then
//! found from the request's method and path as they are, with no name
//! joined per request (a per-thread buffer, three copies) and a shorter
//! key hashed. The first 2 048 names are also in an index of `OnceLock`s
//! (by method and path), read with atomic loads only: a known name costs
//! a hash, a load and a compare, not an `ArcSwap` load and its guard. A
//! request path with identifiers is found there by the name it cleans to
//! without writing that name ([`Key`]: hashed and compared piece by
//! piece).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use arc_swap::ArcSwap;
use http::Method;
use sentinel_flow_core::{Resource, Sentinel};

use crate::buffer::with_joined;
use crate::key::{Key, Lookup};
use crate::segment::first_id;

/// The resource every request is entered as once the layer has seen
/// [`max_resource_names`](crate::SentinelLayer::max_resource_names) distinct
/// names: still counted and still checked (rules can name it), never a new
/// resource per name. A name that a loaded rule mentions
/// ([`Sentinel::is_reserved`](sentinel_flow_core::Sentinel::is_reserved)) is
/// never sent here: it keeps its own resource, past the cap, so its rules
/// apply.
pub const OVERFLOW_RESOURCE: &str = "sentinel-flow-tower:overflow";

/// The default cap on distinct resource names one layer makes.
pub const DEFAULT_MAX_RESOURCE_NAMES: usize = 1_000;

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

/// The key of a name that is not `METHOD:path` with a standard method.
const WHOLE: u8 = METHODS.len() as u8;

/// The largest index: 4 096 slots (64 KiB), room for 2 048 names.
const MAX_SLOTS: usize = 4_096;

/// The first names of the cache, found with one hash and a probe of
/// `OnceLock`s (an atomic load each): no `ArcSwap` load, no guard, no
/// reference count per request. Written only under the cache's insert
/// lock, never more than half full (so a probe always ends at an empty
/// slot), never emptied; names past its room are in the maps only.
struct Index {
    slots: Box<[OnceLock<Box<Slot>>]>,
    hasher: foldhash::fast::RandomState,
    /// Names in the index (written under the insert lock).
    len: AtomicUsize,
}

/// A name in the index: its method's slot (or [`WHOLE`]) and its path (or
/// the whole name).
struct Slot {
    method: u8,
    text: Box<str>,
    resource: Arc<Resource<'static>>,
}

impl Index {
    /// Room for `max` names at half load, within [`MAX_SLOTS`].
    fn new(max: usize) -> Self {
        let slots = max
            .saturating_mul(2)
            .next_power_of_two()
            .clamp(16, MAX_SLOTS);
        Index {
            slots: (0..slots).map(|_| OnceLock::new()).collect(),
            hasher: foldhash::fast::RandomState::default(),
            len: AtomicUsize::new(0),
        }
    }

    #[inline(always)]
    fn start(&self, method: u8, key: &(impl Lookup + ?Sized)) -> usize {
        let hash = key.hash(&self.hasher) ^ u64::from(method).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        hash as usize & (self.slots.len() - 1)
    }

    /// The resource of the name `key` stands for (a text, or a request
    /// path as the text it cleans to).
    #[inline(always)]
    fn find(&self, method: u8, key: &(impl Lookup + ?Sized)) -> Option<&Resource<'static>> {
        let mask = self.slots.len() - 1;
        let mut at = self.start(method, key);
        loop {
            // An empty slot ends the probe: the index is at most half full.
            let slot = self.slots[at].get()?;
            if slot.method == method && key.matches(&slot.text) {
                return Some(&slot.resource);
            }
            at = (at + 1) & mask;
        }
    }

    /// The resource of the name `text` (a path or a whole name).
    #[inline]
    fn find_text(&self, method: u8, text: &str) -> Option<&Resource<'static>> {
        self.find(method, &Key::of_text(text)?)
    }

    /// Adds a name not in the index yet, if there is room; called under
    /// the cache's insert lock only.
    fn add(&self, method: u8, text: &str, resource: &Arc<Resource<'static>>) {
        let len = self.len.load(Ordering::Relaxed);
        // A text with more `{id}`s than a key holds is left to the maps.
        let (true, Some(key)) = (len < self.slots.len() / 2, Key::of_text(text)) else {
            return;
        };
        let mask = self.slots.len() - 1;
        let mut at = self.start(method, &key);
        while self.slots[at].get().is_some() {
            at = (at + 1) & mask;
        }
        let slot = Slot {
            method,
            text: text.into(),
            resource: Arc::clone(resource),
        };
        let _ = self.slots[at].set(Box::new(slot));
        self.len.store(len + 1, Ordering::Relaxed);
    }
}

/// The index key of a name: its method's slot and path, or the whole name.
fn key(name: &str) -> (u8, &str) {
    match split(name) {
        Some((slot, path)) => (slot as u8, path),
        None => (WHOLE, name),
    }
}

/// Resource handles by name, at most `max` of them; read without a lock.
pub(crate) struct NameCache {
    sentinel: &'static Sentinel,
    index: Index,
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
            index: Index::new(max),
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
        if let Some(slot) = slot_of(method) {
            if let Some(resource) = self.index.find_text(slot as u8, path) {
                return f(resource);
            }
            // Past the index's room: the maps, still without a join.
            if let Some(resource) = self.map.load().by_method[slot].get(path) {
                return f(resource);
            }
        }
        with_joined(method.as_str(), path, |name| self.with(name, f))
    }

    /// The handle of `method:template` if the index holds it (a standard
    /// method, one of the first names): an index slot is never emptied, so
    /// the handle lives as long as the cache.
    #[inline]
    pub(crate) fn find_route(&self, method: &Method, template: &str) -> Option<&Resource<'static>> {
        self.index.find_text(slot_of(method)? as u8, template)
    }

    /// As [`find_route`](Self::find_route), for a request path: the handle
    /// of `method:` + the path as [`clean_path`](crate::clean_path) cleans
    /// it, found without writing the cleaned path.
    #[inline(always)]
    pub(crate) fn find_path(&self, method: &Method, path: &str) -> Option<&Resource<'static>> {
        let slot = slot_of(method)? as u8;
        match first_id(path) {
            // Most paths have no identifier: the path is the name's text.
            None => self.index.find(slot, path),
            Some(first) => self.index.find(slot, &Key::of_path(path, first)?),
        }
    }

    /// Calls `f` with the handle of `name`, made on first sight; the
    /// overflow resource once `max` names are known, unless a rule names
    /// it. A known name costs a lock-free map read and no reference count.
    #[inline]
    pub(crate) fn with<T>(&self, name: &str, f: impl FnOnce(&Resource<'static>) -> T) -> T {
        let (method, text) = key(name);
        if let Some(resource) = self.index.find_text(method, text) {
            return f(resource);
        }
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
        let (method, text) = key(name);
        self.index.add(method, text, &resource);
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
                "sentinel-flow-tower: resource name cap reached; further names enter the overflow resource"
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

    #[test]
    fn names_past_the_index_room_are_found_in_the_maps() {
        let sentinel: &'static Sentinel = Box::leak(Box::new(Sentinel::builder().build()));
        let mut cache = NameCache::new(sentinel, 100);
        // 16 slots: room for 8 names.
        cache.index = Index::new(8);
        let paths: Vec<String> = (0..40).map(|i| format!("/p{i}")).collect();
        for round in 0..2 {
            for (i, path) in paths.iter().enumerate() {
                let method = if i % 2 == 0 {
                    Method::GET
                } else {
                    Method::POST
                };
                let name = cache.with_route(&method, path, |r| r.name().to_owned());
                assert_eq!(name, format!("{method}:{path}"), "round {round}");
                let whole = format!("custom {i}");
                assert_eq!(cache.with(&whole, |r| r.name().to_owned()), whole);
            }
        }
        assert_eq!(cache.index.len.load(Ordering::Relaxed), 8);
        // A name in the index and in the maps is one handle.
        let by_route = cache.with_route(&Method::GET, "/p0", |r| std::ptr::from_ref(r) as usize);
        let by_name = cache.with("GET:/p0", |r| std::ptr::from_ref(r) as usize);
        assert_eq!(by_route, by_name);
        assert!(cache.index.find_text(0, "/p0").is_some());
        assert!(
            cache.index.find_text(1, "/p0").is_none(),
            "POST:/p0 was never named"
        );
        assert_eq!(cache.refused(), 0);
    }
}
