//! The facts of a source's members walked at once, a key at a time (a k-way merge).
//!
//! The members of a fleet mostly have the same keys: rather than each member's next key in a
//! heap, the members waiting at one key are one bucket, taken whole and moved together to
//! their next keys, which are mostly one bucket again. Each key costs the members that have
//! it, not the whole fleet: a fleet of ten thousand nodes has as many keys of one node's own
//! (its addresses in a set).

use std::collections::BTreeMap;

/// Calls `found(key, present)` for every key of `members` (each member's (key, value) pairs
/// sorted by key, a key once), in key order, `present` being the (member, value) of each
/// member that has the key, in no particular order.
pub(super) fn each_key(members: &[&[(u32, u32)]], mut found: impl FnMut(u32, &[(usize, u32)])) {
    // Each bucket's members, by the key they are at; a member's place is its cursor.
    let mut waiting: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
    let mut cursors = vec![0usize; members.len()];
    for (m, pairs) in members.iter().enumerate() {
        if let Some(&(key, _)) = pairs.first() {
            waiting.entry(key).or_default().push(m);
        }
    }
    // Emptied buckets, reused rather than allocated again.
    let mut spare: Vec<Vec<usize>> = Vec::new();
    let mut present = Vec::new();
    while let Some((key, mut at_key)) = waiting.pop_first() {
        present.clear();
        for &m in &at_key {
            let pairs = members[m];
            let at = cursors[m];
            present.push((m, pairs[at].1));
            cursors[m] = at + 1;
            if let Some(&(next, _)) = pairs.get(at + 1) {
                waiting
                    .entry(next)
                    .or_insert_with(|| spare.pop().unwrap_or_default())
                    .push(m);
            }
        }
        found(key, &present);
        at_key.clear();
        spare.push(at_key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_key_comes_once_in_order_with_the_members_that_have_it() {
        let members: [&[(u32, u32)]; 4] = [
            &[(1, 10), (2, 20), (5, 50)],
            &[(1, 11), (2, 20), (3, 31), (5, 50)],
            &[],
            &[(0, 0), (5, 51), (9, 90)],
        ];
        let mut seen = Vec::new();
        each_key(&members, |key, present| {
            let mut present = present.to_vec();
            present.sort();
            seen.push((key, present));
        });
        assert_eq!(
            seen,
            [
                (0, vec![(3, 0)]),
                (1, vec![(0, 10), (1, 11)]),
                (2, vec![(0, 20), (1, 20)]),
                (3, vec![(1, 31)]),
                (5, vec![(0, 50), (1, 50), (3, 51)]),
                (9, vec![(3, 90)]),
            ]
        );
    }
}
