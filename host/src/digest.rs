//! Content digests.

use sha2::{Digest, Sha256};

/// Lower-case hex sha-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}
