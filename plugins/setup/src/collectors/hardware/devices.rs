//! Block devices from `/sys/block` and their links in `/dev/disk/by-*` (`devices`,
//! `device_links`); the controller of each, as `lspci` names it, from sysfs and `pci.ids`.

use std::cell::OnceCell;
use std::collections::{BTreeMap, BTreeSet};

use factbuoy_guest::hostfs::basename;
use factbuoy_guest::linux::block;
use factbuoy_guest::linux::pci::{self, PciDevice};
use serde_json::{Map, Value, json};

use crate::ctx::Ctx;

/// Device name -> link names, per kind of link.
type Links = BTreeMap<&'static str, BTreeMap<String, Vec<String>>>;

pub fn collect(ctx: &mut Ctx) {
    let Some(block_devices) = ctx.list("/sys/block") else {
        ctx.set("devices", Map::new());
        return;
    };
    let mut wwns: BTreeMap<String, String> = BTreeMap::new();
    for link in ctx.fs.read_dir("/dev/disk/by-id").unwrap_or_default() {
        if let Some(wwn) = link.strip_prefix("wwn-")
            && let Ok(target) = ctx.fs.read_link(&format!("/dev/disk/by-id/{link}"))
        {
            wwns.insert(basename(&target).to_owned(), wwn.to_owned());
        }
    }
    let links = all_device_links(ctx);
    let class_block = ctx.fs.read_dir(block::CLASS_BLOCK).unwrap_or_default();
    let links_json: Map<String, Value> = links
        .iter()
        .map(|(kind, map)| (kind.to_string(), json!(map)))
        .collect();
    ctx.set("device_links", links_json);

    // Read when a disk on a PCI device needs it: the database is over a megabyte.
    let pci_ids = OnceCell::new();
    let mut devices = Map::new();
    for block in block_devices {
        let sysdir = match ctx.fs.read_link(&format!("/sys/block/{block}")) {
            Ok(target) => normalize(&format!("/sys/block/{target}")),
            // Not a link: old sysfs layout; a device is physical if it has a `device` entry.
            Err(_) => format!("/sys/block/{block}"),
        };
        let is_link = ctx.fs.is_symlink(&format!("/sys/block/{block}"));
        let mut virtual_ = 1;
        if !is_link {
            let entries = ctx.fs.read_dir(&sysdir).unwrap_or_default();
            if entries.iter().any(|e| e.contains("device")) {
                virtual_ = 0;
            }
        }
        let diskname = basename(&sysdir).to_owned();
        let mut d = Map::new();
        d.insert("virtual".into(), virtual_.into());
        d.insert("links".into(), links_of(&links, &block));
        for key in ["vendor", "model", "sas_address", "sas_device_handle"] {
            d.insert(key.into(), opt(ctx.read(&format!("{sysdir}/device/{key}"))));
        }
        // Ansible prefers `sg_inq` for the serial when installed; the sysfs file otherwise.
        if let Some(serial) = ctx
            .read(&format!("/sys/block/{block}/device/serial"))
            .filter(|s| !s.is_empty())
        {
            d.insert("serial".into(), serial.into());
        }
        d.insert(
            "removable".into(),
            opt(ctx.read(&format!("{sysdir}/removable"))),
        );
        let discard = if ctx
            .read(&format!("{sysdir}/queue/discard_max_hw_bytes"))
            .as_deref()
            == Some("0")
        {
            Value::from("0")
        } else {
            opt(ctx.read(&format!("{sysdir}/queue/discard_granularity")))
        };
        d.insert("support_discard".into(), discard);
        if let Some(wwn) = wwns.get(&diskname) {
            d.insert("wwn".into(), wwn.clone().into());
        }
        d.insert(
            "partitions".into(),
            partitions(ctx, &sysdir, &diskname, &class_block, &links).into(),
        );
        d.insert(
            "rotational".into(),
            opt(ctx.read(&format!("{sysdir}/queue/rotational"))),
        );
        let scheduler = ctx
            .read(&format!("{sysdir}/queue/scheduler"))
            .and_then(|s| {
                let start = s.find('[')?;
                let end = s.rfind(']')?;
                (end > start).then(|| s[start + 1..end].to_owned())
            })
            .unwrap_or_default();
        d.insert("scheduler_mode".into(), scheduler.into());
        let sectorsize = sector_size(ctx, &sysdir);
        let size_512 = ctx
            .read(&format!("{sysdir}/size"))
            .and_then(|s| s.parse::<u64>().ok())
            .unwrap_or(0);
        let sectors = size_512 * 512 / sectorsize.parse::<u64>().unwrap_or(512).max(1);
        d.insert("sectorsize".into(), sectorsize.clone().into());
        d.insert("sectors".into(), sectors.into());
        let bytes = sectors as f64 * sectorsize.parse::<f64>().unwrap_or(512.0);
        d.insert("size".into(), bytes_to_human(bytes).into());
        d.insert("host".into(), host(ctx, &pci_ids, &sysdir).into());
        d.insert("holders".into(), holders(ctx, &sysdir).into());
        devices.insert(diskname, d.into());
    }
    ctx.set("devices", devices);
}

