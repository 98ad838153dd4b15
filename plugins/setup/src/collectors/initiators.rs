//! Storage initiator names: Fibre Channel WWNs, the iSCSI IQN and the NVMe host NQN.

use crate::ctx::Ctx;

pub fn fibre_channel_wwn(ctx: &mut Ctx) {
    let mut wwns = Vec::new();
    for host in ctx.list("/sys/class/fc_host").unwrap_or_default() {
        let path = format!("/sys/class/fc_host/{host}/port_name");
        for line in ctx.read_raw(&path).unwrap_or_default().lines() {
            wwns.push(line.trim_end().get(2..).unwrap_or("").to_owned());
        }
    }
    ctx.set("fibre_channel_wwn", wwns);
}

pub fn iscsi(ctx: &mut Ctx) {
    let text = ctx
        .read("/etc/iscsi/initiatorname.iscsi")
        .unwrap_or_default();
    let iqn = text
        .lines()
        .filter(|l| !(l.starts_with('#') || l.starts_with(';') || l.trim().is_empty()))
        .find_map(|l| l.strip_prefix("InitiatorName="))
        .map(str::to_owned);
    ctx.set("iscsi_iqn", iqn.unwrap_or_default());
}

pub fn nvme(ctx: &mut Ctx) {
    let text = ctx.read("/etc/nvme/hostnqn").unwrap_or_default();
    let nqn = text
        .lines()
        .filter(|l| !(l.starts_with('#') || l.starts_with(';') || l.trim().is_empty()))
        .find(|l| l.starts_with("nqn."));
    ctx.set("hostnqn", nqn.unwrap_or(""));
}
