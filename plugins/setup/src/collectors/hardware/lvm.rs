//! `lvm`: volume groups, logical and physical volumes as Ansible reads them from `vgs`, `lvs`
//! and `pvs` (`--units g --nosuffix`), computed from the metadata those programs read. The
//! copy the LVM tools write to `/etc/lvm/backup` after every change is read rather than the
//! metadata areas on the disks themselves: the same text, and reading it needs no grant of raw
//! block devices (whose every byte a plugin could then read).

use factbuoy_guest::hostfs::basename;
use factbuoy_guest::linux::lvm::{self, VolumeGroup};
use serde_json::{Map, Value, json};

use crate::ctx::Ctx;

pub fn collect(ctx: &mut Ctx) {
    let facts = facts(ctx);
    ctx.set("lvm", facts);
}

fn facts(ctx: &Ctx) -> Value {
    // Ansible asks only when `vgs` is installed, and only as root; `N/A` otherwise.
    if ctx.find_bin("vgs").is_none() || !is_root(ctx) {
        return "N/A".into();
    }
    let mut groups: Vec<VolumeGroup> = ctx
        .list(lvm::BACKUP_DIR)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|name| {
            let path = format!("{}/{name}", lvm::BACKUP_DIR);
            let text = ctx.read_raw(&path)?;
            VolumeGroup::parse(&text)
                .map_err(|e| ctx.warn(format!("lvm: {path}: {e}")))
                .ok()
        })
        .collect();
    // The order the tools print in, so that Ansible's last-wins keys come out the same.
    groups.sort_by(|a, b| a.name.cmp(&b.name));
    let (removed, groups): (Vec<VolumeGroup>, Vec<VolumeGroup>) =
        groups.into_iter().partition(VolumeGroup::removed);

    let mut vgs = Map::new();
    let mut lvs = Map::new();
    let mut pvs: Vec<(String, Value)> = Vec::new();
    // A removed group's disks that no group took since are orphans, which `pvs` lists whole
    // and free.
    let in_groups: Vec<&str> = groups
        .iter()
        .flat_map(|vg| vg.physical_volumes.iter().map(|pv| pv.id.as_str()))
        .collect();
    for pv in removed.iter().flat_map(|vg| &vg.physical_volumes) {
        if in_groups.contains(&pv.id.as_str()) {
            continue;
        }
        if let Some((name, bytes)) = pv_device(ctx, &pv.id, &pv.device_hint)
            && !wiped(ctx, &name)
        {
            let size = lvm::gib(bytes);
            pvs.push((name, json!({ "size_g": size, "free_g": size, "vg": "" })));
        }
    }
    for vg in &groups {
        let devices: Vec<Option<String>> = vg
            .physical_volumes
            .iter()
            .map(|pv| pv_device(ctx, &pv.id, &pv.device_hint).map(|(name, _)| name))
            .collect();
        // The tools find a group on its disks: without any of them, a backup is history.
        if devices.iter().all(Option::is_none) {
            continue;
        }
        let size = |extents: u64| lvm::gib(extents * vg.extent_bytes);
        vgs.insert(
            vg.name.clone(),
            json!({
                "size_g": size(vg.extents()),
                "free_g": size(vg.free_extents()),
                "num_lvs": vg.logical_volumes.len().to_string(),
                "num_pvs": vg.physical_volumes.len().to_string(),
            }),
        );
        let mut volumes: Vec<_> = vg.logical_volumes.iter().collect();
        volumes.sort_by(|a, b| a.name.cmp(&b.name));
        for lv in volumes {
            lvs.insert(
                lv.name.clone(),
                json!({ "size_g": size(lv.extents), "vg": vg.name }),
            );
        }
        for (pv, device) in vg.physical_volumes.iter().zip(devices) {
            pvs.push((
                // How `pvs` names a physical volume it did not find.
                device.unwrap_or_else(|| "[unknown]".into()),
                json!({
                    "size_g": size(pv.extents),
                    "free_g": size(pv.free_extents),
                    "vg": vg.name,
                }),
            ));
        }
    }
    pvs.sort_by(|a, b| a.0.cmp(&b.0));
    // Each listing only from its own program, as Ansible asks for each.
    let listing = |program: &str, map: Map<String, Value>| -> Value {
        match ctx.find_bin(program) {
            Some(_) => map.into(),
            None => Map::new().into(),
        }
    };
    json!({
        "vgs": vgs,
        "lvs": listing("lvs", lvs),
        "pvs": listing("pvs", pvs.into_iter().collect()),
    })
}

/// The real user of the factbuoy process is root (Ansible's `os.getuid() == 0`).
fn is_root(ctx: &Ctx) -> bool {
    ctx.read_raw("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|line| line.strip_prefix("Uid:"))
        .and_then(|ids| ids.split_whitespace().next())
        == Some("0")
}

/// The device a PV is on now, named as `pvs` names it, with its size in bytes, or `None` when
/// it is not there: udev's `lvm-pv-uuid-<id>` link finds it, else the device recorded with the
/// metadata, which must exist with a size (a detached loop device has none). A device-mapper
/// device (`dm-3`) is named by its `/dev/mapper` name, as Ansible renames it with `dmsetup`.
fn pv_device(ctx: &Ctx, id: &str, hint: &str) -> Option<(String, u64)> {
    let kernel_name = match ctx
        .fs
        .read_link(&format!("/dev/disk/by-id/lvm-pv-uuid-{id}"))
    {
        Ok(target) => basename(&target).to_owned(),
        Err(_) => match hint.strip_prefix("/dev/mapper/") {
            Some(mapper) => dm_device(ctx, mapper)?,
            None => basename(hint).to_owned(),
        },
    };
    let sectors = ctx
        .fs
        .read_optional(&format!("/sys/class/block/{kernel_name}/size"))
        .and_then(|s| s.parse::<u64>().ok())
        .unwrap_or(0);
    if sectors == 0 {
        return None;
    }
    let name = match dm_name(ctx, &kernel_name).filter(|_| kernel_name.starts_with("dm-")) {
        Some(mapper) => format!("/dev/mapper/{mapper}"),
        None => format!("/dev/{kernel_name}"),
    };
    Some((name, sectors * 512))
}

/// udev's database says the device holds no PV label any more (`pvremove`). Without udev
/// (a container) there is no telling, and the label is taken to be there.
fn wiped(ctx: &Ctx, device: &str) -> bool {
    let kernel_name = match device.strip_prefix("/dev/mapper/") {
        Some(mapper) => dm_device(ctx, mapper),
        None => device.strip_prefix("/dev/").map(str::to_owned),
    };
    let Some(number) = kernel_name.and_then(|name| {
        ctx.fs
            .read_optional(&format!("/sys/class/block/{name}/dev"))
    }) else {
        return false;
    };
    ctx.fs
        .read_optional(&format!("/run/udev/data/b{number}"))
        .is_some_and(|data| !data.lines().any(|l| l == "E:ID_FS_TYPE=LVM2_member"))
}

/// The device-mapper name of `dm-N`.
fn dm_name(ctx: &Ctx, kernel_name: &str) -> Option<String> {
    ctx.fs
        .read_optional(&format!("/sys/block/{kernel_name}/dm/name"))
        .filter(|n| !n.is_empty())
}

/// The `dm-N` device of a device-mapper name.
fn dm_device(ctx: &Ctx, name: &str) -> Option<String> {
    ctx.fs
        .read_dir("/sys/block")
        .ok()?
        .into_iter()
        .filter(|device| device.starts_with("dm-"))
        .find(|device| dm_name(ctx, device).as_deref() == Some(name))
}
