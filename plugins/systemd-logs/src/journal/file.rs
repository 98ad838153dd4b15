//! One journal file: its header, and reading its ENTRY, DATA and FIELD objects with the checks
//! systemd applies, so that a damaged object is reported instead of misread.

use std::fmt;
use std::fs::File;

use super::decompress::{self, Compression, Decompressed};
use super::layout::*;
use super::pages::{PageCache, ReadError, SourceId};

/// The header's size in the newest format, and what is read of it.
const HEADER_READ_BYTES: u64 = 272;
/// Most fields one entry may list. journald writes at most 1024; a larger count is damage (or
/// hostile) and would cost memory and time for nothing.
const MAX_ENTRY_ITEMS: u64 = 1 << 16;

/// Why an object could not be read.
#[derive(Debug)]
pub enum ObjectError {
    /// The object lies past the end of the file: the file was cut short.
    Truncated {
        offset: u64,
    },
    /// The object is not what the format requires.
    Damaged {
        offset: u64,
        what: String,
    },
    /// A payload is larger than this reader holds ([`decompress::MAX_PAYLOAD_BYTES`]).
    TooLarge {
        offset: u64,
        bytes: u64,
    },
    Io {
        offset: u64,
        error: std::io::Error,
    },
}

impl ObjectError {
    fn damaged(offset: u64, what: impl Into<String>) -> Self {
        ObjectError::Damaged {
            offset,
            what: what.into(),
        }
    }

    fn from_read(offset: u64, e: ReadError) -> Self {
        match e {
            ReadError::PastEnd { .. } => ObjectError::Truncated { offset },
            ReadError::Io(error) => ObjectError::Io { offset, error },
        }
    }
}

impl fmt::Display for ObjectError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ObjectError::Truncated { offset } => {
                write!(
                    f,
                    "the object at offset {offset} lies past the end of the file"
                )
            }
            ObjectError::Damaged { offset, what } => {
                write!(f, "damaged object at offset {offset}: {what}")
            }
            ObjectError::TooLarge { offset, bytes } => write!(
                f,
                "the field at offset {offset} holds {bytes} bytes, more than the {} this \
                 plugin reads",
                decompress::MAX_PAYLOAD_BYTES
            ),
            ObjectError::Io { offset, error } => {
                write!(f, "reading the object at offset {offset} failed: {error}")
            }
        }
    }
}

/// An ENTRY object's fixed part: what orders entries and what their cursor is made of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EntryMeta {
    pub offset: u64,
    pub seqnum: u64,
    pub realtime: u64,
    pub monotonic: u64,
    pub boot_id: Id128,
    pub xor_hash: u64,
}

/// How a DATA payload came out of [`JournalFile::read_data`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Payload {
    /// Bytes appended to the output buffer.
    pub len: usize,
    /// Whether the payload is longer than what was appended (the limit cut it).
    pub truncated: bool,
}

/// An open journal file. Its bytes are read through the shared [`PageCache`].
pub struct JournalFile {
    /// For messages: the path as the plugin sees it.
    pub path: String,
    pub header: Header,
    source: SourceId,
    /// Where readable bytes end: the header's arena end, or the file's end when it is shorter.
    end: u64,
    file_len: u64,
}

impl JournalFile {
    /// Opens `file` and checks its header. A file shorter than its header says is still
    /// opened: [`JournalFile::truncated`] tells, and reads past the cut fail.
    pub fn open(cache: &mut PageCache, path: String, file: File) -> Result<JournalFile, String> {
        let file_len = file
            .metadata()
            .map_err(|e| format!("cannot read its size: {e}"))?
            .len();
        let source = cache.add(file, file_len);
        let header = {
            let bytes = cache
                .read(source, 0, HEADER_READ_BYTES.min(file_len) as usize)
                .map_err(|e| e.to_string());
            match bytes.and_then(|bytes| Header::parse(bytes).map_err(|e| e.to_string())) {
                Ok(header) => header,
                Err(e) => {
                    cache.remove(source);
                    return Err(e);
                }
            }
        };
        Ok(JournalFile {
            path,
            end: header.end().min(file_len),
            header,
            source,
            file_len,
        })
    }

    /// Releases the file and its cached pages.
    pub fn close(&self, cache: &mut PageCache) {
        cache.remove(self.source);
    }

