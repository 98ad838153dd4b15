//! `host-info.ethtool`: an interface's features and time stamping, asked of the kernel with the
//! `SIOCETHTOOL` ioctls that `ethtool -k` and `ethtool -T` use, since a plugin cannot make
//! ioctls. The answer is raw (names and bits); the guest formats it as ethtool prints it.
//!
//! No kept crate fits: `ethtool` (rust-netlink) is async only, does not read the feature string
//! set (so features that are off and unchangeable are missing) and drops bit 0
//! (`tx-scatter-gather`) when it parses bit sets. These four read-only requests need no
//! privilege and are a few fixed C structures, so they are wrapped here with nix's ioctl macro.
//!
//! The ioctls answer for the network namespace of the factbuoy process: the node's interfaces
//! in a pod only with `hostNetwork`.

use std::os::fd::{AsRawFd, OwnedFd};

use nix::errno::Errno;
use nix::libc;
use nix::sys::socket::{AddressFamily, SockFlag, SockType, socket};

use crate::bindings::factbuoy::plugin::host_info::{
    EthtoolError, EthtoolInfo, NetFeature, TimestampingInfo,
};

// From <linux/ethtool.h>.
const ETHTOOL_GSTRINGS: u32 = 0x1b;
const ETHTOOL_GSSET_INFO: u32 = 0x37;
const ETHTOOL_GFEATURES: u32 = 0x3a;
const ETHTOOL_GET_TS_INFO: u32 = 0x41;
const ETH_SS_FEATURES: u32 = 4;
const ETH_GSTRING_LEN: usize = 32;
/// More feature names than any kernel has (about 70 today); a larger count is refused rather
/// than allocated.
const MAX_FEATURES: u32 = 4096;

nix::ioctl_readwrite_bad!(siocethtool, libc::SIOCETHTOOL, libc::ifreq);

/// What the kernel reads and writes through `ifru_data`: the command structure itself, so that
/// a `Vec` (a pointer to it) cannot be passed by mistake.
trait CommandData {}
impl CommandData for [u32] {}
impl CommandData for SsetInfo {}
impl CommandData for TsInfo {}

/// `struct ethtool_sset_info` asking for one string set.
#[repr(C)]
struct SsetInfo {
    cmd: u32,
    reserved: u32,
    sset_mask: u64,
    counts: [u32; 1],
}

/// `struct ethtool_ts_info`.
#[repr(C)]
#[derive(Default)]
struct TsInfo {
    cmd: u32,
    so_timestamping: u32,
    phc_index: i32,
    tx_types: u32,
    tx_reserved: [u32; 3],
    rx_filters: u32,
    rx_reserved: [u32; 3],
}

/// Both answers for the interface `name`.
pub fn ethtool_info(name: &str) -> EthtoolInfo {
    match Request::open(name) {
        Ok(request) => EthtoolInfo {
            features: request.features(),
            timestamping: request.timestamping(),
        },
        Err(e) => EthtoolInfo {
            features: Err(e.clone()),
            timestamping: Err(e),
        },
    }
}

/// A socket to carry the ioctls and the interface they are about.
struct Request<'a> {
    socket: OwnedFd,
    name: &'a str,
}

impl<'a> Request<'a> {
    fn open(name: &'a str) -> Result<Self, EthtoolError> {
        // Longer names do not fit `ifr_name` and cannot exist.
        if name.is_empty() || name.len() >= libc::IFNAMSIZ || name.contains('\0') {
            return Err(EthtoolError::NoSuchInterface(format!(
                "{name:?} is not an interface name"
            )));
        }
        // ethtool's own choice: any datagram socket carries SIOCETHTOOL.
        let socket = socket(
            AddressFamily::Inet,
            SockType::Datagram,
            SockFlag::SOCK_CLOEXEC,
            None,
        )
        .map_err(|e| EthtoolError::Io(format!("opening a socket for ethtool requests: {e}")))?;
        Ok(Request { socket, name })
    }

    /// Sends one ethtool command; `data` is the command's structure, starting with its `cmd`.
    fn call<T: CommandData + ?Sized>(&self, data: &mut T, what: &str) -> Result<(), EthtoolError> {
        // SAFETY: an all-zero ifreq is valid; the name fits (checked in `open`) and stays
        // NUL-terminated; `ifru_data` points to `data`, which outlives the call and is as large
        // as the command's structure, whose size the kernel reads from the command's own fields.
        let result = unsafe {
            let mut request: libc::ifreq = std::mem::zeroed();
            for (slot, byte) in request.ifr_name.iter_mut().zip(self.name.bytes()) {
                *slot = byte as libc::c_char;
            }
            request.ifr_ifru.ifru_data = (data as *mut T).cast();
            siocethtool(self.socket.as_raw_fd(), &mut request)
        };
        result.map(drop).map_err(|errno| self.error(errno, what))
    }

