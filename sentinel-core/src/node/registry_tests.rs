//! Unit tests of the arena and the registry.

use super::*;

#[test]
fn locate_covers_every_index_once() {
    let mut expected = (0, 0);
    for i in 0..10_000 {
        assert_eq!(locate(i), expected, "index {i}");
        expected.1 += 1;
        if expected.1 == FIRST << expected.0 {
            expected = (expected.0 + 1, 0);
        }
    }
    assert!(locate(u32::MAX as usize).0 < CHUNKS);
}

#[test]
fn arena_keeps_addresses() {
    let arena = Arena::default();
    let first = arena.push(String::from("a"));
    let address = arena.get(first).unwrap() as *const String;
    for i in 0..1_000 {
        arena.push(i.to_string());
    }
    assert_eq!(arena.get(first).unwrap() as *const String, address);
    assert_eq!(arena.get(500).unwrap(), "499");
    assert_eq!(arena.len(), 1_001);
    assert!(arena.get(1_001).is_none());
}

/// A named test value.
#[derive(Debug, PartialEq)]
struct Item(String, usize);

impl Named for Item {
    fn name(&self) -> &str {
        &self.0
    }
}

#[test]
fn registry_creates_each_name_once_under_threads() {
    // 2 000 names grow the index through six tables while four threads
    // look names up and create them.
    let registry = Registry::<Item>::new(10_000, 64, Overflow::new("names"));
    let made = AtomicUsize::new(0);
    std::thread::scope(|s| {
        for t in 0..4 {
            let (registry, made) = (&registry, &made);
            s.spawn(move || {
                for i in 0..2_000 {
                    let i = (i * 7 + t * 500) % 2_000;
                    let name = format!("n{i}");
                    let (index, value) = registry
                        .get_or_create(&name, |_| {
                            made.fetch_add(1, Ordering::Relaxed);
                            Item(name.clone(), i)
                        })
                        .unwrap();
                    assert_eq!(value, &Item(name.clone(), i));
                    assert_eq!(registry.find(&name), Some(index));
                }
            });
        }
    });
    assert_eq!(made.load(Ordering::Relaxed), 2_000);
    assert_eq!(registry.len(), 2_000);
    for i in 0..2_000 {
        let index = registry.find(&format!("n{i}")).expect("every name found");
        assert_eq!(registry.get(index).map(|v| v.1), Some(i));
    }
    assert_eq!(registry.find("n2000"), None);
}

#[test]
fn registry_refuses_past_its_cap_and_counts() {
    let registry = Registry::<Item>::new(2, 64, Overflow::new("things"));
    fn make(name: &'static str) -> impl FnOnce(u32) -> Item {
        move |i| Item(name.to_owned(), i as usize)
    }
    assert!(registry.get_or_create("a", make("a")).is_some());
    assert!(registry.get_or_create("b", make("b")).is_some());
    assert!(registry.get_or_create("c", make("c")).is_none());
    assert!(registry.get_or_create("d", make("d")).is_none());
    // Existing names still resolve.
    assert_eq!(
        registry.get_or_create("a", make("a")).map(|(i, _)| i),
        Some(0)
    );
    assert_eq!(registry.refused(), 2);
}

#[test]
fn reserved_names_are_made_past_the_cap_and_long_names_never() {
    let registry = Registry::<Item>::new(1, 4, Overflow::new("things"));
    let make = |name: &str| {
        let name = name.to_owned();
        move |i: u32| Item(name, i as usize)
    };
    assert!(registry.get_or_create("a", make("a")).is_some());
    assert!(registry.get_or_create("b", make("b")).is_none(), "full");
    // Reserved: past the cap and past the length limit (rule loads
    // check lengths themselves), each made once.
    let (b, _) = registry.reserve("b", make("b")).unwrap();
    assert_eq!(registry.reserve("b", make("b")).map(|(i, _)| i), Some(b));
    assert_eq!(
        registry.get_or_create("b", make("b")).map(|(i, _)| i),
        Some(b)
    );
    assert!(registry.reserve("longer", make("longer")).is_some());
    assert_eq!((registry.len(), registry.reserved()), (3, 2));
    // A reservation does not free room for entries.
    assert!(registry.get_or_create("c", make("c")).is_none());

    let roomy = Registry::<Item>::new(10, 4, Overflow::new("things"));
    assert!(roomy.get_or_create("12345", make("12345")).is_none());
    assert!(roomy.get_or_create("1234", make("1234")).is_some());
    assert_eq!((roomy.len(), roomy.refused()), (1, 1));
}
