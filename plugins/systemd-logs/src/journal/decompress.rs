//! Decompressing DATA object payloads. journald compresses payloads above a size threshold with
//! one of three algorithms, marked in the object's flags:
//!
//! - XZ: a complete `.xz` stream (lzma-rs);
//! - LZ4: the uncompressed size as a little-endian 64-bit integer, then one raw LZ4 block
//!   (lz4_flex);
//! - ZSTD: one Zstandard frame (ruzstd).
//!
//! All three are pure Rust, so they build for wasm32-wasip2. Output is capped at the caller's
//! limit, itself at most [`MAX_PAYLOAD_BYTES`], so a damaged or hostile payload cannot make the
//! plugin allocate without bound.

use std::fmt;
use std::io::{self, Read, Write};

use super::layout::{
    OBJECT_COMPRESSED_LZ4, OBJECT_COMPRESSED_XZ, OBJECT_COMPRESSED_ZSTD, OBJECT_COMPRESSION_MASK,
};

/// The largest payload this reader holds in memory, compressed or not. journald allows larger
/// fields (coredumps kept in the journal), which are reported rather than read.
pub const MAX_PAYLOAD_BYTES: usize = 64 << 20;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    Xz,
    Lz4,
    Zstd,
}

impl Compression {
    /// The compression an object's flags announce; an error when more than one is set.
    pub fn from_flags(flags: u8) -> Result<Option<Compression>, DecompressError> {
        match flags & OBJECT_COMPRESSION_MASK {
            0 => Ok(None),
            OBJECT_COMPRESSED_XZ => Ok(Some(Compression::Xz)),
            OBJECT_COMPRESSED_LZ4 => Ok(Some(Compression::Lz4)),
            OBJECT_COMPRESSED_ZSTD => Ok(Some(Compression::Zstd)),
            several => Err(DecompressError(format!(
                "object flags {several:#x} name more than one compression"
            ))),
        }
    }

    fn name(self) -> &'static str {
        match self {
            Compression::Xz => "xz",
            Compression::Lz4 => "lz4",
            Compression::Zstd => "zstd",
        }
    }
}

/// A payload that does not decompress.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecompressError(pub String);

impl fmt::Display for DecompressError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Whether the whole payload was produced, or only its first `limit` bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decompressed {
    Complete,
    /// The payload is longer than the limit; `limit` bytes were appended.
    Truncated,
}

/// Appends the decompressed `input` to `out`, at most `limit` bytes (itself at most
/// [`MAX_PAYLOAD_BYTES`]).
pub fn decompress(
    kind: Compression,
    input: &[u8],
    out: &mut Vec<u8>,
    limit: usize,
) -> Result<Decompressed, DecompressError> {
    let limit = limit.min(MAX_PAYLOAD_BYTES);
    let start = out.len();
    let result = match kind {
        Compression::Zstd => zstd(input, out, limit),
        Compression::Lz4 => lz4(input, out, limit),
        Compression::Xz => xz(input, out, limit),
    };
    if result.is_err() {
        out.truncate(start);
    }
    result.map_err(|e| DecompressError(format!("{} payload does not decompress: {e}", kind.name())))
}

fn zstd(input: &[u8], out: &mut Vec<u8>, limit: usize) -> Result<Decompressed, String> {
    let mut decoder = ruzstd::decoding::StreamingDecoder::new(input).map_err(|e| e.to_string())?;
    let start = out.len();
    loop {
        let produced = out.len() - start;
        if produced == limit {
            // Anything more means the payload is longer than the limit.
            let mut probe = [0u8; 1];
            return match decoder.read(&mut probe).map_err(|e| e.to_string())? {
                0 => Ok(Decompressed::Complete),
                _ => Ok(Decompressed::Truncated),
            };
        }
        let room = (limit - produced).min(64 * 1024);
        let filled = out.len();
        out.resize(filled + room, 0);
        let read = decoder
            .read(&mut out[filled..])
            .map_err(|e| e.to_string())?;
        out.truncate(filled + read);
        if read == 0 {
            return Ok(Decompressed::Complete);
        }
    }
}

fn lz4(input: &[u8], out: &mut Vec<u8>, limit: usize) -> Result<Decompressed, String> {
    let (size, block) = input
        .split_first_chunk::<8>()
        .ok_or("shorter than its size header")?;
    let size = u64::from_le_bytes(*size);
    if size > MAX_PAYLOAD_BYTES as u64 {
        return Err(format!(
            "claims {size} bytes, more than the {MAX_PAYLOAD_BYTES} this reader holds"
        ));
    }
    // A block decompresses whole: when only a prefix is wanted, decompress it aside.
    if size > limit as u64 {
        let mut whole = vec![0u8; size as usize];
        decompress_lz4_block(block, &mut whole, size)?;
        out.extend_from_slice(&whole[..limit]);
        return Ok(Decompressed::Truncated);
    }
    let start = out.len();
    out.resize(start + size as usize, 0);
    decompress_lz4_block(block, &mut out[start..], size)?;
    Ok(Decompressed::Complete)
}

