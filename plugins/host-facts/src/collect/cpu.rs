//! CPU model, topology and flags: `/proc/cpuinfo` for the description, sysfs topology for the
//! counts (it also knows ARM machines, whose cpuinfo has no socket or core ids).

use std::collections::BTreeSet;

use factbuoy_guest::host_info;
use factbuoy_guest::linux::cpu::{cpuinfo_records, parse_cpu_list};

use crate::model::Cpu;
use crate::read::Reader;

pub fn collect(r: &Reader) -> Cpu {
    let records = r
        .text("/proc/cpuinfo")
        .map(|t| cpuinfo_records(&t))
        .unwrap_or_default();
    let first_value = |keys: &[&str]| {
        records.iter().find_map(|record| {
            record
                .iter()
                .find(|(k, v)| keys.contains(&k.as_str()) && !v.is_empty())
                .map(|(_, v)| v.clone())
        })
    };
    let online: Vec<u32> = r
        .trimmed("/sys/devices/system/cpu/online")
        .and_then(|list| parse_cpu_list(&list))
        .map(|set| set.into_iter().collect())
        .unwrap_or_else(|| (0..records.len() as u32).collect());
    let threads = online.len() as u32;

    // (package, core) of every online CPU, from sysfs, else from cpuinfo.
    let mut topology: Vec<(String, String)> = online
        .iter()
        .filter_map(|cpu| {
            let dir = format!("/sys/devices/system/cpu/cpu{cpu}/topology");
            Some((
                r.optional(&format!("{dir}/physical_package_id"))?,
                r.optional(&format!("{dir}/core_id"))?,
            ))
        })
        .collect();
    if topology.len() != online.len() {
        topology = records
            .iter()
            .filter_map(|rec| {
                let get = |key: &str| rec.iter().find(|(k, _)| k == key).map(|(_, v)| v.clone());
                Some((get("physical id")?, get("core id")?))
            })
            .collect();
    }
    let (sockets, cores) = if topology.is_empty() {
        (None, None)
    } else {
        let sockets: BTreeSet<&String> = topology.iter().map(|(p, _)| p).collect();
        let cores: BTreeSet<&(String, String)> = topology.iter().collect();
        (Some(sockets.len() as u32), Some(cores.len() as u32))
    };
    let brand = || {
        host_info::cpus()
            .into_iter()
            .next()
            .map(|c| c.brand)
            .filter(|b| !b.is_empty())
    };
    Cpu {
        vendor: first_value(&["vendor_id", "CPU implementer", "vendor"]),
        model: first_value(&["model name", "Processor", "cpu model", "cpu"]).or_else(brand),
        sockets,
        cores,
        threads,
        threads_per_core: cores.filter(|c| *c > 0).map(|c| threads.div_ceil(c)),
        frequency_mhz: first_value(&["cpu MHz", "clock"])
            .and_then(|v| v.trim_end_matches("MHz").trim().parse().ok()),
        flags: first_value(&["flags", "Features"])
            .map(|f| f.split_whitespace().map(str::to_owned).collect())
            .unwrap_or_default(),
    }
}
