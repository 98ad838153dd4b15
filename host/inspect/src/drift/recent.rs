//! The facts each top-level field of a source's documents added lately, by the field's key,
//! with its bytes: a fleet's nodes mostly share most of their fields' bytes, and a field seen
//! before is neither checked, parsed nor walked again.

use crate::raw::starts_with_value;

/// A few values per key (the fleet's OS versions, say), the latest used first; a node's own
/// fields (names, addresses) push out the oldest. At most [`RECENT_TOTAL`] values in all: a
/// plugin whose keys differ on every node would otherwise keep every node's.
#[derive(Default)]
pub(super) struct RecentFields {
    by_source: Vec<foldhash::HashMap<String, Vec<SeenField>>>,
    /// How many values are kept, over every source and key.
    held: usize,
}

/// A field's bytes, and the facts it added.
type SeenField = (Box<[u8]>, Box<[(u32, u32)]>);

/// How many of each field's values [`RecentFields`] keeps.
const RECENT_VALUES: usize = 4;

/// How many values [`RecentFields`] keeps in all: a setup document has about a hundred fields,
/// so room for the four latest values of ten such sources.
pub(super) const RECENT_TOTAL: usize = 4096;

impl RecentFields {
    /// The length of the value of the field `key` of `source` seen lately that `rest` (a
    /// document from the field's value on) starts with, and the facts it added then.
    pub(super) fn starting(
        &mut self,
        source: usize,
        key: &str,
        rest: &[u8],
    ) -> Option<(usize, &[(u32, u32)])> {
        let recent = self.by_source.get_mut(source)?.get_mut(key)?;
        let at = recent
            .iter()
            .position(|(seen, _)| starts_with_value(rest, seen))?;
        recent[..=at].rotate_right(1);
        Some((recent[0].0.len(), &recent[0].1))
    }

    /// Remembers that the field `key` of `source` whose bytes are `bytes` added `pairs`.
    pub(super) fn put(&mut self, source: usize, key: &str, bytes: &[u8], pairs: &[(u32, u32)]) {
        if self.held >= RECENT_TOTAL {
            // Forgotten all at once, which is simple and bounded: the fields the nodes share
            // are back after the next node's document.
            self.by_source.iter_mut().for_each(|keys| keys.clear());
            self.held = 0;
        }
        if self.by_source.len() <= source {
            self.by_source.resize_with(source + 1, Default::default);
        }
        let recent = match self.by_source[source].get_mut(key) {
            Some(recent) => recent,
            None => self.by_source[source].entry(key.to_owned()).or_default(),
        };
        self.held -= recent.len();
        recent.truncate(RECENT_VALUES - 1);
        recent.insert(0, (bytes.into(), pairs.into()));
        self.held += recent.len();
    }

    /// How many values are kept.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.by_source
            .iter()
            .flat_map(|keys| keys.values())
            .map(Vec::len)
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_that_differ_on_every_node_are_not_all_kept() {
        let mut recent = RecentFields::default();
        for node in 0..3 * RECENT_TOTAL {
            recent.put(0, "shared", &[node as u8 % 8], &[(1, node as u32 % 8)]);
            recent.put(1, &format!("own_{node}"), b"1", &[(2, 3)]);
            assert!(
                recent.len() <= RECENT_TOTAL,
                "{} after node {node}",
                recent.len()
            );
        }
        // Each key keeps its latest values, the one used last first.
        let mut recent = RecentFields::default();
        for value in b'0'..b'6' {
            recent.put(0, "k", &[value], &[(0, (value - b'0').into())]);
        }
        assert_eq!(recent.len(), RECENT_VALUES);
        let get = |recent: &mut RecentFields, value: u8| {
            recent
                .starting(0, "k", &[value, b','])
                .map(|(length, pairs)| (length, pairs.to_vec()))
        };
        assert_eq!(get(&mut recent, b'1'), None);
        assert_eq!(get(&mut recent, b'2'), Some((1, vec![(0, 2)])));
        recent.put(0, "k", b"6", &[(0, 6)]);
        assert_eq!(get(&mut recent, b'2'), Some((1, vec![(0, 2)])));
        assert_eq!(get(&mut recent, b'3'), None);
        // A number is known only whole: 12 is not 1.
        assert_eq!(recent.starting(0, "k", b"22"), None);
    }
}
