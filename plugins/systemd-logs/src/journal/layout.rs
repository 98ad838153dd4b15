//! The journal file format's on-disk layout: offsets, flags and limits, as systemd's
//! `journal-def.h` defines them (<https://systemd.io/JOURNAL_FILE_FORMAT/>), and the parsing of
//! the file header. All integers are little-endian; objects start at 8-byte aligned offsets.

use std::fmt;

/// The first eight bytes of every journal file.
pub const SIGNATURE: &[u8; 8] = b"LPKSHHRH";

/// Header fields every journal file has (systemd 187 and later write more; a shorter header
/// means the later fields are zero).
pub const HEADER_SIZE_MIN: u64 = 208;

/// `header.state`: 0 closed cleanly, 1 still being written, 2 rotated away.
pub const STATE_ONLINE: u8 = 1;
pub const STATE_ARCHIVED: u8 = 2;

/// `header.incompatible_flags`: features a reader must understand to read the file at all.
pub const INCOMPATIBLE_COMPRESSED_XZ: u32 = 1 << 0;
pub const INCOMPATIBLE_COMPRESSED_LZ4: u32 = 1 << 1;
pub const INCOMPATIBLE_KEYED_HASH: u32 = 1 << 2;
pub const INCOMPATIBLE_COMPRESSED_ZSTD: u32 = 1 << 3;
pub const INCOMPATIBLE_COMPACT: u32 = 1 << 4;
/// Every incompatible feature this reader handles. Keyed hashes only change how a writer finds
/// objects; a reader that follows offsets, as this one does, never computes a hash.
pub const INCOMPATIBLE_SUPPORTED: u32 = INCOMPATIBLE_COMPRESSED_XZ
    | INCOMPATIBLE_COMPRESSED_LZ4
    | INCOMPATIBLE_KEYED_HASH
    | INCOMPATIBLE_COMPRESSED_ZSTD
    | INCOMPATIBLE_COMPACT;

/// Object types (`ObjectHeader.type`); 4 is the data hash table, which a reader following
/// offsets never needs.
pub const OBJECT_DATA: u8 = 1;
pub const OBJECT_FIELD: u8 = 2;
pub const OBJECT_ENTRY: u8 = 3;
pub const OBJECT_FIELD_HASH_TABLE: u8 = 5;
pub const OBJECT_ENTRY_ARRAY: u8 = 6;
/// The last type: a seal (TAG) of Forward Secure Sealing.
pub const OBJECT_TAG: u8 = 7;

/// Object flags (`ObjectHeader.flags`): how a DATA object's payload is compressed.
pub const OBJECT_COMPRESSED_XZ: u8 = 1 << 0;
pub const OBJECT_COMPRESSED_LZ4: u8 = 1 << 1;
pub const OBJECT_COMPRESSED_ZSTD: u8 = 1 << 2;
pub const OBJECT_COMPRESSION_MASK: u8 =
    OBJECT_COMPRESSED_XZ | OBJECT_COMPRESSED_LZ4 | OBJECT_COMPRESSED_ZSTD;

/// `ObjectHeader`: type (1), flags (1), reserved (6), size (8).
pub const OBJECT_HEADER_SIZE: u64 = 16;

/// ENTRY object: seqnum @16, realtime @24, monotonic @32, boot_id @40, xor_hash @56, items @64.
pub const ENTRY_ITEMS_OFFSET: u64 = 64;
/// DATA object: hash @16, next_hash @24, next_field @32, entry @40, entry_array @48,
/// n_entries @56, then (compact files only) two 32-bit tail fields, then the payload.
pub const DATA_PAYLOAD_OFFSET_REGULAR: u64 = 64;
pub const DATA_PAYLOAD_OFFSET_COMPACT: u64 = 72;
pub const DATA_NEXT_FIELD_OFFSET: usize = 32;
/// FIELD object: hash @16, next_hash @24, head_data @32, payload @40.
pub const FIELD_PAYLOAD_OFFSET: u64 = 40;
pub const FIELD_NEXT_HASH_OFFSET: usize = 24;
pub const FIELD_HEAD_DATA_OFFSET: usize = 32;
/// ENTRY_ARRAY object: next_entry_array @16, items @24.
pub const ENTRY_ARRAY_ITEMS_OFFSET: u64 = 24;
/// A hash table item: head_hash_offset, tail_hash_offset.
pub const HASH_ITEM_SIZE: u64 = 16;

