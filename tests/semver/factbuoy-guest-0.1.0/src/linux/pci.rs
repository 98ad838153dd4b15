//! PCI devices as `lspci` names them: the IDs from sysfs (`/sys/bus/pci/devices/<address>`)
//! looked up in the PCI ID database (`pci.ids`), printed as lspci's one-line form
//! (`Mass storage controller: Red Hat, Inc. Virtio 1.0 block device (rev 01)`), ported from
//! pciutils' `show_terse` and `pci_lookup_name`.

use std::io;

use crate::hostfs::HostFs;

/// Where pciutils builds look for the database: Debian's and Ubuntu's, then Fedora's and
/// RHEL's (hwdata), then the upstream default.
pub const PCI_IDS_PATHS: &[&str] = &[
    "/usr/share/misc/pci.ids",
    "/usr/share/hwdata/pci.ids",
    "/usr/share/pci.ids",
];

/// What lspci's short form shows of a device, from its sysfs directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PciDevice {
    /// Base class and subclass (`class` without its programming interface byte).
    pub class: u16,
    pub vendor: u16,
    pub device: u16,
    pub revision: u8,
}

impl PciDevice {
    /// Reads `class`, `vendor`, `device` and `revision` below a device's sysfs directory.
    pub fn read(fs: &HostFs, dir: &str) -> io::Result<Self> {
        let hex = |name: &str| -> io::Result<u32> {
            let text = fs.read_trimmed(&format!("{dir}/{name}"))?;
            u32::from_str_radix(text.trim_start_matches("0x"), 16).map_err(|_| {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("{dir}/{name}: not a hexadecimal number: {text:?}"),
                )
            })
        };
        Ok(PciDevice {
            class: (hex("class")? >> 8) as u16,
            vendor: hex("vendor")? as u16,
            device: hex("device")? as u16,
            revision: hex("revision")? as u8,
        })
    }

    /// lspci's line for the device after its address: `CLASS: VENDOR DEVICE (rev RR)`.
    pub fn describe(&self, ids: &str) -> String {
        let names = Names::find(ids, self);
        let class = match (names.subclass, names.class) {
            (Some(subclass), _) => subclass.to_owned(),
            (None, Some(class)) => format!("{class} [{:04x}]", self.class),
            (None, None) => format!("Class {:04x}", self.class),
        };
        let device = match (names.vendor, names.device) {
            (Some(vendor), Some(device)) => format!("{vendor} {device}"),
            (Some(vendor), None) => format!("{vendor} Device {:04x}", self.device),
            (None, _) => format!("Device {:04x}:{:04x}", self.vendor, self.device),
        };
        let revision = if self.revision != 0 {
            format!(" (rev {:02x})", self.revision)
        } else {
            String::new()
        };
        format!("{class}: {device}{revision}")
    }
}

/// The names of one device's IDs in the database.
#[derive(Default)]
struct Names<'a> {
    vendor: Option<&'a str>,
    device: Option<&'a str>,
    class: Option<&'a str>,
    subclass: Option<&'a str>,
}

impl<'a> Names<'a> {
    /// One pass over `pci.ids`: vendors with their devices (one tab deeper), then classes
    /// (`C xx`) with their subclasses. Subsystem and programming-interface lines are skipped.
    fn find(ids: &'a str, wanted: &PciDevice) -> Self {
        let [base_class, subclass] = wanted.class.to_be_bytes();
        let mut names = Names::default();
        // Which block the lines belong to: a vendor's or a class's, and whether it is ours.
        enum Block {
            Vendor(bool),
            Class(bool),
            Other,
        }
        let mut block = Block::Other;
        for line in ids.lines() {
            // pciutils drops one trailing blank, then skips blank lines and comments.
            let line = line
                .strip_suffix([' ', '\t'])
                .unwrap_or(line)
                .trim_end_matches('\r');
            if line.trim_start().is_empty() || line.trim_start().starts_with('#') {
                continue;
            }
            let depth = line.len() - line.trim_start_matches('\t').len();
            let entry = &line[depth..];
            match (depth, &block) {
                (0, _) => {
                    block = if let Some(class) = entry.strip_prefix("C ") {
                        let (id, name) = split_id(class, 2);
                        let ours = id == Some(u16::from(base_class));
                        if ours {
                            names.class = name;
                        }
                        Block::Class(ours)
                    } else if entry.as_bytes().get(1) == Some(&b' ') {
                        Block::Other
                    } else {
                        let (id, name) = split_id(entry, 4);
                        let ours = id == Some(wanted.vendor);
                        if ours {
                            names.vendor = name;
                        }
                        Block::Vendor(ours)
                    };
                }
                (1, Block::Vendor(true)) => {
                    if let (Some(id), name) = split_id(entry, 4)
                        && id == wanted.device
                    {
                        names.device = name;
                    }
                }
                (1, Block::Class(true)) => {
                    if let (Some(id), name) = split_id(entry, 2)
                        && id == u16::from(subclass)
                    {
                        names.subclass = name;
                    }
                }
                _ => {}
            }
        }
        names
    }
}

