//! Block devices in sysfs.

use crate::hostfs::HostFs;

/// Where every block device and partition is listed once.
pub const CLASS_BLOCK: &str = "/sys/class/block";

/// The partitions of `disk` (`sda1`, `nvme0n1p2`), given the entries of `/sys/class/block`
/// (listed once by the caller): names made of the disk's name, an optional `p` and a number,
/// whose sysfs link places them below the disk. Listing each disk's own directory instead
/// costs one call out of the sandbox per attribute file in it.
pub fn partitions(fs: &HostFs, class_block: &[String], disk: &str) -> Vec<String> {
    class_block
        .iter()
        .filter(|name| {
            name.strip_prefix(disk).is_some_and(|rest| {
                let digits = rest.strip_prefix('p').unwrap_or(rest);
                !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
            })
        })
        .filter(|name| {
            fs.read_link(&format!("{CLASS_BLOCK}/{name}"))
                .is_ok_and(|target| {
                    let mut parts = target.rsplit('/');
                    parts.next() == Some(name.as_str()) && parts.next() == Some(disk)
                })
        })
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    #[test]
    fn partitions_are_the_disks_children() {
        let dir = tempfile::tempdir().unwrap();
        let class = dir.path().join("sys/class/block");
        std::fs::create_dir_all(&class).unwrap();
        for (name, target) in [
            ("loop1", "../../devices/virtual/block/loop1"),
            ("loop10", "../../devices/virtual/block/loop10"),
            ("sda", "../../devices/pci0000:00/ata1/block/sda"),
            ("sda1", "../../devices/pci0000:00/ata1/block/sda/sda1"),
            ("sda2", "../../devices/pci0000:00/ata1/block/sda/sda2"),
            (
                "nvme0n1p1",
                "../../devices/pci/nvme/nvme0/nvme0n1/nvme0n1p1",
            ),
        ] {
            symlink(target, class.join(name)).unwrap();
        }
        let fs = HostFs::with_root(dir.path());
        let names = fs.read_dir(CLASS_BLOCK).unwrap();
        let mut sda = partitions(&fs, &names, "sda");
        sda.sort();
        assert_eq!(sda, ["sda1", "sda2"]);
        assert!(partitions(&fs, &names, "loop1").is_empty());
        assert_eq!(partitions(&fs, &names, "nvme0n1"), ["nvme0n1p1"]);
    }
}