/// Timestamps systemd accepts as valid (`VALID_REALTIME`, `VALID_MONOTONIC`).
pub fn valid_realtime(usec: u64) -> bool {
    usec > 0 && usec < (1 << 55)
}
pub fn valid_monotonic(usec: u64) -> bool {
    usec < (1 << 55)
}

/// Reads a little-endian integer at `at`; the caller has checked the bounds.
pub fn le64(bytes: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"))
}
pub fn le32(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"))
}

/// A 128-bit id (file, machine, boot, seqnum source), printed as journalctl prints it: 32
/// lower-case hex digits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Id128(pub [u8; 16]);

impl Id128 {
    pub fn from_slice(bytes: &[u8]) -> Self {
        Id128(bytes[..16].try_into().expect("16 bytes"))
    }

    /// Parses 32 hex digits, also in the dashed UUID form `/proc` uses.
    pub fn parse(text: &str) -> Option<Self> {
        let hex: Vec<u8> = text.bytes().filter(|b| *b != b'-').collect();
        if hex.len() != 32 {
            return None;
        }
        let mut id = [0u8; 16];
        for (i, pair) in hex.chunks(2).enumerate() {
            let digits = std::str::from_utf8(pair).ok()?;
            id[i] = u8::from_str_radix(digits, 16).ok()?;
        }
        Some(Id128(id))
    }

    /// Appends the 32 hex digits to `out`.
    pub fn write_hex(&self, out: &mut Vec<u8>) {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        for byte in self.0 {
            out.push(HEX[usize::from(byte >> 4)]);
            out.push(HEX[usize::from(byte & 15)]);
        }
    }
}

impl fmt::Display for Id128 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut hex = Vec::with_capacity(32);
        self.write_hex(&mut hex);
        f.write_str(std::str::from_utf8(&hex).expect("hex is ASCII"))
    }
}

/// The parts of the file header a reader needs.
#[derive(Debug, Clone)]
pub struct Header {
    pub incompatible_flags: u32,
    pub state: u8,
    pub seqnum_id: Id128,
    pub header_size: u64,
    pub arena_size: u64,
    pub field_hash_table_offset: u64,
    pub field_hash_table_size: u64,
    pub tail_object_offset: u64,
    pub n_objects: u64,
    pub n_entries: u64,
    pub entry_array_offset: u64,
}

/// Why a file's header cannot be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeaderError {
    TooShort(usize),
    NotAJournal,
    UnsupportedFeatures(u32),
    BadSizes(String),
    UnknownState(u8),
}

impl fmt::Display for HeaderError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HeaderError::TooShort(len) => write!(
                f,
                "only {len} bytes long, shorter than a journal file header"
            ),
            HeaderError::NotAJournal => f.write_str("not a journal file (wrong signature)"),
            HeaderError::UnsupportedFeatures(flags) => write!(
                f,
                "uses journal features this reader does not know (incompatible flags {flags:#x}); \
                 a newer systemd wrote it"
            ),
            HeaderError::BadSizes(what) => write!(f, "damaged header: {what}"),
            HeaderError::UnknownState(state) => {
                write!(f, "damaged header: unknown state {state}")
            }
        }
    }
}

