//! `mounts`: the mount table with sizes and file system UUIDs.

use factbuoy_guest::host_info;
use factbuoy_guest::linux::mounts;
use serde_json::{Map, Value};

use crate::ctx::Ctx;

pub fn collect(ctx: &mut Ctx) {
    // Ansible reads /etc/mtab (a link to /proc/self/mounts), else /proc/mounts. When factbuoy
    // is in another mount namespace than the host root's (a pod), the root's own table.
    let proc_dir = mounts::table_dir(&ctx.fs);
    let table = if proc_dir != "/proc/self" {
        format!("{proc_dir}/mounts")
    } else if ctx.exists("/etc/mtab") {
        "/etc/mtab".to_owned()
    } else {
        "/proc/mounts".to_owned()
    };
    let Some(text) = ctx.read_raw(&table) else {
        return;
    };
    let entries: Vec<mounts::MountEntry> = mounts::parse_mounts(&text)
        .into_iter()
        .filter(|m| {
            (m.device.starts_with('/') || m.device.starts_with('\\') || m.device.contains(":/"))
                && m.fs_type != "none"
        })
        .collect();
    let bind_mounts = bind_mounts(ctx, proc_dir);
    let usage = host_info::filesystem_usage(
        &entries
            .iter()
            .map(|m| m.mount_point.clone())
            .collect::<Vec<_>>(),
    );
    let mut facts = Vec::new();
    for (entry, usage) in entries.iter().zip(usage) {
        let mut mount = Map::new();
        let mut options = entry.options.clone();
        if bind_mounts.contains(&entry.mount_point)
            && !(options.contains("bind") && options.contains('"'))
        {
            options.push_str(",bind");
        }
        mount.insert("mount".into(), entry.mount_point.clone().into());
        mount.insert("device".into(), entry.device.clone().into());
        mount.insert("fstype".into(), entry.fs_type.clone().into());
        mount.insert("options".into(), options.into());
        mount.insert("dump".into(), entry.dump.into());
        mount.insert("passno".into(), entry.pass.into());
        match usage {
            Some(u) => {
                mount.insert(
                    "size_total".into(),
                    (u.fragment_size_bytes * u.blocks_total).into(),
                );
                mount.insert(
                    "size_available".into(),
                    (u.fragment_size_bytes * u.blocks_available).into(),
                );
                mount.insert("block_size".into(), u.block_size_bytes.into());
                mount.insert("block_total".into(), u.blocks_total.into());
                mount.insert("block_available".into(), u.blocks_available.into());
                mount.insert(
                    "block_used".into(),
                    (u.blocks_total as i64 - u.blocks_available as i64).into(),
                );
                mount.insert("inode_total".into(), u.inodes_total.into());
                mount.insert("inode_available".into(), u.inodes_available.into());
                mount.insert(
                    "inode_used".into(),
                    (u.inodes_total as i64 - u.inodes_available as i64).into(),
                );
            }
            None => ctx.warn(format!(
                "mounts: no size for {} (statvfs failed or timed out)",
                entry.mount_point
            )),
        }
        mount.insert("uuid".into(), uuid(ctx, &entry.device).into());
        facts.push(Value::Object(mount));
    }
    ctx.set("mounts", facts);
}

/// Mount points `findmnt` shows as bind mounts (`/dev/sda1[/subdir]`): those whose root in
/// the file system is not `/`. Ansible only looks when findmnt is installed.
fn bind_mounts(ctx: &Ctx, proc_dir: &str) -> Vec<String> {
    if ctx.find_bin("findmnt").is_none() {
        return Vec::new();
    }
    let text = ctx
        .read_raw(&format!("{proc_dir}/mountinfo"))
        .unwrap_or_default();
    mounts::parse_mountinfo(&text)
        .into_iter()
        .filter(|m| m.root != "/" && m.source.starts_with('/'))
        .map(|m| m.mount_point)
        .collect()
}

/// The file system UUID of a device, as lsblk or udev know it (`N/A` when neither does).
fn uuid(ctx: &Ctx, device: &str) -> String {
    let Some(name) = device.strip_prefix("/dev/") else {
        return "N/A".into();
    };
    let resolved = ctx
        .fs
        .canonicalize(device)
        .ok()
        .and_then(|p| p.strip_prefix("/dev/").map(str::to_owned))
        .unwrap_or_else(|| name.to_owned());
    // udev's database, which lsblk reads: /run/udev/data/b<major>:<minor> with E:ID_FS_UUID=.
    let dev_numbers = ctx.read(&format!(
        "/sys/class/block/{}/dev",
        resolved.replace('/', "!")
    ));
    if let Some(numbers) = dev_numbers
        && let Ok(data) = ctx.fs.read_to_string(&format!("/run/udev/data/b{numbers}"))
        && let Some(uuid) = data.lines().find_map(|l| l.strip_prefix("E:ID_FS_UUID="))
    {
        return uuid.to_owned();
    }
    ctx.fs
        .read_dir("/dev/disk/by-uuid")
        .unwrap_or_default()
        .into_iter()
        .find(|uuid| {
            ctx.fs
                .read_link(&format!("/dev/disk/by-uuid/{uuid}"))
                .is_ok_and(|t| factbuoy_guest::hostfs::basename(&t) == resolved)
        })
        .unwrap_or_else(|| "N/A".into())
}
