//! Security facts: SELinux, AppArmor, FIPS, chroot and process capabilities.

use factbuoy_guest::host_info;
use serde_json::{Map, Value, json};

use crate::ctx::Ctx;

/// `selinux`: read from selinuxfs and `/etc/selinux/config`, which is what libselinux reads.
pub fn selinux(ctx: &mut Ctx) {
    // Ansible reports whether its Python bindings for libselinux loaded. Reading selinuxfs
    // needs no bindings, so the facts are always available here.
    ctx.set("selinux_python_present", true);
    let enforce = ctx.read("/sys/fs/selinux/enforce");
    let Some(enforce) = enforce else {
        ctx.set("selinux", json!({ "status": "disabled" }));
        return;
    };
    let mode_name = |mode: &str| match mode {
        "1" | "enforcing" => "enforcing",
        "0" | "permissive" => "permissive",
        "-1" | "disabled" => "disabled",
        _ => "unknown",
    };
    let config = ctx.read_raw("/etc/selinux/config").unwrap_or_default();
    let config_value = |key: &str| {
        config
            .lines()
            .filter_map(|l| l.trim().strip_prefix(key)?.strip_prefix('='))
            .next_back()
            .map(|v| v.trim().to_owned())
    };
    let mut facts = Map::new();
    facts.insert("status".into(), "enabled".into());
    let policyvers = ctx
        .read("/sys/fs/selinux/policyvers")
        .and_then(|v| v.parse::<i64>().ok())
        .map(Value::from)
        .unwrap_or_else(|| "unknown".into());
    facts.insert("policyvers".into(), policyvers);
    let config_mode = config_value("SELINUX").map(|m| mode_name(&m.to_lowercase()).to_owned());
    facts.insert(
        "config_mode".into(),
        config_mode.unwrap_or_else(|| "unknown".into()).into(),
    );
    facts.insert("mode".into(), mode_name(&enforce).into());
    facts.insert(
        "type".into(),
        config_value("SELINUXTYPE")
            .unwrap_or_else(|| "unknown".into())
            .into(),
    );
    ctx.set("selinux", facts);
}

/// `apparmor`: enabled when securityfs shows AppArmor.
pub fn apparmor(ctx: &mut Ctx) {
    let status = if ctx.exists("/sys/kernel/security/apparmor") {
        "enabled"
    } else {
        "disabled"
    };
    ctx.set("apparmor", json!({ "status": status }));
}

/// `fips`: the kernel's FIPS mode.
pub fn fips(ctx: &mut Ctx) {
    let enabled = ctx.read("/proc/sys/crypto/fips_enabled").as_deref() == Some("1");
    ctx.set("fips", enabled);
}

/// `chroot`: whether factbuoy runs in a chroot (asked of the host: it needs to compare `/`
/// with process 1's root, which the sandbox cannot reach).
pub fn chroot(ctx: &mut Ctx) {
    ctx.set(
        "is_chroot",
        host_info::is_chroot()
            .map(Value::from)
            .unwrap_or(Value::Null),
    );
}

/// `caps`: Ansible parses the `Current:` line of `capsh --print`; the same line is rebuilt
/// here from `/proc/self/status` with libcap's text format. Without capsh Ansible reports N/A.
pub fn caps(ctx: &mut Ctx) {
    let mut enforced = Value::from("N/A");
    let mut capabilities = Value::from("N/A");
    if ctx.find_bin("capsh").is_some()
        && let Some(current) = current_capabilities_text(ctx)
    {
        let line = format!("Current: {current}");
        if line.split(':').nth(1).map(str::trim) == Some("=ep") {
            enforced = "False".into();
            capabilities = json!([]);
        } else {
            enforced = "True".into();
            let after_equals = line.split('=').nth(1).unwrap_or("");
            capabilities = after_equals
                .split(',')
                .map(|c| c.trim().to_owned())
                .collect();
        }
    }
    ctx.set("system_capabilities_enforced", enforced);
    ctx.set("system_capabilities", capabilities);
}

