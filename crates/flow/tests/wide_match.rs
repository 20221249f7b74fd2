//! ovs-ofctl text over every field of the field table: a random match (from the generator the
//! OXM codec's round trip uses too, `rqvs_testkit::wide_match`) is printed with nothing dropped
//! and reads back equal.

use proptest::prelude::*;
use rqvs_flow::formats::ofctl::{format_match, parse_flow};

proptest! {
    #[test]
    fn wide_matches_format_and_parse_back(
        ctx in 0u8..30,
        picks in proptest::collection::vec(any::<(bool, u128, u128, u8)>(), rqvs_flow::field::FIELDS.len()),
    ) {
        let m = rqvs_testkit::wide_match(ctx, &picks);
        let text = format_match(&m).map_err(|e| TestCaseError::fail(format!("{m:?}: {e}")))?;
        let back = parse_flow("p", 1, &format!("{text},actions=drop"), 0)
            .map_err(|e| TestCaseError::fail(format!("{text}: {e}")))?;
        prop_assert_eq!(back.matches, m, "{}", text);
    }
}
