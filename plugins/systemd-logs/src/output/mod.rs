//! Writing entries as journalctl does: `-o json` ([`json`]) or `-o export` ([`export`]).
//!
//! An entry is first gathered into [`Fields`]: the four fields journalctl derives from the entry
//! object (`__CURSOR`, `__REALTIME_TIMESTAMP`, `__MONOTONIC_TIMESTAMP`, `_BOOT_ID`), then its
//! data fields in the order the entry lists them. The writers then only format.

pub mod export;
mod fields;
pub mod json;
pub mod printable;

pub use fields::{Fields, JSON_THRESHOLD, Rejected};

/// The output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// `journalctl -o json`; `all` as `--all`: long fields in full instead of `null`.
    Json { all: bool },
    /// `journalctl -o export`.
    Export,
}

impl Format {
    pub fn artifact_name(self) -> &'static str {
        match self {
            Format::Json { .. } => "journal.jsonl",
            Format::Export => "journal.export",
        }
    }

    pub fn media_type(self) -> &'static str {
        match self {
            Format::Json { .. } => "application/x-ndjson",
            // The media type systemd-journal-gatewayd serves the export format with.
            Format::Export => "application/vnd.fdo.journal",
        }
    }

    /// Bytes of each payload to read: JSON only needs to know whether a field reaches the
    /// threshold, as journalctl's data threshold does.
    pub fn payload_limit(self) -> usize {
        match self {
            Format::Json { all: false } => JSON_THRESHOLD,
            _ => crate::journal::decompress::MAX_PAYLOAD_BYTES,
        }
    }

    /// journalctl looks for the `=` of a JSON field only in its first 4096 bytes.
    pub fn name_search_limit(self) -> usize {
        match self {
            Format::Json { .. } => JSON_THRESHOLD,
            Format::Export => usize::MAX,
        }
    }

    /// Writes one entry.
    pub fn write(self, fields: &Fields, out: &mut impl std::io::Write) -> std::io::Result<()> {
        match self {
            Format::Json { all } => json::write_entry(fields, all, out),
            Format::Export => export::write_entry(fields, out),
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::fields::{valid_field_name, write_cursor};
    use super::*;
    use crate::journal::{EntryMeta, Id128};

    pub fn meta() -> EntryMeta {
        EntryMeta {
            offset: 4096,
            seqnum: 0x1a,
            realtime: 1_700_000_000_000_000,
            monotonic: 12345,
            boot_id: Id128([0x01; 16]),
            xor_hash: 0xdeadbeef,
        }
    }

    /// An entry with the given data payloads, as the reader would gather it.
    pub fn fields(payloads: &[&[u8]], format: Format) -> Fields {
        let mut fields = Fields::default();
        fields.start(&meta(), &Id128([0xab; 16]));
        for payload in payloads {
            let (buffer, start) = fields.payload_buffer();
            let limit = format.payload_limit();
            buffer.extend_from_slice(&payload[..payload.len().min(limit)]);
            let _ = fields.accept(start, payload.len() > limit, format.name_search_limit());
        }
        fields
    }

    #[test]
    fn cursor_as_journalctl_writes_it() {
        let mut out = Vec::new();
        write_cursor(&mut out, &meta(), &Id128([0xab; 16]));
        assert_eq!(
            String::from_utf8(out).unwrap(),
            format!(
                "s={};i=1a;b={};m=3039;t=60a24181e4000;x=deadbeef",
                "ab".repeat(16),
                "01".repeat(16)
            )
        );
    }

    #[test]
    fn leaves_out_what_journalctl_leaves_out() {
        let mut fields = Fields::default();
        fields.start(&meta(), &Id128::default());
        let format = Format::Json { all: false };
        let mut offer = |payload: &[u8]| {
            let (buffer, start) = fields.payload_buffer();
            buffer.extend_from_slice(payload);
            fields.accept(start, false, format.name_search_limit())
        };
        assert_eq!(offer(b"_BOOT_ID=0101"), Err(Rejected::BootId));
        assert_eq!(offer(b"NO_EQUALS"), Err(Rejected::NoName));
        assert_eq!(
            offer(b"lower=case"),
            Err(Rejected::InvalidName("lower".into()))
        );
        assert_eq!(offer(b"1ST=x"), Err(Rejected::InvalidName("1ST".into())));
        assert_eq!(offer(b"MESSAGE=a=b"), Ok(()));
        assert_eq!(fields.list.len(), 5);
        let message = fields.list[4];
        assert_eq!(fields.name(&message), b"MESSAGE");
        assert_eq!(fields.value(&message), b"a=b");
        assert!(valid_field_name(&[b'A'; 64]));
        assert!(!valid_field_name(&[b'A'; 65]));
    }
}
