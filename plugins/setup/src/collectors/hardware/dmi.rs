//! DMI (SMBIOS) facts from `/sys/devices/virtual/dmi/id`, and IBM Z's `/proc/sysinfo`.

use regex::Regex;

use crate::ctx::Ctx;

const DMI_DIR: &str = "/sys/devices/virtual/dmi/id";

const DMI_FILES: &[(&str, &str)] = &[
    ("bios_date", "bios_date"),
    ("bios_vendor", "bios_vendor"),
    ("bios_version", "bios_version"),
    ("board_asset_tag", "board_asset_tag"),
    ("board_name", "board_name"),
    ("board_serial", "board_serial"),
    ("board_vendor", "board_vendor"),
    ("board_version", "board_version"),
    ("chassis_asset_tag", "chassis_asset_tag"),
    ("chassis_serial", "chassis_serial"),
    ("chassis_vendor", "chassis_vendor"),
    ("chassis_version", "chassis_version"),
    ("form_factor", "chassis_type"),
    ("product_name", "product_name"),
    ("product_serial", "product_serial"),
    ("product_uuid", "product_uuid"),
    ("product_version", "product_version"),
    ("system_vendor", "sys_vendor"),
];

/// SMBIOS chassis types, by number.
const FORM_FACTOR: &[&str] = &[
    "Unknown",
    "Other",
    "Unknown",
    "Desktop",
    "Low Profile Desktop",
    "Pizza Box",
    "Mini Tower",
    "Tower",
    "Portable",
    "Laptop",
    "Notebook",
    "Hand Held",
    "Docking Station",
    "All In One",
    "Sub Notebook",
    "Space-saving",
    "Lunch Box",
    "Main Server Chassis",
    "Expansion Chassis",
    "Sub Chassis",
    "Bus Expansion Chassis",
    "Peripheral Chassis",
    "RAID Chassis",
    "Rack Mount Chassis",
    "Sealed-case PC",
    "Multi-system",
    "CompactPCI",
    "AdvancedTCA",
    "Blade",
    "Blade Enclosure",
    "Tablet",
    "Convertible",
    "Detachable",
    "IoT Gateway",
    "Embedded PC",
    "Mini PC",
    "Stick PC",
];

pub fn collect(ctx: &mut Ctx) {
    // Without the sysfs files Ansible runs dmidecode, which reads the same tables through
    // /sys/firmware or /dev/mem; the sandbox has neither, so those facts are NA, as Ansible
    // reports them when dmidecode is missing.
    let has_sysfs = ctx.exists(&format!("{DMI_DIR}/product_name"));
    for (fact, file) in DMI_FILES {
        let value = if has_sysfs {
            ctx.read(&format!("{DMI_DIR}/{file}"))
        } else {
            None
        };
        let value = match (value, *fact) {
            (Some(data), "form_factor") => match data.parse::<usize>() {
                Ok(n) if n < FORM_FACTOR.len() => FORM_FACTOR[n].to_owned(),
                _ => format!("unknown ({data})"),
            },
            (Some(data), _) => data,
            (None, _) => "NA".to_owned(),
        };
        ctx.set(*fact, value);
    }
}

/// IBM Z: manufacturer, type and sequence code from `/proc/sysinfo`.
pub fn s390_sysinfo(ctx: &mut Ctx) {
    let Some(data) = ctx.read("/proc/sysinfo") else {
        return;
    };
    let mut facts: Vec<(&str, String)> = [
        "system_vendor",
        "product_version",
        "product_serial",
        "product_name",
        "product_uuid",
    ]
    .iter()
    .map(|k| (*k, "NA".to_owned()))
    .collect();
    let pattern = Regex::new(
        r"(?m)^(?:Manufacturer:\s+(?P<system_vendor>.+))|(?:Type:\s+(?P<product_name>.+))|(?:Sequence Code:\s+0+(?P<product_serial>.+))$",
    )
    .expect("valid regex");
    for captures in pattern.captures_iter(&data) {
        for (key, value) in facts.iter_mut() {
            if let Some(m) = captures.name(key) {
                *value = m.as_str().to_owned();
            }
        }
    }
    for (key, value) in facts {
        ctx.set(key, value);
    }
}
