//! Each cap is logged once, however often it refuses.

use crate::support::instance_with;
use crate::support::warnings::count_warnings;

#[test]
fn each_cap_is_logged_once_however_often_it_refuses() {
    let (_clock, sentinel) =
        instance_with(|builder| builder.max_resources(2).max_contexts(1).max_origins(1));
    let warnings = count_warnings(|| {
        for i in 0..100 {
            drop(sentinel.entry(&format!("r{i}")));
            drop(
                sentinel
                    .entry_builder("r0")
                    .context(&format!("c{i}"))
                    .enter(),
            );
            // Origins past the cap of two resources: one cap, one warning.
            drop(
                sentinel
                    .entry_builder("r0")
                    .origin(&format!("o{i}"))
                    .enter(),
            );
            drop(
                sentinel
                    .entry_builder("r1")
                    .origin(&format!("o{i}"))
                    .enter(),
            );
        }
        drop(sentinel.entry(&"x".repeat(2_000)));
    });
    let caps = sentinel.caps();
    assert_eq!(
        (
            caps.resources.refused,
            caps.contexts.refused,
            caps.origins.refused
        ),
        (99, 99, 198)
    );
    assert_eq!(warnings, 3);
}