    /// When the file is shorter than its header says: (its length, the length it should have).
    pub fn truncated(&self) -> Option<(u64, u64)> {
        (self.file_len < self.header.end()).then_some((self.file_len, self.header.end()))
    }

    /// Offsets past this one hold no object.
    pub fn end(&self) -> u64 {
        self.end
    }

    /// The header and whole body of an object of `kind` (any kind when `None`) at `offset`,
    /// with the generic checks: aligned, inside the arena, a sane size and at least `min_size`.
    fn object<'c>(
        &self,
        cache: &'c mut PageCache,
        offset: u64,
        kind: Option<u8>,
        min_size: u64,
    ) -> Result<&'c [u8], ObjectError> {
        let header = self.object_header(cache, offset)?;
        if let Some(kind) = kind
            && header.kind != kind
        {
            return Err(ObjectError::damaged(
                offset,
                format!(
                    "found an object of type {} where type {kind} belongs",
                    header.kind
                ),
            ));
        }
        if header.size < min_size {
            return Err(ObjectError::damaged(
                offset,
                format!("size {} is too small for its type", header.size),
            ));
        }
        if kind == Some(OBJECT_ENTRY)
            && header.size > ENTRY_ITEMS_OFFSET + MAX_ENTRY_ITEMS * self.header.entry_item_size()
        {
            return Err(ObjectError::damaged(
                offset,
                format!("the entry lists more than {MAX_ENTRY_ITEMS} fields"),
            ));
        }
        if header.size > decompress::MAX_PAYLOAD_BYTES as u64 + 4096 {
            return Err(ObjectError::TooLarge {
                offset,
                bytes: header.size,
            });
        }
        let object_end = offset.saturating_add(header.size);
        if object_end > self.end {
            return Err(if object_end <= self.header.end() {
                ObjectError::Truncated { offset }
            } else {
                ObjectError::damaged(offset, "extends past the end of the arena")
            });
        }
        cache
            .read(self.source, offset, header.size as usize)
            .map_err(|e| ObjectError::from_read(offset, e))
    }

    /// The 16-byte object header at `offset`, checked as systemd checks it.
    pub fn object_header(
        &self,
        cache: &mut PageCache,
        offset: u64,
    ) -> Result<ObjectHeader, ObjectError> {
        if !offset.is_multiple_of(8) || offset < self.header.header_size {
            return Err(ObjectError::damaged(
                offset,
                "the offset is not a valid object position",
            ));
        }
        if offset.saturating_add(OBJECT_HEADER_SIZE) > self.end {
            return Err(if offset < self.header.end() {
                ObjectError::Truncated { offset }
            } else {
                ObjectError::damaged(offset, "the offset lies past the end of the arena")
            });
        }
        let bytes = cache
            .read(self.source, offset, OBJECT_HEADER_SIZE as usize)
            .map_err(|e| ObjectError::from_read(offset, e))?;
        let header = ObjectHeader {
            kind: bytes[0],
            flags: bytes[1],
            reserved_clear: bytes[2..8].iter().all(|b| *b == 0),
            size: le64(bytes, 8),
        };
        if header.size == 0 {
            return Err(ObjectError::damaged(
                offset,
                "the object is empty (zero size)",
            ));
        }
        if header.size < OBJECT_HEADER_SIZE {
            return Err(ObjectError::damaged(
                offset,
                format!("size {} is smaller than an object header", header.size),
            ));
        }
        Ok(header)
    }

    /// Reads the ENTRY object at `offset`; its data object offsets go to `items`.
    pub fn read_entry(
        &self,
        cache: &mut PageCache,
        offset: u64,
        items: &mut Vec<u64>,
    ) -> Result<EntryMeta, ObjectError> {
        let item_size = self.header.entry_item_size();
        let bytes = self.object(
            cache,
            offset,
            Some(OBJECT_ENTRY),
            ENTRY_ITEMS_OFFSET + item_size,
        )?;
        let meta = entry_meta(offset, bytes)?;
        let items_bytes = &bytes[ENTRY_ITEMS_OFFSET as usize..];
        if !(items_bytes.len() as u64).is_multiple_of(item_size) {
            return Err(ObjectError::damaged(
                offset,
                "its size is not a whole number of items",
            ));
        }
        items.clear();
        if self.header.compact() {
            items.extend(items_bytes.chunks_exact(4).map(|c| u64::from(le32(c, 0))));
        } else {
            items.extend(items_bytes.chunks_exact(16).map(|c| le64(c, 0)));
        }
        Ok(meta)
    }

    /// The fixed part of the ENTRY object at `offset`, without its items.
    pub fn read_entry_meta(
        &self,
        cache: &mut PageCache,
        offset: u64,
    ) -> Result<EntryMeta, ObjectError> {
        let min = ENTRY_ITEMS_OFFSET + self.header.entry_item_size();
        let header = self.object_header(cache, offset)?;
        if header.kind != OBJECT_ENTRY || header.size < min {
            return Err(ObjectError::damaged(offset, "not an entry object"));
        }
        if offset.saturating_add(ENTRY_ITEMS_OFFSET) > self.end {
            return Err(ObjectError::Truncated { offset });
        }
        let bytes = cache
            .read(self.source, offset, ENTRY_ITEMS_OFFSET as usize)
            .map_err(|e| ObjectError::from_read(offset, e))?;
        entry_meta(offset, bytes)
    }

    /// Appends the payload (`FIELD=value`) of the DATA object at `offset` to `out`,
    /// decompressed, at most `limit` bytes of it.
    pub fn read_data(
        &self,
        cache: &mut PageCache,
        offset: u64,
        out: &mut Vec<u8>,
        limit: usize,
    ) -> Result<Payload, ObjectError> {
        let payload_offset = self.header.data_payload_offset();
        let bytes = self.object(cache, offset, Some(OBJECT_DATA), payload_offset + 1)?;
        let entry_offset = le64(bytes, 40);
        let n_entries = le64(bytes, 56);
        if (entry_offset == 0) != (n_entries == 0) {
            return Err(ObjectError::damaged(
                offset,
                "its entry count and first entry disagree",
            ));
        }
        let compression = Compression::from_flags(bytes[1])
            .map_err(|e| ObjectError::damaged(offset, e.to_string()))?;
        let payload = &bytes[payload_offset as usize..];
        match compression {
            None => {
                let len = payload.len().min(limit);
                out.extend_from_slice(&payload[..len]);
                Ok(Payload {
                    len,
                    truncated: len < payload.len(),
                })
            }
            Some(kind) => {
                let start = out.len();
                let done = decompress::decompress(kind, payload, out, limit)
                    .map_err(|e| ObjectError::damaged(offset, e.to_string()))?;
                Ok(Payload {
                    len: out.len() - start,
                    truncated: done == Decompressed::Truncated,
                })
            }
        }
    }

    /// The offset of the first DATA object of every field in `wanted` that this file has.
    pub fn field_heads(
        &self,
        cache: &mut PageCache,
        wanted: &[&str],
    ) -> Result<Vec<(usize, u64)>, ObjectError> {
        let table_offset = self.header.field_hash_table_offset;
        if table_offset < OBJECT_HEADER_SIZE || self.header.field_hash_table_size < HASH_ITEM_SIZE {
            return Ok(Vec::new());
        }
        let object_offset = table_offset - OBJECT_HEADER_SIZE;
        let table = self
            .object(
                cache,
                object_offset,
                Some(OBJECT_FIELD_HASH_TABLE),
                OBJECT_HEADER_SIZE + HASH_ITEM_SIZE,
            )?
            .to_vec();
        let buckets = (table.len() as u64 - OBJECT_HEADER_SIZE) / HASH_ITEM_SIZE;
        if buckets != self.header.field_hash_table_size / HASH_ITEM_SIZE {
            return Err(ObjectError::damaged(
                object_offset,
                "the field hash table's size disagrees with the header",
            ));
        }
        let mut heads = Vec::new();
        let mut budget = self.chain_budget();
        for bucket in 0..buckets as usize {
            let mut offset = le64(&table, OBJECT_HEADER_SIZE as usize + bucket * 16);
            while offset != 0 {
                budget = budget.checked_sub(1).ok_or_else(|| {
                    ObjectError::damaged(object_offset, "the field hash table has a loop")
                })?;
                let field =
                    self.object(cache, offset, Some(OBJECT_FIELD), FIELD_PAYLOAD_OFFSET + 1)?;
                let name = &field[FIELD_PAYLOAD_OFFSET as usize..];
                if let Some(index) = wanted.iter().position(|w| w.as_bytes() == name) {
                    heads.push((index, le64(field, FIELD_HEAD_DATA_OFFSET)));
                }
                offset = le64(field, FIELD_NEXT_HASH_OFFSET);
            }
        }
        Ok(heads)
    }

    /// The DATA object after `offset` among those of the same field, or `None` at the end.
    pub fn next_data_of_field(
        &self,
        cache: &mut PageCache,
        offset: u64,
    ) -> Result<Option<u64>, ObjectError> {
        let payload_offset = self.header.data_payload_offset();
        let bytes = self.object(cache, offset, Some(OBJECT_DATA), payload_offset + 1)?;
        let next = le64(bytes, DATA_NEXT_FIELD_OFFSET);
        Ok((next != 0).then_some(next))
    }

    /// How many steps a walk along a chain of objects may take before it must be a loop.
    pub fn chain_budget(&self) -> u64 {
        match self.header.n_objects {
            0 => self.end / OBJECT_HEADER_SIZE,
            n => n.min(self.end / OBJECT_HEADER_SIZE),
        }
    }

    /// The entry-array object at `offset`: its capacity and the next array's offset.
    pub fn entry_array(
        &self,
        cache: &mut PageCache,
        offset: u64,
    ) -> Result<EntryArray, ObjectError> {
        let item_size = self.header.entry_array_item_size();
        let header = self.object_header(cache, offset)?;
        if header.kind != OBJECT_ENTRY_ARRAY {
            return Err(ObjectError::damaged(offset, "not an entry array"));
        }
        let items = header.size.saturating_sub(ENTRY_ARRAY_ITEMS_OFFSET);
        if header.size <= ENTRY_ARRAY_ITEMS_OFFSET || items % item_size != 0 {
            return Err(ObjectError::damaged(
                offset,
                format!(
                    "entry array size {} is not a whole number of items",
                    header.size
                ),
            ));
        }
        if offset.saturating_add(header.size) > self.end {
            return Err(ObjectError::Truncated { offset });
        }
        let bytes = cache
            .read(self.source, offset, ENTRY_ARRAY_ITEMS_OFFSET as usize)
            .map_err(|e| ObjectError::from_read(offset, e))?;
        let next = le64(bytes, 16);
        if !next.is_multiple_of(8) {
            return Err(ObjectError::damaged(
                offset,
                "the next array's offset is misaligned",
            ));
        }
        Ok(EntryArray {
            offset,
            capacity: items / item_size,
            next,
        })
    }

    /// Item `index` of an entry array (0 for an unused slot).
    pub fn entry_array_item(
        &self,
        cache: &mut PageCache,
        array: &EntryArray,
        index: u64,
    ) -> Result<u64, ObjectError> {
        let item_size = self.header.entry_array_item_size();
        let at = array.offset + ENTRY_ARRAY_ITEMS_OFFSET + index * item_size;
        let bytes = cache
            .read(self.source, at, item_size as usize)
            .map_err(|e| ObjectError::from_read(array.offset, e))?;
        Ok(if item_size == 4 {
            u64::from(le32(bytes, 0))
        } else {
            le64(bytes, 0)
        })
    }
}

