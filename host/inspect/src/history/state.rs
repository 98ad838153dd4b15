//! A document's state as the index keeps it between bundles, encoded as it is stored: per
//! top-level field, sorted by its key's hash, the key hash, the hash of the field's bytes, its
//! number of facts, then each fact's path number and value hash, little-endian.
//!
//! Adding a bundle reads every document's state and writes it back, and most fields are as
//! they were: the states are read in place from the file's bytes, fields that did not change
//! are copied as bytes, and only a field that changed has its facts decoded. (A state of
//! decoded fields cost an allocation per field both ways, most of the time of adding one
//! bundle.)

use bytes::Bytes;

/// The key of a document read whole (a table, or a document that is not an object of distinct
/// plain keys): its only field.
pub(crate) const WHOLE: u64 = u64::MAX;

/// The bytes before a field's facts: key hash, bytes' hash, number of facts.
const HEAD: usize = 8 + 8 + 4;
/// The bytes of one fact: path number and value hash.
const LEAF: usize = 4 + 8;

/// One document's state.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct State(Bytes);

/// A state being made, a field at a time.
#[derive(Default)]
pub(crate) struct NewState(Vec<u8>);

/// A field of a [`State`], read in place.
#[derive(Clone, Copy)]
pub(crate) struct Field<'s> {
    /// Its key's hash; [`WHOLE`] for a whole document.
    pub key: u64,
    /// The hash of its value's bytes, as written.
    pub raw: u64,
    /// The whole field, as stored.
    bytes: &'s [u8],
}

impl Field<'_> {
    /// Its facts: (path number, value hash), sorted by path number.
    pub(crate) fn leaves(&self) -> Vec<(u32, u64)> {
        self.bytes[HEAD..]
            .chunks_exact(LEAF)
            .map(|leaf| {
                let (path, hash) = leaf.split_at(4);
                (
                    u32::from_le_bytes(path.try_into().expect("4 bytes")),
                    u64::from_le_bytes(hash.try_into().expect("8 bytes")),
                )
            })
            .collect()
    }
}

impl State {
    /// A state read from the states file; `None` unless it is whole fields.
    pub(crate) fn from_bytes(bytes: Bytes) -> Option<State> {
        let mut rest = &bytes[..];
        while !rest.is_empty() {
            rest = rest.get(field_len(rest)?..)?;
        }
        Some(State(bytes))
    }

    /// The state as stored.
    pub(crate) fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// Its fields, in key hash order.
    pub(crate) fn fields(&self) -> impl Iterator<Item = Field<'_>> {
        let mut rest = &self.0[..];
        std::iter::from_fn(move || {
            let len = field_len(rest)?;
            let (bytes, tail) = rest.split_at(len);
            rest = tail;
            // `field_len` saw the whole head.
            let number =
                |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"));
            Some(Field {
                key: number(0),
                raw: number(8),
                bytes,
            })
        })
    }

    /// Its only field when the document was read whole.
    pub(crate) fn whole(&self) -> Option<Field<'_>> {
        let mut fields = self.fields();
        match (fields.next(), fields.next()) {
            (Some(only), None) if only.key == WHOLE => Some(only),
            _ => None,
        }
    }
}

impl NewState {
    /// Adds a field after those it has (fields go in key hash order).
    pub(crate) fn push(&mut self, key: u64, raw: u64, leaves: &[(u32, u64)]) {
        self.0.reserve(HEAD + LEAF * leaves.len());
        self.0.extend_from_slice(&key.to_le_bytes());
        self.0.extend_from_slice(&raw.to_le_bytes());
        self.0
            .extend_from_slice(&(leaves.len() as u32).to_le_bytes());
        for (path, hash) in leaves {
            self.0.extend_from_slice(&path.to_le_bytes());
            self.0.extend_from_slice(&hash.to_le_bytes());
        }
    }

    /// Adds a field of another state as it is.
    pub(crate) fn keep(&mut self, field: Field<'_>) {
        self.0.extend_from_slice(field.bytes);
    }

    /// The state made.
    pub(crate) fn finish(self) -> State {
        State(self.0.into())
    }
}

/// The length of the field `bytes` starts with, if they hold it whole.
fn field_len(bytes: &[u8]) -> Option<usize> {
    let count = u32::from_le_bytes(bytes.get(16..HEAD)?.try_into().ok()?) as usize;
    let len = HEAD.checked_add(count.checked_mul(LEAF)?)?;
    (bytes.len() >= len).then_some(len)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_read_back_as_pushed_and_kept_fields_are_the_same_bytes() {
        let mut state = NewState::default();
        state.push(1, 10, &[(3, 30), (4, 40)]);
        state.push(WHOLE, 20, &[]);
        let state = state.finish();
        type Read = (u64, u64, Vec<(u32, u64)>);
        let fields: Vec<Read> = state.fields().map(|f| (f.key, f.raw, f.leaves())).collect();
        assert_eq!(
            fields,
            [(1, 10, vec![(3, 30), (4, 40)]), (WHOLE, 20, vec![])]
        );
        let mut copy = NewState::default();
        for field in state.fields() {
            copy.keep(field);
        }
        assert_eq!(copy.finish(), state);
        assert_eq!(State::from_bytes(state.0.clone()), Some(state));
    }

    #[test]
    fn a_state_cut_short_is_not_read_and_whole_means_one_whole_field() {
        let mut state = NewState::default();
        state.push(WHOLE, 7, &[(1, 1)]);
        let whole = state.finish();
        assert_eq!(whole.whole().map(|f| f.raw), Some(7));
        let cut = whole.0.slice(..whole.0.len() - 1);
        assert_eq!(State::from_bytes(cut), None);
        let mut state = NewState::default();
        state.keep(whole.whole().unwrap());
        state.push(2, 2, &[]);
        assert!(state.finish().whole().is_none());
    }
}
