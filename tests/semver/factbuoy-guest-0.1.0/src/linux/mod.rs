//! Parsers and readers for the Linux files facts come from (`/proc`, `/sys`, `/etc`), shared by
//! the bundled `setup` and `host-facts` plugins and usable by any plugin.
//!
//! Parsers take the file's text and are pure, so they are tested against real files copied from
//! hosts; readers take a [`HostFs`](crate::hostfs::HostFs) and say which paths they need, so a
//! plugin knows which `read:` capabilities to ask for.

pub mod block;
pub mod cpu;
pub mod ethtool;
pub mod lvm;
pub mod meminfo;
pub mod mounts;
pub mod net;
pub mod netns;
pub mod os_release;
pub mod pci;
pub mod resolv_conf;
pub mod timezone;
pub mod virt;