/// An object's 16-byte header.
#[derive(Debug, Clone, Copy)]
pub struct ObjectHeader {
    pub kind: u8,
    pub flags: u8,
    /// The six reserved bytes are zero, as every writer leaves them.
    pub reserved_clear: bool,
    pub size: u64,
}

/// One entry array in the chain of a file's entry arrays.
#[derive(Debug, Clone, Copy)]
pub struct EntryArray {
    pub offset: u64,
    pub capacity: u64,
    pub next: u64,
}

fn entry_meta(offset: u64, bytes: &[u8]) -> Result<EntryMeta, ObjectError> {
    let meta = EntryMeta {
        offset,
        seqnum: le64(bytes, 16),
        realtime: le64(bytes, 24),
        monotonic: le64(bytes, 32),
        boot_id: Id128::from_slice(&bytes[40..56]),
        xor_hash: le64(bytes, 56),
    };
    if meta.seqnum == 0 {
        return Err(ObjectError::damaged(offset, "entry sequence number 0"));
    }
    if !valid_realtime(meta.realtime) {
        return Err(ObjectError::damaged(
            offset,
            format!("invalid realtime timestamp {}", meta.realtime),
        ));
    }
    if !valid_monotonic(meta.monotonic) {
        return Err(ObjectError::damaged(
            offset,
            format!("invalid monotonic timestamp {}", meta.monotonic),
        ));
    }
    Ok(meta)
}
