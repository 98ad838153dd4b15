//! The facts each top-level field of a source's documents added lately, by the field's key,
//! with its bytes: a fleet's nodes mostly share most of their fields' bytes, and a field seen
//! before is neither checked, parsed nor walked again.

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
    /// The facts the field `key` of `source` added when its bytes were `bytes`, if lately.
    pub(super) fn get(&mut self, source: usize, key: &str, bytes: &[u8]) -> Option<&[(u32, u32)]> {
        let recent = self.by_source.get_mut(source)?.get_mut(key)?;
        let at = recent.iter().position(|(seen, _)| **seen == *bytes)?;
        recent[..=at].rotate_right(1);
        Some(&recent[0].1)
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
        for value in 0..6u8 {
            recent.put(0, "k", &[value], &[(0, value.into())]);
        }
        assert_eq!(recent.len(), RECENT_VALUES);
        assert_eq!(recent.get(0, "k", &[1]), None);
        assert_eq!(recent.get(0, "k", &[2]), Some(&[(0, 2)][..]));
        recent.put(0, "k", &[6], &[(0, 6)]);
        assert_eq!(recent.get(0, "k", &[2]), Some(&[(0, 2)][..]));
        assert_eq!(recent.get(0, "k", &[3]), None);
    }
}