    fn error(&self, errno: Errno, what: &str) -> EthtoolError {
        let message = format!("{what} of {}: {}", self.name, errno.desc());
        match errno {
            Errno::ENODEV => EthtoolError::NoSuchInterface(message),
            Errno::EOPNOTSUPP => EthtoolError::NotSupported(message),
            _ => EthtoolError::Io(message),
        }
    }

    /// `ethtool -k`: the feature names, then their four bit masks.
    fn features(&self) -> Result<Vec<NetFeature>, EthtoolError> {
        let count = self.feature_count()?;
        let names = self.feature_names(count)?;
        let blocks = count.div_ceil(32) as usize;
        // struct ethtool_gfeatures: cmd, size, then `size` blocks of
        // { available, requested, active, never_changed }.
        let mut data = vec![0u32; 2 + 4 * blocks];
        data[0] = ETHTOOL_GFEATURES;
        data[1] = blocks as u32;
        self.call(data.as_mut_slice(), "reading the features")?;
        let bit = |block_field: usize, index: usize| {
            data[2 + 4 * (index / 32) + block_field] & (1 << (index % 32)) != 0
        };
        Ok(names
            .into_iter()
            .enumerate()
            .map(|(index, name)| NetFeature {
                name,
                available: bit(0, index),
                requested: bit(1, index),
                active: bit(2, index),
                never_changed: bit(3, index),
            })
            .collect())
    }

    /// How many feature names the kernel has (`ETHTOOL_GSSET_INFO` for `ETH_SS_FEATURES`).
    fn feature_count(&self) -> Result<u32, EthtoolError> {
        let mut data = SsetInfo {
            cmd: ETHTOOL_GSSET_INFO,
            reserved: 0,
            sset_mask: 1 << ETH_SS_FEATURES,
            counts: [0],
        };
        self.call(&mut data, "counting the feature names")?;
        // The kernel clears the set's bit in the mask when it has no such set.
        if data.sset_mask & (1 << ETH_SS_FEATURES) == 0 {
            return Err(EthtoolError::NotSupported(format!(
                "the kernel names no features of {}",
                self.name
            )));
        }
        match data.counts[0] {
            count if count <= MAX_FEATURES => Ok(count),
            count => Err(EthtoolError::Io(format!(
                "the kernel claims {count} feature names for {}",
                self.name
            ))),
        }
    }

    /// The feature names (`ETHTOOL_GSTRINGS`), 32 bytes each, NUL-padded.
    fn feature_names(&self, count: u32) -> Result<Vec<String>, EthtoolError> {
        let words = ETH_GSTRING_LEN / 4;
        // struct ethtool_gstrings: cmd, string_set, len, then the strings.
        let mut data = vec![0u32; 3 + words * count as usize];
        data[..3].copy_from_slice(&[ETHTOOL_GSTRINGS, ETH_SS_FEATURES, count]);
        self.call(data.as_mut_slice(), "reading the feature names")?;
        let bytes: Vec<u8> = data[3..].iter().flat_map(|w| w.to_ne_bytes()).collect();
        Ok(bytes
            .chunks(ETH_GSTRING_LEN)
            .map(|name| {
                let end = name.iter().position(|b| *b == 0).unwrap_or(name.len());
                String::from_utf8_lossy(&name[..end]).into_owned()
            })
            .collect())
    }

    /// `ethtool -T`: time stamping capabilities (`ETHTOOL_GET_TS_INFO`).
    fn timestamping(&self) -> Result<TimestampingInfo, EthtoolError> {
        let mut data = TsInfo {
            cmd: ETHTOOL_GET_TS_INFO,
            ..TsInfo::default()
        };
        self.call(&mut data, "reading the time stamping capabilities")?;
        Ok(TimestampingInfo {
            so_timestamping: data.so_timestamping,
            // -1: no PTP hardware clock.
            phc_index: u32::try_from(data.phc_index).ok(),
            tx_types: data.tx_types,
            rx_filters: data.rx_filters,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_has_named_features_and_software_timestamps() {
        let info = ethtool_info("lo");
        let features = info.features.expect("features of lo");
        // `lo` loops packets back without a device: checksums need not be computed.
        let checksum = features
            .iter()
            .find(|f| f.name == "tx-checksum-ip-generic")
            .expect("tx-checksum-ip-generic among lo's features");
        assert!(checksum.active);
        assert!(features.iter().all(|f| f.name.len() < ETH_GSTRING_LEN));
        let timestamping = info.timestamping.expect("time stamping of lo");
        // SOF_TIMESTAMPING_RX_SOFTWARE: every interface gets software receive time stamps.
        assert_ne!(timestamping.so_timestamping & (1 << 3), 0);
        assert_eq!(timestamping.phc_index, None);
    }

    #[test]
    fn a_missing_interface_is_named_as_such() {
        let info = ethtool_info("nosuchif0");
        assert!(matches!(
            info.features,
            Err(EthtoolError::NoSuchInterface(_))
        ));
        assert!(matches!(
            ethtool_info("a/name/that/is/far/too/long").timestamping,
            Err(EthtoolError::NoSuchInterface(_))
        ));
    }
}