/// libcap's names, by capability number.
const CAP_NAMES: &[&str] = &[
    "cap_chown",
    "cap_dac_override",
    "cap_dac_read_search",
    "cap_fowner",
    "cap_fsetid",
    "cap_kill",
    "cap_setgid",
    "cap_setuid",
    "cap_setpcap",
    "cap_linux_immutable",
    "cap_net_bind_service",
    "cap_net_broadcast",
    "cap_net_admin",
    "cap_net_raw",
    "cap_ipc_lock",
    "cap_ipc_owner",
    "cap_sys_module",
    "cap_sys_rawio",
    "cap_sys_chroot",
    "cap_sys_ptrace",
    "cap_sys_pacct",
    "cap_sys_admin",
    "cap_sys_boot",
    "cap_sys_nice",
    "cap_sys_resource",
    "cap_sys_time",
    "cap_sys_tty_config",
    "cap_mknod",
    "cap_lease",
    "cap_audit_write",
    "cap_audit_control",
    "cap_setfcap",
    "cap_mac_override",
    "cap_mac_admin",
    "cap_syslog",
    "cap_wake_alarm",
    "cap_block_suspend",
    "cap_audit_read",
    "cap_perfmon",
    "cap_bpf",
    "cap_checkpoint_restore",
];

/// The process's capabilities in libcap's `cap_to_text` form, for example `=ep
/// cap_sys_resource-ep`.
fn current_capabilities_text(ctx: &Ctx) -> Option<String> {
    let status = ctx.read_raw("/proc/self/status")?;
    let mask = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
    };
    let (effective, inheritable, permitted) =
        (mask("CapEff:")?, mask("CapInh:")?, mask("CapPrm:")?);
    let bits = ctx
        .read("/proc/sys/kernel/cap_last_cap")
        .and_then(|v| v.parse::<u32>().ok())
        .map_or(CAP_NAMES.len() as u32, |last| last + 1)
        .min(64);
    Some(cap_to_text(effective, inheritable, permitted, bits))
}

/// libcap's `cap_to_text`: the most common combination of flags becomes the `=` base, the
/// other capabilities are listed as changes from it.
fn cap_to_text(effective: u64, inheritable: u64, permitted: u64, bits: u32) -> String {
    const EFF: usize = 1;
    const INH: usize = 2;
    const PER: usize = 4;
    let flags_of = |n: u32| {
        let bit = |mask: u64| (mask >> n) & 1 == 1;
        (if bit(effective) { EFF } else { 0 })
            | (if bit(inheritable) { INH } else { 0 })
            | (if bit(permitted) { PER } else { 0 })
    };
    let letters = |flags: usize| {
        format!(
            "{}{}{}",
            if flags & EFF != 0 { "e" } else { "" },
            if flags & INH != 0 { "i" } else { "" },
            if flags & PER != 0 { "p" } else { "" }
        )
    };
    let mut histogram = [0u32; 8];
    for n in 0..bits {
        histogram[flags_of(n)] += 1;
    }
    // The most common flags; ties go to fewer flags.
    let mut base = 7;
    for t in (0..7).rev() {
        if histogram[t] >= histogram[base] {
            base = t;
        }
    }
    let mut text = format!("={}", letters(base));
    for t in (0..8).rev() {
        if t == base || histogram[t] == 0 {
            continue;
        }
        let names: Vec<String> = (0..bits)
            .filter(|n| flags_of(*n) == t)
            .map(|n| {
                CAP_NAMES
                    .get(n as usize)
                    .map_or_else(|| n.to_string(), |s| s.to_string())
            })
            .collect();
        text.push(' ');
        text.push_str(&names.join(","));
        let added = t & !base;
        if added != 0 {
            // With nothing in the base, `= cap_x+ep` is written `cap_x=ep`.
            if text.starts_with("= ") {
                text.replace_range(..2, "");
                text.push('=');
            } else {
                text.push('+');
            }
            text.push_str(&letters(added));
        }
        let removed = !t & base;
        if removed != 0 {
            text.push('-');
            text.push_str(&letters(removed));
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::cap_to_text;

    #[test]
    fn capability_text_matches_capsh() {
        // Root without cap_sys_resource (bit 24): what capsh printed on the build host.
        let all: u64 = (1 << 41) - 1;
        let without_resource = all & !(1 << 24);
        assert_eq!(
            cap_to_text(without_resource, 0, without_resource, 41),
            "=ep cap_sys_resource-ep"
        );
        assert_eq!(cap_to_text(all, 0, all, 41), "=ep");
        assert_eq!(cap_to_text(0, 0, 0, 41), "=");
        assert_eq!(
            cap_to_text(0b11, 0, 0b11, 41),
            "cap_chown,cap_dac_override=ep"
        );
    }
}
