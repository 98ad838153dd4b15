//! What `ethtool -k` and `ethtool -T` print, built from the kernel's answers that
//! [`host_info::ethtool`](crate::host_info::ethtool) returns (a plugin cannot make the ioctls
//! itself).
//!
//! `ethtool -k` shows the legacy offload flags first (`tx-checksumming`, `scatter-gather`, ...),
//! each followed by the kernel features it stands for, then the remaining features, each with
//! `on`/`off` and `[fixed]`, `[requested on]` or `[requested off]`; ported from ethtool's
//! `dump_features` (`netlink/features.c`, the same output as its ioctl version on kernels since
//! 4.14).

use crate::host_info::NetFeature;

/// ethtool's legacy offload flags: the name it prints and the kernel features it stands for
/// (a pattern with at most one `*`). `udp-fragmentation-offload` is left out, as ethtool
/// leaves it out on every kernel since 4.14, which has no such feature.
const LEGACY_FLAGS: &[(&str, &str)] = &[
    ("rx-checksumming", "rx-checksum"),
    ("tx-checksumming", "tx-checksum-*"),
    ("scatter-gather", "tx-scatter-gather*"),
    ("tcp-segmentation-offload", "tx-tcp*-segmentation"),
    ("generic-segmentation-offload", "tx-generic-segmentation"),
    ("generic-receive-offload", "rx-gro"),
    ("large-receive-offload", "rx-lro"),
    ("rx-vlan-offload", "rx-vlan-hw-parse"),
    ("tx-vlan-offload", "tx-vlan-hw-insert"),
    ("ntuple-filters", "rx-ntuple-filter"),
    ("receive-hashing", "rx-hashing"),
];

/// The lines of `ethtool -k` after its `Features for IFACE:` header, as (name, value) with
/// the name's indentation (a tab for a feature listed under its legacy flag) kept.
pub fn features_listing(features: &[NetFeature]) -> Vec<(String, String)> {
    let flag_of: Vec<Option<usize>> = features
        .iter()
        .map(|f| {
            (!f.name.is_empty())
                .then(|| {
                    LEGACY_FLAGS
                        .iter()
                        .position(|(_, pattern)| pattern_matches(&f.name, pattern))
                })
                .flatten()
        })
        .collect();
    let mut lines = Vec::new();
    for (flag, (long_name, _)) in LEGACY_FLAGS.iter().enumerate() {
        let matching: Vec<&NetFeature> = features
            .iter()
            .zip(&flag_of)
            .filter(|(_, f)| **f == Some(flag))
            .map(|(feature, _)| feature)
            .collect();
        // A flag that stands for exactly one feature is shown as that feature, under the
        // flag's name; otherwise the flag comes first, on if any of its features is.
        if matching.len() != 1 {
            let on = matching.iter().any(|f| f.active);
            lines.push((long_name.to_string(), on_off(on).to_owned()));
        }
        for feature in &matching {
            if matching.len() == 1 {
                lines.push((long_name.to_string(), state(feature)));
            } else {
                lines.push((format!("\t{}", feature.name), state(feature)));
            }
        }
    }
    for (feature, flag) in features.iter().zip(&flag_of) {
        if !feature.name.is_empty() && flag.is_none() {
            lines.push((feature.name.clone(), state(feature)));
        }
    }
    lines
}

fn on_off(on: bool) -> &'static str {
    if on { "on" } else { "off" }
}

/// `on`/`off` and why it cannot or did not change, as ethtool prints a feature.
fn state(feature: &NetFeature) -> String {
    let suffix = if !feature.available || feature.never_changed {
        " [fixed]"
    } else if feature.active != feature.requested {
        if feature.requested {
            " [requested on]"
        } else {
            " [requested off]"
        }
    } else {
        ""
    };
    format!("{}{suffix}", on_off(feature.active))
}

/// ethtool's `flag_pattern_match`: `pattern` has at most one `*`, which matches any text.
fn pattern_matches(name: &str, pattern: &str) -> bool {
    match pattern.split_once('*') {
        Some((head, tail)) => {
            name.len() >= head.len() + tail.len() && name.starts_with(head) && name.ends_with(tail)
        }
        None => name == pattern,
    }
}

