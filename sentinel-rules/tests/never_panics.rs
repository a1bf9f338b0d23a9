//! The parser never panics, whatever the bytes.

use proptest::prelude::*;
use sentinel_flow_rules::{LoadOptions, parse_bytes, parse_str};

const EXAMPLE: &str = include_str!("../../examples/hot-reload/rules.yaml");

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2_000))]

    #[test]
    fn arbitrary_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let _ = parse_bytes(&bytes, "fuzz.yaml", &LoadOptions::default());
    }

    #[test]
    fn yaml_ish_strings(text in "[a-z_:\\-\\[\\]{}&*!|>'\"#%@ ,.0-9\n~?]{0,300}") {
        let _ = parse_str(&text, "fuzz.yaml");
    }

    #[test]
    fn mangled_example(cut in 0..EXAMPLE.len(), junk in "[\\[\\]{}&*:\\- \n0-9a-z\"]{0,8}") {
        let mut text = EXAMPLE.as_bytes().to_vec();
        text.splice(cut..cut, junk.bytes());
        let _ = parse_bytes(&text, "fuzz.yaml", &LoadOptions::default());
    }
}
