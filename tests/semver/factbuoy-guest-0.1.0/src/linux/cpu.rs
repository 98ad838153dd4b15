//! `/proc/cpuinfo` and the kernel's CPU list format (`0-3,8`).

use std::collections::BTreeSet;

/// The `key: value` lines of `/proc/cpuinfo` in file order, both trimmed; a line without a
/// colon gives an empty value. Blank lines (record separators) are skipped.
pub fn cpuinfo_lines(text: &str) -> impl Iterator<Item = (&str, &str)> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|line| match line.split_once(':') {
            Some((key, value)) => (key.trim(), value.trim()),
            None => (line.trim(), ""),
        })
}

/// `/proc/cpuinfo` as one record per logical CPU (blank-line separated), fields in file order.
pub fn cpuinfo_records(text: &str) -> Vec<Vec<(String, String)>> {
    let mut records = Vec::new();
    let mut current: Vec<(String, String)> = Vec::new();
    for line in text.lines() {
        if line.trim().is_empty() {
            if !current.is_empty() {
                records.push(std::mem::take(&mut current));
            }
            continue;
        }
        let (key, value) = line.split_once(':').unwrap_or((line, ""));
        current.push((key.trim().to_owned(), value.trim().to_owned()));
    }
    if !current.is_empty() {
        records.push(current);
    }
    records
}

/// The CPUs in a kernel CPU list such as `0-3,8,10-11` (`Cpus_allowed_list`,
/// `/sys/devices/system/cpu/online`). `None` for text that is not such a list.
pub fn parse_cpu_list(text: &str) -> Option<BTreeSet<u32>> {
    let mut cpus = BTreeSet::new();
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((first, last)) => {
                let (first, last): (u32, u32) = (first.parse().ok()?, last.parse().ok()?);
                if last < first || last - first > 1 << 20 {
                    return None;
                }
                cpus.extend(first..=last);
            }
            None => {
                cpus.insert(part.parse().ok()?);
            }
        }
    }
    Some(cpus)
}

#[cfg(test)]
mod tests {
    use super::*;

    const CPUINFO: &str = "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) Processor\nflags\t\t: fpu vme\n\nprocessor\t: 1\nvendor_id\t: GenuineIntel\npower management:\n\n";

    #[test]
    fn cpuinfo_lines_and_records() {
        let lines: Vec<_> = cpuinfo_lines(CPUINFO).collect();
        assert_eq!(lines[0], ("processor", "0"));
        assert_eq!(lines[3], ("flags", "fpu vme"));
        assert_eq!(lines[6], ("power management", ""));
        let records = cpuinfo_records(CPUINFO);
        assert_eq!(records.len(), 2);
        assert_eq!(records[1][1], ("vendor_id".into(), "GenuineIntel".into()));
    }

    #[test]
    fn cpu_lists() {
        assert_eq!(parse_cpu_list("0-3,8\n").unwrap().len(), 5);
        assert_eq!(parse_cpu_list("0").unwrap().len(), 1);
        assert!(parse_cpu_list("3-1").is_none());
        assert!(parse_cpu_list("a-b").is_none());
        assert!(parse_cpu_list("0-4294967295").is_none());
    }
}