/// The PCI ID database when `lspci` is installed (Ansible fills `host` from `lspci -D`, and
/// only then); empty when there is none, as lspci then prints numbers only.
fn pci_ids(ctx: &Ctx) -> Option<String> {
    ctx.find_bin("lspci")?;
    let ids = pci::PCI_IDS_PATHS
        .iter()
        .find(|path| ctx.fs.is_file(path))
        .and_then(|path| ctx.read_raw(path));
    Some(ids.unwrap_or_default())
}

/// What `lspci -D` prints for the PCI device the block device hangs off, after its address.
fn host(ctx: &Ctx, pci_ids: &OnceCell<Option<String>>, sysdir: &str) -> String {
    let Some(address) = pci::address_in_path(sysdir) else {
        return String::new();
    };
    let Some(ids) = pci_ids.get_or_init(|| self::pci_ids(ctx)) else {
        return String::new();
    };
    match PciDevice::read(&ctx.fs, &format!("/sys/bus/pci/devices/{address}")) {
        Ok(device) => device.describe(ids),
        Err(e) => {
            ctx.warn(format!("devices: {e}"));
            String::new()
        }
    }
}

fn opt(value: Option<String>) -> Value {
    value.map(Value::from).unwrap_or(Value::Null)
}

/// The logical block size, as Ansible reads it (text, with 512 as the last resort).
fn sector_size(ctx: &Ctx, sysdir: &str) -> String {
    ctx.read(&format!("{sysdir}/queue/logical_block_size"))
        .filter(|s| !s.is_empty())
        .or_else(|| {
            ctx.read(&format!("{sysdir}/queue/hw_sector_size"))
                .filter(|s| !s.is_empty())
        })
        .unwrap_or_else(|| "512".into())
}

/// Ansible lists the disk's directory for entries named `<disk>[p]<n>`; the same partitions
/// are found from `/sys/class/block`, listed once for all disks (see `linux::block`).
fn partitions(
    ctx: &Ctx,
    sysdir: &str,
    diskname: &str,
    class_block: &[String],
    links: &Links,
) -> Map<String, Value> {
    let mut parts = Map::new();
    for partname in block::partitions(&ctx.fs, class_block, diskname) {
        let part_sysdir = format!("{sysdir}/{partname}");
        let sectorsize = sector_size(ctx, &part_sysdir);
        let size_512 = ctx
            .read(&format!("{part_sysdir}/size"))
            .and_then(|s| s.parse::<u64>().ok())
            .unwrap_or(0);
        let sectors = size_512 * 512 / sectorsize.parse::<u64>().unwrap_or(512).max(1);
        let start = ctx
            .read(&format!("{part_sysdir}/start"))
            .map(Value::from)
            .unwrap_or(0.into());
        let mut part = Map::new();
        part.insert("links".into(), links_of(links, &partname));
        part.insert("start".into(), start);
        part.insert("sectorsize".into(), sectorsize.clone().into());
        part.insert("sectors".into(), sectors.into());
        let bytes = sectors as f64 * sectorsize.parse::<f64>().unwrap_or(512.0);
        part.insert("size".into(), bytes_to_human(bytes).into());
        part.insert("uuid".into(), opt(partition_uuid(ctx, &partname)));
        part.insert("holders".into(), holders(ctx, &part_sysdir).into());
        parts.insert(partname, part.into());
    }
    parts
}

