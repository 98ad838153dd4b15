//! What the benchmark generators share: node names, the template's facts read in, and the
//! random identifiers that make each generated node a machine of its own.

use std::path::Path;

use anyhow::Context;
use rand::Rng;
use rand::rngs::StdRng;
use serde_json::{Value, json};

/// The name of generated node number `index`.
pub fn node_name(index: usize) -> String {
    format!("node-{index:04}.bench.example")
}

pub fn read_json(path: &Path) -> anyhow::Result<Value> {
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    serde_json::from_slice(&bytes).with_context(|| format!("parsing {}", path.display()))
}

/// A random UUID, as DMI and the kernel report one.
pub fn uuid(rng: &mut StdRng) -> String {
    let hex = format!("{:032x}", rng.random::<u128>());
    format!(
        "{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..]
    )
}

/// `len` random base64 characters, as a host key's are.
pub fn random_base64(len: usize, rng: &mut StdRng) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    (0..len)
        .map(|_| char::from(ALPHABET[rng.random_range(0..ALPHABET.len())]))
        .collect()
}

/// Every MAC address in `facts` (setup's `macaddress`, host-facts' `mac_address`) replaced by
/// a random one, locally administered.
pub fn with_new_macs(facts: &mut Value, rng: &mut StdRng) {
    match facts {
        Value::Object(map) => {
            for (key, value) in map.iter_mut() {
                if (key == "macaddress" || key == "mac_address") && value.is_string() {
                    let bytes: [u8; 5] = rng.random();
                    *value = json!(format!(
                        "02:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
                        bytes[0], bytes[1], bytes[2], bytes[3], bytes[4]
                    ));
                } else {
                    with_new_macs(value, rng);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|item| with_new_macs(item, rng)),
        _ => {}
    }
}
