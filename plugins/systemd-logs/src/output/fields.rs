//! An entry's fields, gathered as journalctl gathers them before it writes them: the four
//! fields it derives from the entry object, then the entry's data fields in order, each checked
//! as journalctl checks it. And the number formats both writers share.

use crate::journal::{EntryMeta, Id128};

/// journalctl's JSON threshold: a field whose `NAME=value` is this long or longer is written as
/// `null` unless `--all` is given (`JSON_THRESHOLD` in systemd's logs-show.c).
pub const JSON_THRESHOLD: usize = 4096;

/// One field of an entry: byte ranges into [`Fields::bytes`].
#[derive(Debug, Clone, Copy)]
pub struct Field {
    pub(super) name: (usize, usize),
    /// Tells most different names apart without comparing them.
    pub(super) name_hash: u64,
    pub(super) value: (usize, usize),
    /// Only a prefix of the value was read (it reaches the payload limit).
    pub(super) truncated: bool,
}

/// Why a payload was left out of an entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rejected {
    /// `_BOOT_ID=`: journalctl prints the entry object's boot id instead.
    BootId,
    /// No `=`, as journalctl skips it.
    NoName,
    /// A name journalctl refuses (it stops with "Invalid field").
    InvalidName(String),
}

/// The fields of one entry, in the order journalctl enumerates them.
#[derive(Default)]
pub struct Fields {
    bytes: Vec<u8>,
    pub(super) list: Vec<Field>,
}

impl Fields {
    /// Starts an entry with the fields journalctl derives from the entry object.
    pub fn start(&mut self, meta: &EntryMeta, seqnum_id: &Id128) {
        self.bytes.clear();
        self.list.clear();
        self.push_derived("__CURSOR", |out| write_cursor(out, meta, seqnum_id));
        self.push_derived("__REALTIME_TIMESTAMP", |out| {
            write_decimal(out, meta.realtime)
        });
        self.push_derived("__MONOTONIC_TIMESTAMP", |out| {
            write_decimal(out, meta.monotonic)
        });
        self.push_derived("_BOOT_ID", |out| meta.boot_id.write_hex(out));
    }

    fn push_derived(&mut self, name: &str, write_value: impl FnOnce(&mut Vec<u8>)) {
        let name_start = self.bytes.len();
        self.bytes.extend_from_slice(name.as_bytes());
        let value_start = self.bytes.len();
        write_value(&mut self.bytes);
        self.list.push(Field {
            name: (name_start, name.len()),
            name_hash: name_hash(name.as_bytes()),
            value: (value_start, self.bytes.len() - value_start),
            truncated: false,
        });
    }

    /// The buffer a data payload is read into, before [`Fields::accept`] or
    /// [`Fields::discard`] decides about it.
    pub fn payload_buffer(&mut self) -> (&mut Vec<u8>, usize) {
        let start = self.bytes.len();
        (&mut self.bytes, start)
    }

    /// Takes the payload read since `start` as a field, or leaves it out as journalctl does.
    pub fn accept(
        &mut self,
        start: usize,
        truncated: bool,
        name_search_limit: usize,
    ) -> Result<(), Rejected> {
        let payload = &self.bytes[start..];
        let searched = &payload[..payload.len().min(name_search_limit)];
        let verdict = if payload.starts_with(b"_BOOT_ID=") {
            Err(Rejected::BootId)
        } else {
            match searched.iter().position(|&b| b == b'=') {
                None => Err(Rejected::NoName),
                Some(eq) if !valid_field_name(&payload[..eq]) => Err(Rejected::InvalidName(
                    String::from_utf8_lossy(&payload[..eq.min(80)]).into_owned(),
                )),
                Some(eq) => Ok(eq),
            }
        };
        match verdict {
            Ok(eq) => {
                self.list.push(Field {
                    name: (start, eq),
                    name_hash: name_hash(&payload[..eq]),
                    value: (start + eq + 1, payload.len() - eq - 1),
                    truncated,
                });
                Ok(())
            }
            Err(rejected) => {
                self.bytes.truncate(start);
                Err(rejected)
            }
        }
    }

    /// Drops a payload that could not be read completely.
    pub fn discard(&mut self, start: usize) {
        self.bytes.truncate(start);
    }

    pub(super) fn name(&self, field: &Field) -> &[u8] {
        &self.bytes[field.name.0..field.name.0 + field.name.1]
    }

    pub(super) fn value(&self, field: &Field) -> &[u8] {
        &self.bytes[field.value.0..field.value.0 + field.value.1]
    }
}

/// FNV-1a: cheap for names of at most 64 bytes.
fn name_hash(name: &[u8]) -> u64 {
    name.iter().fold(0xcbf29ce484222325, |hash, &byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x100000001b3)
    })
}

/// systemd's `journal_field_valid` with protected (`_`) names allowed: 1 to 64 of `A-Z`, `0-9`
/// and `_`, not starting with a digit.
pub fn valid_field_name(name: &[u8]) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && !name[0].is_ascii_digit()
        && name
            .iter()
            .all(|&b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_')
}

/// journalctl's cursor: `s=<seqnum id>;i=<seqnum>;b=<boot id>;m=<monotonic>;t=<realtime>;x=<xor
/// hash>`, numbers in lower-case hex.
pub fn write_cursor(out: &mut Vec<u8>, meta: &EntryMeta, seqnum_id: &Id128) {
    out.extend_from_slice(b"s=");
    seqnum_id.write_hex(out);
    out.extend_from_slice(b";i=");
    write_hex(out, meta.seqnum);
    out.extend_from_slice(b";b=");
    meta.boot_id.write_hex(out);
    out.extend_from_slice(b";m=");
    write_hex(out, meta.monotonic);
    out.extend_from_slice(b";t=");
    write_hex(out, meta.realtime);
    out.extend_from_slice(b";x=");
    write_hex(out, meta.xor_hash);
}

pub fn write_decimal(out: &mut Vec<u8>, mut n: u64) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[at..]);
}

fn write_hex(out: &mut Vec<u8>, n: u64) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut digits = [0u8; 16];
    let mut at = digits.len();
    let mut n = n;
    loop {
        at -= 1;
        digits[at] = HEX[(n & 15) as usize];
        n >>= 4;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[at..]);
}
