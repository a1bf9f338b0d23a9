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
                        .get_or_create(
                            &name,
                            |_, _| {
                                made.fetch_add(1, Ordering::Relaxed);
                                Item(name.clone(), i)
                            },
                            |_| false,
                        )
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

/// Makes `Item(name, index)`.
fn make(name: &str) -> impl FnOnce(u32, bool) -> Item + '_ {
    move |i, _| Item(name.to_owned(), i as usize)
}

fn none(_: &str) -> bool {
    false
}

#[test]
fn registry_refuses_past_its_cap_and_counts() {
    let registry = Registry::<Item>::new(2, 64, Overflow::new("things"));
    assert!(registry.get_or_create("a", make("a"), none).is_some());
    assert!(registry.get_or_create("b", make("b"), none).is_some());
    assert!(registry.get_or_create("c", make("c"), none).is_none());
    assert!(registry.get_or_create("d", make("d"), none).is_none());
    // Existing names still resolve.
    assert_eq!(
        registry.get_or_create("a", make("a"), none).map(|(i, _)| i),
        Some(0)
    );
    assert_eq!(registry.refused(), 2);
}

#[test]
fn names_rules_mention_are_made_past_the_cap_when_entries_use_them() {
    let registry = Registry::<Item>::new(1, 4, Overflow::new("things"));
    let named = |name: &str| name == "b";
    assert!(registry.get_or_create("a", make("a"), named).is_some());
    assert!(
        registry.get_or_create("c", make("c"), named).is_none(),
        "full"
    );
    // Named: past the cap, made once, marked as such.
    let mut marked = None;
    let (b, _) = registry
        .get_or_create(
            "b",
            |i, reserved| {
                marked = Some(reserved);
                Item("b".into(), i as usize)
            },
            named,
        )
        .unwrap();
    assert_eq!(marked, Some(true));
    assert_eq!(
        registry.get_or_create("b", make("b"), none).map(|(i, _)| i),
        Some(b)
    );
    assert_eq!((registry.len(), registry.reserved()), (2, 1));
    // A name made for a rule does not free room for entries.
    assert!(registry.get_or_create("d", make("d"), none).is_none());

    let roomy = Registry::<Item>::new(10, 4, Overflow::new("things"));
    assert!(roomy.get_or_create("12345", make("12345"), none).is_none());
    assert!(roomy.get_or_create("1234", make("1234"), none).is_some());
    assert_eq!((roomy.len(), roomy.refused()), (1, 1));
}

#[test]
fn a_shared_budget_bounds_every_registry_together() {
    let budget = Arc::new(Budget::new("origins", 3));
    let registries: Vec<_> = (0..3)
        .map(|_| Registry::<Item>::with_budget(2, 64, Overflow::new("origins"), &budget))
        .collect();
    let made = registries
        .iter()
        .flat_map(|r| ["x", "y"].map(|name| r.get_or_create(name, make(name), none).is_some()))
        .filter(|&made| made)
        .count();
    assert_eq!(made, 3, "two in the first registry, one in the second");
    assert_eq!((budget.used(), budget.refused()), (3, 3));
    assert_eq!(registries[2].refused(), 2);
    // A name a rule mentions is made past the budget.
    let rule = |name: &str| name == "ruled";
    assert!(
        registries[2]
            .get_or_create("ruled", make("ruled"), rule)
            .is_some()
    );
    assert_eq!(budget.used(), 3);
}
