//! Processor facts from `/proc/cpuinfo`, counted the way Ansible counts them.

use std::collections::BTreeMap;

use factbuoy_guest::linux::cpu;

use crate::ctx::Ctx;

pub fn collect(ctx: &mut Ctx) {
    let xen = ctx.exists("/proc/xen")
        || ctx
            .read_raw("/sys/hypervisor/type")
            .is_some_and(|t| t.lines().next().map(str::trim) == Some("xen"));
    let Some(text) = ctx.read_raw("/proc/cpuinfo") else {
        return;
    };
    let architecture = ctx.fact_str("architecture").unwrap_or("").to_owned();

    let mut processor: Vec<String> = Vec::new();
    let mut flags: Option<Vec<String>> = None;
    let (mut i, mut vendor_ids, mut model_names, mut processors) = (0i64, 0i64, 0i64, 0i64);
    let (mut zp, mut zmt) = (0i64, 0i64);
    let mut xen_paravirt = false;
    // Insertion-ordered maps, as Python dicts are: the first socket's and core's values count.
    let mut sockets: Vec<(String, i64)> = Vec::new();
    let mut cores: Vec<(String, i64)> = Vec::new();
    let mut physid = "0".to_owned();
    let mut coreid = "0".to_owned();
    let set = |map: &mut Vec<(String, i64)>, key: &str, value: i64| match map
        .iter_mut()
        .find(|(k, _)| k == key)
    {
        Some(entry) => entry.1 = value,
        None => map.push((key.to_owned(), value)),
    };
    for (key, value) in cpu::cpuinfo_lines(&text) {
        if xen && key == "flags" && !value.split_whitespace().any(|f| f == "vme") {
            xen_paravirt = true;
        }
        if key == "flags" {
            flags = Some(value.split_whitespace().map(str::to_owned).collect());
        }
        match key {
            "model name" | "Processor" | "vendor_id" | "cpu" | "Vendor" | "processor" => {
                processor.push(value.to_owned());
                match key {
                    "vendor_id" => vendor_ids += 1,
                    "model name" => model_names += 1,
                    "processor" => processors += 1,
                    _ => {}
                }
                i += 1;
            }
            "physical id" => {
                physid = value.to_owned();
                if !sockets.iter().any(|(k, _)| *k == physid) {
                    sockets.push((physid.clone(), 1));
                }
            }
            "core id" => {
                coreid = value.to_owned();
                // Ansible tests the socket map here (a bug it keeps); so does this port.
                if !sockets.iter().any(|(k, _)| *k == coreid) {
                    set(&mut cores, &coreid, 1);
                }
            }
            "cpu cores" => set(&mut sockets, &physid, value.parse().unwrap_or(0)),
            "siblings" => set(&mut cores, &coreid, value.parse().unwrap_or(0)),
            "# processors" => zp = value.parse().unwrap_or(0),
            "max thread id" => zmt = value.parse::<i64>().unwrap_or(0) + 1,
            "ncpus active" => i = value.parse().unwrap_or(i),
            _ => {}
        }
    }
    if vendor_ids > 0 && vendor_ids == model_names {
        i = vendor_ids;
    }
    if ["armv", "aarch", "ppc"]
        .iter()
        .any(|p| architecture.starts_with(p))
    {
        i = processors;
    }

    let mut facts: BTreeMap<&str, i64> = BTreeMap::new();
    if architecture == "s390x" {
        facts.insert("processor_count", 1);
        facts.insert(
            "processor_cores",
            if zmt == 0 {
                0
            } else {
                (zp as f64 / zmt as f64).round() as i64
            },
        );
        facts.insert("processor_threads_per_core", zmt);
        facts.insert("processor_vcpus", zp);
        facts.insert("processor_nproc", zp);
    } else if xen_paravirt {
        for key in [
            "processor_count",
            "processor_cores",
            "processor_vcpus",
            "processor_nproc",
        ] {
            facts.insert(key, i);
        }
        facts.insert("processor_threads_per_core", 1);
    } else {
        let count = if sockets.is_empty() {
            i
        } else {
            sockets.len() as i64
        };
        let cores_per_socket = sockets
            .first()
            .map(|(_, v)| *v)
            .filter(|v| *v != 0)
            .unwrap_or(1);
        let threads = match cores.first() {
            Some((_, siblings)) => python_round(*siblings as f64 / cores_per_socket as f64),
            None => python_round(1.0 / cores_per_socket as f64),
        };
        facts.insert("processor_count", count);
        facts.insert("processor_cores", cores_per_socket);
        facts.insert("processor_threads_per_core", threads);
        facts.insert("processor_vcpus", threads * count * cores_per_socket);
        facts.insert("processor_nproc", processors);
    }
    // Ansible counts the CPUs its process may run on (sched_getaffinity); so does this, for
    // the factbuoy process.
    if let Some(allowed) = ctx
        .read_raw("/proc/self/status")
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
                .map(str::to_owned)
        })
        .and_then(|list| cpu::parse_cpu_list(&list))
    {
        facts.insert("processor_nproc", allowed.len() as i64);
    }

    ctx.set("processor", processor);
    if let Some(flags) = flags {
        ctx.set("flags", flags);
    }
    for (key, value) in facts {
        ctx.set(key, value);
    }
}

/// Python 3's `round`: halves go to the even neighbour.
fn python_round(x: f64) -> i64 {
    let rounded = x.round();
    if (x - x.trunc()).abs() == 0.5 && rounded as i64 % 2 != 0 {
        (rounded - x.signum()) as i64
    } else {
        rounded as i64
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn rounds_half_to_even() {
        assert_eq!(super::python_round(0.5), 0);
        assert_eq!(super::python_round(1.5), 2);
        assert_eq!(super::python_round(2.5), 2);
        assert_eq!(super::python_round(0.4), 0);
        assert_eq!(super::python_round(2.0), 2);
    }
}
