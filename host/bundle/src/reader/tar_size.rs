//! An archive entry's size as tar reads it, and the entries whose headers leave it in doubt.
//!
//! A tar entry can state its size twice: in its ustar header (11 octal digits, or GNU's
//! base-256 form for larger numbers) and in a PAX `size` record before it, which GNU tar, the
//! `tar` crate and Python read in preference. A reader that trusts the other field sees other
//! bytes than `tar -x` extracts, so an entry is refused when its two sizes disagree, when a
//! PAX `size` is not a plain decimal number (GNU tar would ignore it where the `tar` crate
//! reads it), and when PAX records make it a GNU sparse file (`tar -x` rebuilds a file from a
//! map that a reader of the raw content never sees).

use std::io::Read;

/// The largest size an ustar header's 11 octal digits hold: 8 GiB less a byte.
const MAX_OCTAL_SIZE: u64 = 0o77_777_777_777;

/// The size of a regular file's content as tar reads it (a PAX `size` over the header's
/// field, octal or base-256), or why the entry is refused. An error is a header that cannot
/// be read at all.
pub fn agreed_size<R: Read>(entry: &mut tar::Entry<'_, R>) -> std::io::Result<Result<u64, String>> {
    let header = entry.header().entry_size()?;
    // What the `tar` crate frames the content with, as GNU tar does.
    let size = entry.size();
    let mut pax = None;
    if let Some(records) = entry.pax_extensions()? {
        for record in records {
            let Ok(record) = record else {
                return Ok(Err("a malformed PAX header".into()));
            };
            let key = record.key_bytes();
            if key.starts_with(b"GNU.sparse.") {
                return Ok(Err("a GNU sparse file (PAX GNU.sparse records)".into()));
            }
            if key != b"size" {
                continue;
            }
            let value = String::from_utf8_lossy(record.value_bytes());
            let parsed = Some(&*value)
                .filter(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()))
                .and_then(|v| v.parse::<u64>().ok());
            match parsed {
                None => {
                    return Ok(Err(format!(
                        "a PAX size {value:?} that is not a number of bytes"
                    )));
                }
                Some(parsed) if pax.is_some_and(|earlier| earlier != parsed) => {
                    return Ok(Err("two PAX size records that disagree".into()));
                }
                Some(parsed) => pax = Some(parsed),
            }
        }
    }
    let Some(pax) = pax else {
        return Ok(Ok(size));
    };
    // GNU tar and Python write 0 in the ustar field when the size needs a PAX record.
    let placeholder = header == 0 && pax > MAX_OCTAL_SIZE;
    if pax != size || (header != pax && !placeholder) {
        return Ok(Err(format!(
            "headers that disagree on its size: {pax} bytes in its PAX header, {header} in its \
             ustar header (tar reads {size})"
        )));
    }
    Ok(Ok(size))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An archive of one regular file `f` of `content` whose ustar header says `header_size`,
    /// after a PAX header of `records` (none when empty).
    fn archive(records: &[(&str, &[u8])], header_size: u64, content: &[u8]) -> Vec<u8> {
        archive_with(records, |h| h.set_size(header_size), content)
    }

    /// [`archive`] with the ustar size field written by `size`.
    fn archive_with(
        records: &[(&str, &[u8])],
        size: impl FnOnce(&mut tar::Header),
        content: &[u8],
    ) -> Vec<u8> {
        let mut builder = tar::Builder::new(Vec::new());
        builder
            .append_pax_extensions(records.iter().copied())
            .unwrap();
        let mut header = tar::Header::new_ustar();
        header.set_path("f").unwrap();
        header.set_mode(0o644);
        size(&mut header);
        header.set_cksum();
        builder.append(&header, content).unwrap();
        builder.into_inner().unwrap()
    }

    /// The size GNU tar lists for the archive's one file (`tar -tv`).
    fn gnu_tar_size(bytes: &[u8]) -> u64 {
        use std::io::Write;
        let mut tar = std::process::Command::new("tar")
            .args(["-tvf", "-"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        tar.stdin.take().unwrap().write_all(bytes).unwrap();
        let listed = tar.wait_with_output().unwrap();
        assert!(listed.status.success());
        // `-rw-r--r-- 0/0  12 1970-01-01 00:00 f`
        let listing = String::from_utf8(listed.stdout).unwrap();
        listing.split_whitespace().nth(2).unwrap().parse().unwrap()
    }

    /// [`agreed_size`] of the archive's first entry.
    fn size_of(bytes: &[u8]) -> Result<u64, String> {
        let mut archive = tar::Archive::new(bytes);
        let mut entry = archive.entries().unwrap().next().unwrap().unwrap();
        agreed_size(&mut entry).unwrap()
    }

    #[test]
    fn sizes_that_agree_or_stand_alone_are_read() {
        assert_eq!(size_of(&archive(&[], 12, &[7; 12])), Ok(12));
        assert_eq!(size_of(&archive(&[("size", b"12")], 12, &[7; 12])), Ok(12));
        assert_eq!(
            size_of(&archive(&[("size", b"12"), ("size", b"12")], 12, &[7; 12])),
            Ok(12)
        );
        // Other records (a long path, times) say nothing about the size.
        assert_eq!(
            size_of(&archive(&[("mtime", b"1.5"), ("path", b"f")], 3, b"abc")),
            Ok(3)
        );
    }

    #[test]
    fn a_gnu_base_256_size_is_read_as_tar_reads_it() {
        // 12 in base-256: the high bit of the first byte set, the number big-endian after it.
        let base256 = |h: &mut tar::Header| {
            let field = &mut h.as_old_mut().size;
            *field = [0; 12];
            field[0] = 0x80;
            field[11] = 12;
        };
        let bytes = archive_with(&[], base256, &[7; 12]);
        assert_eq!(size_of(&bytes), Ok(12));
        assert_eq!(gnu_tar_size(&bytes), 12);
        assert_eq!(
            size_of(&archive_with(&[("size", b"12")], base256, &[7; 12])),
            Ok(12)
        );
    }

    #[test]
    fn a_pax_size_the_ustar_field_cannot_hold_may_leave_it_zero() {
        // Only the headers are read: the content is never reached.
        let big = MAX_OCTAL_SIZE + 2;
        let records = [("size", big.to_string())];
        let records: Vec<(&str, &[u8])> = records.iter().map(|(k, v)| (*k, v.as_bytes())).collect();
        assert_eq!(size_of(&archive(&records, 0, &[])), Ok(big));
        // A small size in a PAX record has no reason to leave the field empty.
        assert!(size_of(&archive(&[("size", b"12")], 0, &[7; 12])).is_err());
    }

    #[test]
    fn headers_that_disagree_are_refused_with_both_sizes() {
        let bytes = archive(&[("size", b"12")], 5, &[7; 12]);
        assert_eq!(gnu_tar_size(&bytes), 12);
        let refused = size_of(&bytes).unwrap_err();
        assert_eq!(
            refused,
            "headers that disagree on its size: 12 bytes in its PAX header, 5 in its ustar \
             header (tar reads 12)"
        );
        let refused = size_of(&archive(&[("size", b"5")], 12, &[7; 12])).unwrap_err();
        assert!(
            refused.contains("5 bytes in its PAX header, 12 in its ustar"),
            "{refused}"
        );
    }

    #[test]
    fn pax_records_tar_readers_read_differently_are_refused() {
        // GNU tar ignores a size that does not start with a digit; the tar crate reads "+12".
        for bad in [&b"+12"[..], b"12 ", b"", b"0x0c", b"99999999999999999999"] {
            let refused = size_of(&archive(&[("size", bad)], 12, &[7; 12])).unwrap_err();
            assert!(
                refused.contains("that is not a number"),
                "{bad:?}: {refused}"
            );
        }
        // The tar crate takes the first record, GNU tar the last.
        let refused = size_of(&archive(&[("size", b"12"), ("size", b"5")], 12, &[7; 12]));
        assert_eq!(refused, Err("two PAX size records that disagree".into()));
        let refused = size_of(&archive(&[("GNU.sparse.realsize", b"4096")], 12, &[7; 12]));
        assert!(refused.unwrap_err().contains("GNU sparse"));
        // A record whose length is not its own: the tar crate skips every record after it.
        let mut builder = tar::Builder::new(Vec::new());
        let mut pax = tar::Header::new_ustar();
        pax.set_entry_type(tar::EntryType::XHeader);
        pax.set_size(11);
        pax.set_cksum();
        builder.append(&pax, &b"5 size=12\n"[..]).unwrap();
        let mut header = tar::Header::new_ustar();
        header.set_path("f").unwrap();
        header.set_size(12);
        header.set_cksum();
        builder.append(&header, &[7; 12][..]).unwrap();
        let bytes = builder.into_inner().unwrap();
        assert_eq!(size_of(&bytes), Err("a malformed PAX header".into()));
    }
}