/// `xxxx  Name` -> (the ID, the name); the ID has exactly `digits` hexadecimal digits.
fn split_id(entry: &str, digits: usize) -> (Option<u16>, Option<&str>) {
    let (Some(id), Some(rest)) = (entry.get(..digits), entry.get(digits..)) else {
        return (None, None);
    };
    if !rest.starts_with([' ', '\t']) {
        return (None, None);
    }
    let name = rest.trim_start_matches([' ', '\t']);
    (
        u16::from_str_radix(id, 16).ok(),
        (!name.is_empty()).then_some(name),
    )
}

/// The PCI address (`0000:00:02.0`) of the device a sysfs path lies below, as Ansible finds
/// it: the last path component that looks like one and is followed by more of the path.
pub fn address_in_path(path: &str) -> Option<&str> {
    let parts: Vec<&str> = path.split('/').collect();
    let last = parts.len().checked_sub(1)?;
    parts[..last]
        .iter()
        .rev()
        .find(|part| is_address(part))
        .copied()
}

/// `dddd:bb:ss.f` in lower-case hexadecimal, the slot below 0x20 and the function below 8, as
/// Ansible's pattern `[a-f0-9]{4}:[a-f0-9]{2}:[0|1][a-f0-9]\.[0-7]` accepts it.
fn is_address(text: &str) -> bool {
    let hex = |s: &str| {
        s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    };
    let b = text.as_bytes();
    text.len() == 12
        && hex(&text[0..4])
        && b[4] == b':'
        && hex(&text[5..7])
        && b[7] == b':'
        && matches!(b[8], b'0' | b'1' | b'|')
        && hex(&text[9..10])
        && b[10] == b'.'
        && (b'0'..=b'7').contains(&b[11])
}

#[cfg(test)]
mod tests {
    use super::*;

    const IDS: &str = "\
# comment
1af4  Red Hat, Inc.
\t1041  Virtio 1.0 network device
\t1042  Virtio 1.0 block device
\t\t1af4 1100  QEMU Virtual Machine
8086  Intel Corporation
C 01  Mass storage controller
\t00  SCSI storage controller
\t80  Mass storage controller
C 02  Network controller
\t00  Ethernet controller
C ff  Unassigned class
";

    fn device(class: u16, vendor: u16, device: u16, revision: u8) -> PciDevice {
        PciDevice {
            class,
            vendor,
            device,
            revision,
        }
    }

    #[test]
    fn lines_as_lspci_prints_them() {
        assert_eq!(
            device(0x0180, 0x1af4, 0x1042, 1).describe(IDS),
            "Mass storage controller: Red Hat, Inc. Virtio 1.0 block device (rev 01)"
        );
        assert_eq!(
            device(0x0200, 0x8086, 0x1234, 0).describe(IDS),
            "Ethernet controller: Intel Corporation Device 1234"
        );
        assert_eq!(
            device(0xffff, 0xabcd, 0x0001, 0x10).describe(IDS),
            "Unassigned class [ffff]: Device abcd:0001 (rev 10)"
        );
        assert_eq!(
            device(0x0c03, 0x1af4, 0x1100, 0).describe(IDS),
            "Class 0c03: Red Hat, Inc. Device 1100"
        );
    }

    #[test]
    fn addresses_in_sysfs_paths() {
        assert_eq!(
            address_in_path("/sys/devices/pci0000:00/0000:00:02.0/virtio1/block/vda"),
            Some("0000:00:02.0")
        );
        assert_eq!(
            address_in_path("/sys/devices/pci0000:00/0000:00:1c.0/0000:02:00.0/nvme/nvme0/nvme0n1"),
            Some("0000:02:00.0")
        );
        assert_eq!(address_in_path("/sys/devices/virtual/block/loop0"), None);
        // Ansible's slot pattern stops at 0x1f.
        assert_eq!(
            address_in_path("/sys/devices/pci0000:00/0000:00:2a.0/x"),
            None
        );
    }
}