fn decompress_lz4_block(block: &[u8], into: &mut [u8], size: u64) -> Result<(), String> {
    let written = lz4_flex::block::decompress_into(block, into).map_err(|e| e.to_string())?;
    if written as u64 != size {
        return Err(format!(
            "decompressed to {written} bytes, its header says {size}"
        ));
    }
    Ok(())
}

fn xz(input: &[u8], out: &mut Vec<u8>, limit: usize) -> Result<Decompressed, String> {
    let mut writer = Capped {
        out,
        room: limit,
        overflowed: false,
    };
    let mut reader = input;
    let result = lzma_rs::xz_decompress(&mut reader, &mut writer);
    if writer.overflowed {
        return Ok(Decompressed::Truncated);
    }
    result.map_err(|e| e.to_string())?;
    Ok(Decompressed::Complete)
}

/// A writer that takes `room` bytes and then fails, remembering that it did.
struct Capped<'a> {
    out: &'a mut Vec<u8>,
    room: usize,
    overflowed: bool,
}

impl Write for Capped<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if buf.len() > self.room {
            self.out.extend_from_slice(&buf[..self.room]);
            self.room = 0;
            self.overflowed = true;
            return Err(io::Error::other("payload above the size limit"));
        }
        self.out.extend_from_slice(buf);
        self.room -= buf.len();
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    //! The compressed samples were made by the reference tools (see `testdata/README.md`), so
    //! these tests check the formats journald writes, not just a round trip through our crates.
    use super::*;

    const TEXT: &[u8] = include_bytes!("testdata/sample.txt");

    fn journal_lz4() -> Vec<u8> {
        // journald's layout: the size, then the block the lz4 tool wrote in its legacy format
        // (magic, block size, block).
        let legacy = include_bytes!("testdata/sample.txt.lz4-legacy");
        let mut payload = (TEXT.len() as u64).to_le_bytes().to_vec();
        payload.extend_from_slice(&legacy[8..]);
        payload
    }

    fn all_formats() -> Vec<(Compression, Vec<u8>)> {
        vec![
            (
                Compression::Zstd,
                include_bytes!("testdata/sample.txt.zst").to_vec(),
            ),
            (
                Compression::Xz,
                include_bytes!("testdata/sample.txt.xz").to_vec(),
            ),
            (Compression::Lz4, journal_lz4()),
        ]
    }

    #[test]
    fn decompresses_what_the_reference_tools_wrote() {
        for (kind, payload) in all_formats() {
            let mut out = b"MESSAGE=".to_vec();
            let done = decompress(kind, &payload, &mut out, MAX_PAYLOAD_BYTES).unwrap();
            assert_eq!(done, Decompressed::Complete, "{kind:?}");
            assert_eq!(&out[8..], TEXT, "{kind:?}");
        }
    }

    #[test]
    fn stops_at_the_limit_and_says_so() {
        for (kind, payload) in all_formats() {
            let mut out = Vec::new();
            let done = decompress(kind, &payload, &mut out, 100).unwrap();
            assert_eq!(done, Decompressed::Truncated, "{kind:?}");
            assert_eq!(out, &TEXT[..100], "{kind:?}");
            let mut out = Vec::new();
            let done = decompress(kind, &payload, &mut out, TEXT.len()).unwrap();
            assert_eq!(done, Decompressed::Complete, "{kind:?}");
        }
    }

    #[test]
    fn damaged_payloads_are_errors_and_leave_no_bytes_behind() {
        for (kind, payload) in all_formats() {
            for damage in [
                payload[..payload.len() / 2].to_vec(),
                payload.iter().map(|b| b ^ 0x5a).collect::<Vec<u8>>(),
                Vec::new(),
            ] {
                let mut out = b"kept".to_vec();
                let result = decompress(kind, &damage, &mut out, MAX_PAYLOAD_BYTES);
                assert!(result.is_err(), "{kind:?} accepted damage");
                assert_eq!(out, b"kept");
            }
        }
    }

    #[test]
    fn flags_name_one_compression_at_most() {
        assert_eq!(Compression::from_flags(0), Ok(None));
        assert_eq!(
            Compression::from_flags(OBJECT_COMPRESSED_ZSTD),
            Ok(Some(Compression::Zstd))
        );
        assert!(Compression::from_flags(OBJECT_COMPRESSED_XZ | OBJECT_COMPRESSED_LZ4).is_err());
    }
}
