//! journalctl's test for a value it may print as text (systemd's `utf8_is_printable_newline`):
//! valid UTF-8 without control characters (tab allowed, newline allowed when asked) and without
//! the code points systemd counts as invalid (the `U+FDD0..U+FDEF` and `U+xFFFE`/`U+xFFFF`
//! noncharacters). Anything else journalctl writes as an array of byte values in JSON, and in
//! the binary form in export format.

/// Whether journalctl prints `bytes` as text. `allow_newline`: JSON allows `\n` in text (it
/// escapes it); the export format does not.
pub fn is_printable(bytes: &[u8], allow_newline: bool) -> bool {
    // Most values are plain ASCII: check those bytes without decoding.
    for (at, &byte) in bytes.iter().enumerate() {
        if byte >= 0x80 {
            return rest_is_printable(&bytes[at..], allow_newline);
        }
        if !ascii_printable(byte, allow_newline) {
            return false;
        }
    }
    true
}

fn ascii_printable(byte: u8, allow_newline: bool) -> bool {
    match byte {
        b'\t' => true,
        b'\n' => allow_newline,
        0x00..=0x1f | 0x7f => false,
        _ => true,
    }
}

fn rest_is_printable(bytes: &[u8], allow_newline: bool) -> bool {
    let Ok(text) = std::str::from_utf8(bytes) else {
        return false;
    };
    text.chars().all(|c| {
        let code = u32::from(c);
        if code < 0x80 {
            return ascii_printable(code as u8, allow_newline);
        }
        !(0x80..=0x9f).contains(&code)
            && !(0xfdd0..=0xfdef).contains(&code)
            && code & 0xfffe != 0xfffe
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_as_journalctl_sees_it() {
        assert!(is_printable(b"plain", true));
        assert!(is_printable(b"", true));
        assert!(is_printable(b"tab\there", false));
        assert!(is_printable("caf\u{e9} \u{1f600}".as_bytes(), true));
        assert!(is_printable(b"two\nlines", true));
        assert!(!is_printable(b"two\nlines", false));
        for binary in [
            &b"nul \0"[..],
            b"bell \x07",
            b"del \x7f",
            b"cr \r",
            b"bad \xff",
            b"surrogate \xed\xa0\x80",
            b"overlong \xc0\xaf",
            b"cut \xe6\x97",
            "c1 \u{85}".as_bytes(),
            "nonchar \u{fffe}".as_bytes(),
            "nonchar \u{fdd0}".as_bytes(),
            "nonchar \u{1ffff}".as_bytes(),
        ] {
            assert!(!is_printable(binary, true), "{binary:?}");
        }
        assert!(is_printable("\u{fdcf} \u{fdf0} \u{fffd}".as_bytes(), true));
    }
}
