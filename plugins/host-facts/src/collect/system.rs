//! Operating system, host identity, kernel, memory, uptime and load, time zone and
//! virtualization: the small parts of the document.

use std::time::{SystemTime, UNIX_EPOCH};

use factbuoy_guest::host_info;
use factbuoy_guest::linux::{meminfo, os_release, timezone, virt};

use crate::model::{Host, Kernel, LoadAverage, Memory, Os, Swap, System, Time, Virtualization};
use crate::read::Reader;

pub fn os(r: &Reader) -> Os {
    let (path, vars) = match os_release::read(&r.fs) {
        Ok(found) => found,
        Err(e) => {
            r.warn(format!("no os-release: {e}"));
            return Os {
                family: "linux".into(),
                ..Os::default()
            };
        }
    };
    let get = |key: &str| vars.get(key).filter(|v| !v.is_empty()).cloned();
    Os {
        family: "linux".into(),
        name: get("NAME"),
        id: get("ID"),
        id_like: get("ID_LIKE")
            .map(|l| l.split_whitespace().map(str::to_owned).collect())
            .unwrap_or_default(),
        version: get("VERSION"),
        version_id: get("VERSION_ID"),
        codename: get("VERSION_CODENAME").or_else(|| get("UBUNTU_CODENAME")),
        pretty_name: get("PRETTY_NAME"),
        os_release_path: Some(path.to_owned()),
    }
}

pub fn host(r: &Reader) -> Host {
    let hostname = r.trimmed("/proc/sys/kernel/hostname");
    Host {
        domain: hostname
            .as_deref()
            .and_then(|h| h.split_once('.'))
            .map(|(_, d)| d.to_owned()),
        hostname,
        machine_id: r
            .trimmed("/etc/machine-id")
            .or_else(|| r.trimmed("/var/lib/dbus/machine-id")),
        boot_id: r.trimmed("/proc/sys/kernel/random/boot_id"),
    }
}

pub fn kernel(r: &Reader) -> Kernel {
    Kernel {
        name: r.trimmed("/proc/sys/kernel/ostype"),
        release: r.trimmed("/proc/sys/kernel/osrelease"),
        version: r.trimmed("/proc/sys/kernel/version"),
        architecture: host_info::os().architecture,
        command_line: r.trimmed("/proc/cmdline"),
    }
}

pub fn memory(r: &Reader) -> Memory {
    let info = r
        .text("/proc/meminfo")
        .map(|t| meminfo::parse(&t))
        .unwrap_or_default();
    let bytes = |key: &str| info.get(key).map(|kib| kib * 1024);
    let (total, available) = (bytes("MemTotal"), bytes("MemAvailable"));
    let (swap_total, swap_free) = (bytes("SwapTotal"), bytes("SwapFree"));
    Memory {
        total_bytes: total,
        available_bytes: available,
        free_bytes: bytes("MemFree"),
        used_bytes: total.zip(available).map(|(t, a)| t.saturating_sub(a)),
        buffers_bytes: bytes("Buffers"),
        cached_bytes: bytes("Cached"),
        shared_bytes: bytes("Shmem"),
        hugepage_size_bytes: bytes("Hugepagesize"),
        swap: Swap {
            total_bytes: swap_total,
            free_bytes: swap_free,
            used_bytes: swap_total.zip(swap_free).map(|(t, f)| t.saturating_sub(f)),
        },
    }
}

pub fn system(r: &Reader) -> System {
    let uptime_seconds = r
        .trimmed("/proc/uptime")
        .and_then(|t| t.split_whitespace().next()?.parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s >= 0.0);
    let boot_time = r.text("/proc/stat").and_then(|stat| {
        stat.lines()
            .find_map(|l| l.strip_prefix("btime "))
            .and_then(|v| v.trim().parse::<i64>().ok())
            .and_then(rfc3339_utc)
    });
    let load_average = r.trimmed("/proc/loadavg").and_then(|t| {
        let v: Vec<f64> = t
            .split_whitespace()
            .take(3)
            .filter_map(|x| x.parse().ok())
            .collect();
        match v[..] {
            [one, five, fifteen] => Some(LoadAverage {
                one_minute: one,
                five_minutes: five,
                fifteen_minutes: fifteen,
            }),
            _ => None,
        }
    });
    let processes = Some(
        r.list("/proc")
            .iter()
            .filter(|e| e.bytes().all(|b| b.is_ascii_digit()))
            .count() as u64,
    )
    .filter(|n| *n > 0);
    System {
        uptime_seconds,
        boot_time,
        load_average,
        processes,
    }
}

pub fn time(r: &Reader) -> Time {
    let local = match timezone::read_for_process(&r.fs, host_info::tz_variable().as_deref()) {
        Ok(local) => local,
        Err(e) => {
            r.warn(format!("time zone: {e}"));
            return Time::default();
        }
    };
    let now = now_seconds();
    let current = local.zone.find_local_time_type(now).ok();
    Time {
        timezone: local.name,
        abbreviation: current
            .map(|t| t.time_zone_designation().to_owned())
            .filter(|a| !a.is_empty()),
        utc_offset_seconds: current.map(|t| t.ut_offset()),
        daylight_saving: current.map(|t| t.is_dst()),
    }
}

pub fn virtualization(r: &Reader) -> Virtualization {
    let found = virt::detect(&r.fs, &host_info::existing_markers());
    Virtualization {
        container: found.guest_tech.contains("container"),
        kind: found.kind,
        role: found.role,
        guest_technologies: found.guest_tech.into_iter().collect(),
        host_technologies: found.host_tech.into_iter().collect(),
    }
}

pub fn now_seconds() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

/// Seconds since the epoch as `2026-01-02T03:04:05Z`.
pub fn rfc3339_utc(seconds: i64) -> Option<String> {
    let t = timezone::DateTime::from_timespec(seconds, 0, timezone::utc().as_ref()).ok()?;
    Some(format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}Z",
        t.year(),
        t.month(),
        t.month_day(),
        t.hour(),
        t.minute(),
        t.second()
    ))
}