/// The file system UUID of a partition: the `/dev/disk/by-uuid` link that points to it.
fn partition_uuid(ctx: &Ctx, partname: &str) -> Option<String> {
    ctx.fs
        .read_dir("/dev/disk/by-uuid")
        .ok()?
        .into_iter()
        .find(|uuid| {
            ctx.fs
                .read_link(&format!("/dev/disk/by-uuid/{uuid}"))
                .is_ok_and(|target| {
                    normalize(&format!("/dev/disk/by-uuid/../{target}"))
                        == format!("/dev/{partname}")
                })
        })
}

/// Device-mapper devices built on this one, by their dm name.
fn holders(ctx: &Ctx, sysdir: &str) -> Vec<String> {
    ctx.fs
        .read_dir(&format!("{sysdir}/holders"))
        .unwrap_or_default()
        .into_iter()
        .filter(|folder| folder.starts_with("dm-"))
        .map(|folder| {
            ctx.read(&format!("{sysdir}/holders/{folder}/dm/name"))
                .filter(|n| !n.is_empty())
                .unwrap_or(folder)
        })
        .collect()
}

fn all_device_links(ctx: &Ctx) -> Links {
    let mut links = Links::new();
    for (kind, dir) in [
        ("ids", "/dev/disk/by-id"),
        ("uuids", "/dev/disk/by-uuid"),
        ("labels", "/dev/disk/by-label"),
    ] {
        let mut by_target: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for entry in ctx.fs.read_dir(dir).unwrap_or_default() {
            if let Ok(target) = ctx.fs.read_link(&format!("{dir}/{entry}")) {
                by_target
                    .entry(basename(&target).to_owned())
                    .or_default()
                    .insert(entry);
            }
        }
        links.insert(
            kind,
            by_target
                .into_iter()
                .map(|(k, v)| (k, v.into_iter().collect()))
                .collect(),
        );
    }
    // masters: for each device, the block devices built on it (`/sys/block/*/slaves/*`).
    let mut masters: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for device in ctx.fs.read_dir("/sys/block").unwrap_or_default() {
        for slave in ctx
            .fs
            .read_dir(&format!("/sys/block/{device}/slaves"))
            .unwrap_or_default()
        {
            masters.entry(slave).or_default().insert(device.clone());
        }
    }
    links.insert(
        "masters",
        masters
            .into_iter()
            .map(|(k, v)| (k, v.into_iter().collect()))
            .collect(),
    );
    links
}

fn links_of(links: &Links, name: &str) -> Value {
    let map: Map<String, Value> = links
        .iter()
        .map(|(kind, by_device)| {
            (
                kind.to_string(),
                json!(by_device.get(name).cloned().unwrap_or_default()),
            )
        })
        .collect();
    map.into()
}

/// Collapses `.` and `..` in an absolute path (no file system access).
fn normalize(path: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            p => parts.push(p),
        }
    }
    format!("/{}", parts.join("/"))
}

/// Ansible's `bytes_to_human`: the largest unit not above the size, two decimals.
pub fn bytes_to_human(size: f64) -> String {
    const UNITS: &[(&str, f64)] = &[
        ("YB", 1208925819614629174706176.0),
        ("ZB", 1180591620717411303424.0),
        ("EB", 1152921504606846976.0),
        ("PB", 1125899906842624.0),
        ("TB", 1099511627776.0),
        ("GB", 1073741824.0),
        ("MB", 1048576.0),
        ("KB", 1024.0),
    ];
    for (suffix, limit) in UNITS {
        if size >= *limit {
            return format!("{:.2} {suffix}", size / limit);
        }
    }
    format!("{size:.2} Bytes")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_sizes_and_paths() {
        assert_eq!(bytes_to_human(274877906944.0), "256.00 GB");
        assert_eq!(bytes_to_human(0.0), "0.00 Bytes");
        assert_eq!(bytes_to_human(1536.0), "1.50 KB");
        assert_eq!(normalize("/sys/block/../devices/./vda"), "/sys/devices/vda");
    }
}
