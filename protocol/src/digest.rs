//! Content digests: the sha-256 of bytes and of files, and the `Content-Digest` header
//! (RFC 9530) with sha-256, which every uploaded file carries and the aggregator checks before
//! accepting the file.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use sha2::{Digest, Sha256};

/// Lower-case hex sha-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

/// Lower-case hex sha-256 of a file, read in pieces: bundles can be many gigabytes.
pub fn sha256_file(path: &std::path::Path) -> std::io::Result<String> {
    let mut hasher = Sha256::new();
    let mut file = std::io::BufReader::with_capacity(1 << 20, std::fs::File::open(path)?);
    std::io::copy(&mut file, &mut hasher)?;
    Ok(hex(&hasher.finalize()))
}

fn hex(raw: &[u8]) -> String {
    raw.iter().map(|b| format!("{b:02x}")).collect()
}

/// The header's name.
pub const CONTENT_DIGEST: &str = "content-digest";

/// `sha-256=:<base64>:` for a hex digest.
pub fn header_value(sha256_hex: &str) -> Option<String> {
    let raw = hex_decode(sha256_hex)?;
    Some(format!("sha-256=:{}:", STANDARD.encode(raw)))
}

/// The hex sha-256 in a `Content-Digest` value, if it carries one.
pub fn parse_sha256(value: &str) -> Option<String> {
    value.split(',').find_map(|item| {
        let b64 = item.trim().strip_prefix("sha-256=:")?.strip_suffix(':')?;
        let raw = STANDARD.decode(b64).ok()?;
        (raw.len() == 32).then(|| hex(&raw))
    })
}

fn hex_decode(hex: &str) -> Option<Vec<u8>> {
    if hex.len() != 64 {
        return None;
    }
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_refuses_other_algorithms() {
        let hex = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
        let value = header_value(hex).unwrap();
        assert_eq!(
            value,
            "sha-256=:47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=:"
        );
        assert_eq!(parse_sha256(&value).unwrap(), hex);
        assert_eq!(
            parse_sha256(&format!("sha-512=:AAAA:, {value}")).unwrap(),
            hex
        );
        assert_eq!(parse_sha256("sha-512=:AAAA:"), None);
        assert_eq!(parse_sha256("sha-256=:AAAA:"), None);
        assert_eq!(header_value("xyz"), None);
        assert_eq!(sha256_hex(b""), hex);
        let file = std::env::temp_dir().join(format!("factbuoy-digest-{}", std::process::id()));
        std::fs::write(&file, b"").unwrap();
        assert_eq!(sha256_file(&file).unwrap(), hex);
        std::fs::remove_file(file).unwrap();
    }
}