impl Header {
    /// Parses the header from the first bytes of a file (up to 272 of them).
    pub fn parse(bytes: &[u8]) -> Result<Header, HeaderError> {
        if bytes.len() < HEADER_SIZE_MIN as usize {
            return Err(HeaderError::TooShort(bytes.len()));
        }
        if &bytes[..8] != SIGNATURE {
            return Err(HeaderError::NotAJournal);
        }
        let incompatible_flags = le32(bytes, 12);
        if incompatible_flags & !INCOMPATIBLE_SUPPORTED != 0 {
            return Err(HeaderError::UnsupportedFeatures(incompatible_flags));
        }
        let state = bytes[16];
        if state > STATE_ARCHIVED {
            return Err(HeaderError::UnknownState(state));
        }
        let header_size = le64(bytes, 88);
        let header = Header {
            incompatible_flags,
            state,
            seqnum_id: Id128::from_slice(&bytes[72..88]),
            header_size,
            arena_size: le64(bytes, 96),
            field_hash_table_offset: le64(bytes, 120),
            field_hash_table_size: le64(bytes, 128),
            tail_object_offset: le64(bytes, 136),
            n_objects: le64(bytes, 144),
            n_entries: le64(bytes, 152),
            entry_array_offset: le64(bytes, 176),
        };
        if header.header_size < HEADER_SIZE_MIN || !header.header_size.is_multiple_of(8) {
            return Err(HeaderError::BadSizes(format!(
                "header size {} is not a valid header size",
                header.header_size
            )));
        }
        if header.header_size.checked_add(header.arena_size).is_none() {
            return Err(HeaderError::BadSizes(format!(
                "arena size {} overflows",
                header.arena_size
            )));
        }
        Ok(header)
    }

    pub fn compact(&self) -> bool {
        self.incompatible_flags & INCOMPATIBLE_COMPACT != 0
    }

    /// End of the part of the file the header describes.
    pub fn end(&self) -> u64 {
        self.header_size + self.arena_size
    }

    /// Bytes of one entry item: a 32-bit offset in compact files, offset and hash otherwise.
    pub fn entry_item_size(&self) -> u64 {
        if self.compact() { 4 } else { 16 }
    }

    /// Bytes of one entry-array item.
    pub fn entry_array_item_size(&self) -> u64 {
        if self.compact() { 4 } else { 8 }
    }

    pub fn data_payload_offset(&self) -> u64 {
        if self.compact() {
            DATA_PAYLOAD_OFFSET_COMPACT
        } else {
            DATA_PAYLOAD_OFFSET_REGULAR
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header_bytes() -> Vec<u8> {
        let mut bytes = vec![0u8; 272];
        bytes[..8].copy_from_slice(SIGNATURE);
        bytes[12..16].copy_from_slice(&(INCOMPATIBLE_COMPACT).to_le_bytes());
        bytes[72..88].copy_from_slice(&[0xab; 16]);
        bytes[88..96].copy_from_slice(&264u64.to_le_bytes());
        bytes[96..104].copy_from_slice(&4096u64.to_le_bytes());
        bytes[152..160].copy_from_slice(&7u64.to_le_bytes());
        bytes
    }

    #[test]
    fn parses_a_header_and_its_layout() {
        let header = Header::parse(&header_bytes()).unwrap();
        assert!(header.compact());
        assert_eq!(header.n_entries, 7);
        assert_eq!(header.end(), 264 + 4096);
        assert_eq!(header.entry_item_size(), 4);
        assert_eq!(header.data_payload_offset(), 72);
        assert_eq!(header.seqnum_id.to_string(), "ab".repeat(16));
    }

    #[test]
    fn refuses_what_it_cannot_read() {
        let mut bytes = header_bytes();
        bytes[0] = b'X';
        assert_eq!(Header::parse(&bytes).unwrap_err(), HeaderError::NotAJournal);
        let mut bytes = header_bytes();
        bytes[12..16].copy_from_slice(&(1u32 << 9).to_le_bytes());
        assert!(matches!(
            Header::parse(&bytes),
            Err(HeaderError::UnsupportedFeatures(_))
        ));
        assert_eq!(
            Header::parse(&header_bytes()[..100]).unwrap_err(),
            HeaderError::TooShort(100)
        );
        let mut bytes = header_bytes();
        bytes[16] = 9;
        assert_eq!(
            Header::parse(&bytes).unwrap_err(),
            HeaderError::UnknownState(9)
        );
    }

    #[test]
    fn ids_parse_in_both_forms_and_print_as_hex() {
        let id = Id128::parse("a1a1a1a1-a1a1-4a1a-8a1a-1a1a1a1a1a02").unwrap();
        assert_eq!(id.to_string(), "a1a1a1a1a1a14a1a8a1a1a1a1a1a1a02");
        assert_eq!(Id128::parse("a1a1a1a1a1a14a1a8a1a1a1a1a1a1a02"), Some(id));
        assert_eq!(Id128::parse("xyz"), None);
        assert_eq!(Id128::parse(&"g".repeat(32)), None);
    }
}
