//! Block devices (`/sys/block`) and mounts (the host root's `mountinfo`) with their usage.

use factbuoy_guest::host_info;
use factbuoy_guest::hostfs::basename;
use factbuoy_guest::linux::block;
use factbuoy_guest::linux::mounts::{self, parse_mountinfo};

use crate::model::{BlockDevice, Mount, Partition, Usage};
use crate::read::Reader;

pub fn block_devices(r: &Reader) -> Vec<BlockDevice> {
    let mut names = r.list("/sys/block");
    names.sort();
    let class_block = r.list(block::CLASS_BLOCK);
    names
        .into_iter()
        .map(|name| block_device(r, name, &class_block))
        .collect()
}

fn block_device(r: &Reader, name: String, class_block: &[String]) -> BlockDevice {
    // /sys/block/<name> is a symlink into /sys/devices: resolve it once, not for every read.
    let link = format!("/sys/block/{name}");
    let dir = r.fs.canonicalize(&link).unwrap_or(link);
    let attr = |file: &str| r.optional(&format!("{dir}/{file}"));
    let number = |file: &str| attr(file).and_then(|v| v.parse::<u64>().ok());
    let flag = |file: &str| attr(file).map(|v| v == "1");
    let mut partitions: Vec<Partition> = block::partitions(&r.fs, class_block, &name)
        .into_iter()
        .map(|part| {
            let pdir = format!("{dir}/{part}");
            let pnumber = |file: &str| {
                r.optional(&format!("{pdir}/{file}"))
                    .and_then(|v| v.parse::<u64>().ok())
            };
            Partition {
                device_number: r.optional(&format!("{pdir}/dev")),
                size_bytes: pnumber("size").map(|sectors| sectors * 512),
                start_sector: pnumber("start"),
                read_only: r.optional(&format!("{pdir}/ro")).map(|v| v == "1"),
                holders: r.list(&format!("{pdir}/holders")),
                name: part,
            }
        })
        .collect();
    partitions.sort_by(|a, b| a.name.cmp(&b.name));
    BlockDevice {
        device_number: attr("dev"),
        // The kernel counts `size` in 512-byte sectors whatever the device's block size.
        size_bytes: number("size").map(|sectors| sectors * 512),
        logical_block_size_bytes: number("queue/logical_block_size"),
        physical_block_size_bytes: number("queue/physical_block_size"),
        rotational: flag("queue/rotational"),
        removable: flag("removable"),
        read_only: flag("ro"),
        vendor: attr("device/vendor"),
        model: attr("device/model"),
        serial: attr("device/serial").or_else(|| attr("serial")),
        wwn: attr("device/wwid").or_else(|| attr("wwid")),
        scheduler: attr("queue/scheduler").and_then(|s| {
            let start = s.find('[')?;
            let end = s[start..].find(']')? + start;
            Some(s[start + 1..end].to_owned())
        }),
        dm_name: attr("dm/name"),
        holders: r.list(&format!("{dir}/holders")),
        partitions,
        name,
    }
}

pub fn mounts(r: &Reader) -> Vec<Mount> {
    let table = format!("{}/mountinfo", mounts::table_dir(&r.fs));
    let Some(text) = r.text(&table) else {
        r.warn(format!("no mount table: {table} could not be read"));
        return Vec::new();
    };
    let entries = parse_mountinfo(&text);
    let points: Vec<String> = entries.iter().map(|m| m.mount_point.clone()).collect();
    let usage = host_info::filesystem_usage(&points);
    entries
        .into_iter()
        .zip(usage)
        .map(|(m, usage)| {
            let options: Vec<String> = m.mount_options.split(',').map(str::to_owned).collect();
            Mount {
                filesystem_uuid: filesystem_uuid(r, m.major, m.minor, &m.source),
                read_only: options.iter().any(|o| o == "ro"),
                options,
                device_number: format!("{}:{}", m.major, m.minor),
                usage: usage.map(|u| {
                    let unit = u.fragment_size_bytes;
                    let total = unit * u.blocks_total;
                    let free = unit * u.blocks_free;
                    Usage {
                        total_bytes: total,
                        free_bytes: free,
                        available_bytes: unit * u.blocks_available,
                        used_bytes: total.saturating_sub(free),
                        inodes_total: u.inodes_total,
                        inodes_free: u.inodes_free,
                        inodes_used: u.inodes_total.saturating_sub(u.inodes_free),
                    }
                }),
                source: m.source,
                mount_point: m.mount_point,
                filesystem_type: m.fs_type,
                root: m.root,
            }
        })
        .collect()
}

/// The UUID udev recorded for the device, else the `/dev/disk/by-uuid` link to it.
fn filesystem_uuid(r: &Reader, major: u32, minor: u32, source: &str) -> Option<String> {
    if major == 0 {
        return None; // not a block device: tmpfs, proc, overlay, ...
    }
    let from_udev =
        r.fs.read_to_string(&format!("/run/udev/data/b{major}:{minor}"))
            .ok()
            .and_then(|data| {
                data.lines()
                    .find_map(|l| l.strip_prefix("E:ID_FS_UUID="))
                    .map(str::to_owned)
            });
    from_udev.or_else(|| {
        let device = basename(source);
        r.fs.read_dir("/dev/disk/by-uuid")
            .unwrap_or_default()
            .into_iter()
            .find(|uuid| {
                r.fs.read_link(&format!("/dev/disk/by-uuid/{uuid}"))
                    .is_ok_and(|target| basename(&target) == device)
            })
    })
}
