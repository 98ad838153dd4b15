//! The mount table: `/proc/self/mounts` (fstab format) and `/proc/self/mountinfo`. The parsers
//! are `factbuoy-linux`'s, shared with the host's `host-info`.

pub use factbuoy_linux::mounts::{
    MountEntry, MountInfo, parse_mountinfo, parse_mounts, unescape_octal,
};

use crate::hostfs::HostFs;

/// The `/proc` directory whose mount table describes the host root, by the rule of
/// [`factbuoy_linux::mounts::table_dir`] that the host's `host-info` follows too. `host-info`'s `filesystem-usage`
/// takes mount points of that table.
pub fn table_dir(fs: &HostFs) -> &'static str {
    use factbuoy_linux::mounts::{INIT_NAMESPACE, OWN_NAMESPACE};
    factbuoy_linux::mounts::table_dir(
        fs.read_link(OWN_NAMESPACE).ok().as_deref(),
        fs.read_link(INIT_NAMESPACE).ok().as_deref(),
        fs.open("/proc/1/mounts").is_ok(),
    )
}
