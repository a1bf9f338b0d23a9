//! Compile-time behaviour of `#[sentinel_resource]`: the forms that build
//! (`ui/pass`), and the mistakes that do not, each with the message and the
//! token it points at (`ui/fail/*.stderr`; `TRYBUILD=overwrite` rewrites them).

#[test]
fn ui() {
    let cases = trybuild::TestCases::new();
    cases.pass("tests/ui/pass/*.rs");
    cases.compile_fail("tests/ui/fail/*.rs");
}