/// The `SOF_TIMESTAMPING_*` flags ethtool's ioctl version names in `ethtool -T`, by bit.
pub const SOF_TIMESTAMPING: &[&str] = &[
    "TX_HARDWARE",
    "TX_SOFTWARE",
    "RX_HARDWARE",
    "RX_SOFTWARE",
    "SOFTWARE",
    "SYS_HARDWARE",
    "RAW_HARDWARE",
];

/// The `HWTSTAMP_FILTER_*` receive filters ethtool's ioctl version names, by bit.
pub const HWTSTAMP_FILTERS: &[&str] = &[
    "NONE",
    "ALL",
    "SOME",
    "PTP_V1_L4_EVENT",
    "PTP_V1_L4_SYNC",
    "PTP_V1_L4_DELAY_REQ",
    "PTP_V2_L4_EVENT",
    "PTP_V2_L4_SYNC",
    "PTP_V2_L4_DELAY_REQ",
    "PTP_V2_L2_EVENT",
    "PTP_V2_L2_SYNC",
    "PTP_V2_L2_DELAY_REQ",
    "PTP_V2_EVENT",
    "PTP_V2_SYNC",
    "PTP_V2_DELAY_REQ",
    "NTP_ALL",
];

/// The names of `table` whose bits are set in `mask`, in bit order.
pub fn names_of_bits(mask: u32, table: &[&'static str]) -> Vec<&'static str> {
    table
        .iter()
        .enumerate()
        .filter(|(bit, _)| mask & (1 << bit) != 0)
        .map(|(_, name)| *name)
        .collect()
}

/// The version `ethtool --version` prints, read from the program itself: its text holds
/// `ethtool version X.Y`. `None` when it cannot be found.
pub fn program_version(program: &[u8]) -> Option<(u32, u32)> {
    const MARKER: &[u8] = b"ethtool version ";
    let start = program.windows(MARKER.len()).position(|w| w == MARKER)? + MARKER.len();
    let text: String = program[start..]
        .iter()
        .take(16)
        .take_while(|b| b.is_ascii_digit() || **b == b'.')
        .map(|b| *b as char)
        .collect();
    let mut parts = text.split('.').map(|p| p.parse::<u32>().ok());
    Some((parts.next()??, parts.next().flatten().unwrap_or(0)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feature(name: &str, available: bool, active: bool) -> NetFeature {
        NetFeature {
            name: name.into(),
            available,
            requested: active,
            active,
            never_changed: false,
        }
    }

    #[test]
    fn legacy_flags_come_first_with_their_features() {
        let mut gro = feature("rx-gro", true, false);
        gro.requested = true;
        let features = [
            feature("tx-scatter-gather", true, true),
            feature("tx-checksum-ipv4", false, false),
            feature("tx-checksum-ip-generic", true, true),
            feature("highdma", true, true),
            gro,
            feature("", false, false),
        ];
        let lines = features_listing(&features);
        let text: Vec<String> = lines.iter().map(|(k, v)| format!("{k}: {v}")).collect();
        // Two checksum features: the flag, then each indented. One scatter-gather feature:
        // shown under the flag's name. No segmentation feature: the flag alone, off.
        assert_eq!(
            text[..6],
            [
                "rx-checksumming: off",
                "tx-checksumming: on",
                "\ttx-checksum-ipv4: off [fixed]",
                "\ttx-checksum-ip-generic: on",
                "scatter-gather: on",
                "tcp-segmentation-offload: off",
            ]
        );
        assert!(text.contains(&"generic-receive-offload: off [requested on]".to_owned()));
        assert_eq!(text.last().unwrap(), "highdma: on");
        assert!(text.iter().all(|line| !line.starts_with(": ")));
    }

    #[test]
    fn patterns_and_versions() {
        assert!(pattern_matches(
            "tx-tcp6-segmentation",
            "tx-tcp*-segmentation"
        ));
        assert!(pattern_matches(
            "tx-tcp-segmentation",
            "tx-tcp*-segmentation"
        ));
        assert!(!pattern_matches(
            "tx-tcp-segmentatio",
            "tx-tcp*-segmentation"
        ));
        assert_eq!(
            names_of_bits(0b1_1010, SOF_TIMESTAMPING),
            ["TX_SOFTWARE", "RX_SOFTWARE", "SOFTWARE"]
        );
        assert_eq!(
            program_version(b"\0usage\0ethtool version 6.1\n\0"),
            Some((6, 1))
        );
        assert_eq!(program_version(b"ethtool version 5.16.2"), Some((5, 16)));
        assert_eq!(program_version(b"no version here"), None);
    }
}
