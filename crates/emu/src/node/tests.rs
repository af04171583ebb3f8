//! A node driven by hand: bytes and time in, D_PDUs and SIS events out, no scheduler.

use super::fair_shares;

#[test]
fn a_shared_transmission_is_split_max_min_fairly() {
    // One peer: everything it asks, up to the budget.
    assert_eq!(fair_shares(1000, &[(1, 400)])[&1], 400);
    assert_eq!(fair_shares(1000, &[(1, 4000)])[&1], 1000);
    // A short message beside a long batch gets all it asks; the batch gets the rest.
    let s = fair_shares(10_000, &[(1, 50_000), (2, 600)]);
    assert_eq!((s[&1], s[&2]), (9_400, 600));
    // Three long batches split evenly.
    let s = fair_shares(9_000, &[(1, 50_000), (2, 60_000), (3, 70_000)]);
    assert_eq!((s[&1], s[&2], s[&3]), (3_000, 3_000, 3_000));
    assert!(fair_shares(100, &[]).is_empty());
}
