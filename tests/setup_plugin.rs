//! The bundled `setup` plugin run by the real `factbuoy` binary: facts that match the host's
//! own files, `gather_subset` and `filter`, and that denied paths and hostile host files cost
//! only the facts that come from them. Its agreement with real Ansible is checked by
//! `tests/ansible/compare.sh` (run by `.ci/run`).

mod support;

use std::path::Path;
use std::process::Command;

use serde_json::Value;

/// Runs `factbuoy plugin run setup -o json` with extra arguments: exit code, report, facts.
fn run_setup(args: &[&str]) -> (i32, Value, Value) {
    let output = Command::new(env!("CARGO_BIN_EXE_factbuoy"))
        .args(["plugin", "run", "setup", "-o", "json"])
        .args(args)
        .env("FACTBUOY_CACHE_DIR", support::cache_dir())
        .output()
        .expect("running factbuoy");
    let report: Value = serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "factbuoy printed no JSON report ({e}); stderr: {}",
            String::from_utf8_lossy(&output.stderr)
        )
    });
    let facts = report["artifacts"]
        .as_array()
        .and_then(|a| a.iter().find(|a| a["name"] == "ansible_facts.json"))
        .map(|a| match &a["content"] {
            Value::String(text) => serde_json::from_str(text).unwrap(),
            other => other.clone(),
        })
        .unwrap_or(Value::Null);
    (output.status.code().unwrap_or(-1), report, facts)
}

fn warnings(report: &Value) -> String {
    report["warnings"].to_string()
}

fn host_file(path: &str) -> String {
    std::fs::read_to_string(path).unwrap().trim().to_owned()
}

#[test]
fn facts_match_the_hosts_own_files() {
    let (code, report, facts) = run_setup(&[]);
    assert_eq!(code, 0, "{report}");
    assert_eq!(
        facts["ansible_nodename"],
        host_file("/proc/sys/kernel/hostname")
    );
    assert_eq!(
        facts["ansible_kernel"],
        host_file("/proc/sys/kernel/osrelease")
    );
    assert_eq!(facts["ansible_system"], "Linux");
    let mem_total_kib: u64 = host_file("/proc/meminfo")
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap();
    assert_eq!(facts["ansible_memtotal_mb"], mem_total_kib / 1024);
    let logical_cpus = host_file("/proc/cpuinfo")
        .lines()
        .filter(|l| l.starts_with("processor"))
        .count();
    assert_eq!(facts["ansible_processor_vcpus"], logical_cpus);
    assert_eq!(facts["gather_subset"], serde_json::json!(["all"]));
    assert_eq!(facts["module_setup"], true);
    assert!(facts["ansible_date_time"]["epoch"].is_string());
    assert!(facts["ansible_distribution"].is_string());
}

#[test]
fn gather_subset_and_filter_follow_ansible() {
    let (code, report, facts) = run_setup(&[
        "-p",
        "gather_subset=!all,!min,network",
        "-p",
        "filter=ansible_interfaces,default_ipv4",
    ]);
    assert_eq!(code, 0, "{report}");
    let keys: Vec<&String> = facts.as_object().unwrap().keys().collect();
    assert_eq!(
        keys,
        ["ansible_default_ipv4", "ansible_interfaces"],
        "{facts}"
    );

    // Without a filter the collectors network needs (platform, distribution) report too.
    let (_, _, facts) = run_setup(&["-p", "gather_subset=!all,!min,network"]);
    assert!(facts["ansible_kernel"].is_string() && facts["ansible_os_family"].is_string());
    assert!(facts.get("ansible_mounts").is_none() && facts.get("ansible_env").is_none());

    let (code, report, _) = run_setup(&["-p", "gather_subset=bogus"]);
    assert_ne!(code, 0);
    assert!(
        report.to_string().contains("Bad subset 'bogus'"),
        "{report}"
    );
}

#[test]
fn a_denied_path_costs_only_its_facts() {
    let (code, report, facts) = run_setup(&["--deny", "read:/sys"]);
    assert_eq!(code, 0, "{report}");
    assert!(
        warnings(&report).contains("/sys is not readable"),
        "{report}"
    );
    assert_eq!(facts["ansible_devices"], serde_json::json!({}));
    assert_eq!(
        facts["ansible_kernel"],
        host_file("/proc/sys/kernel/osrelease")
    );
    assert!(facts["ansible_processor_count"].is_number());
    assert!(facts["ansible_dns"].is_object());
}

/// Writes `content` at `path` below `root`, creating directories.
fn put(root: &Path, path: &str, content: &[u8]) {
    let full = root.join(path.trim_start_matches('/'));
    std::fs::create_dir_all(full.parent().unwrap()).unwrap();
    std::fs::write(full, content).unwrap();
}

#[test]
fn hostile_host_files_lose_only_their_facts() {
    let root = tempfile::tempdir().unwrap();
    let r = root.path();
    put(
        r,
        "/proc/cpuinfo",
        b"processor : \xff\xfe\nno colon here\nflags :\n\n\n:::\n",
    );
    put(r, "/proc/meminfo", b"MemTotal: lots kB\nMemFree 12\n\0\0\0");
    put(r, "/proc/cmdline", b"root=/dev/sda1 quiet \"unclosed\n");
    put(
        r,
        "/proc/mounts",
        b"/dev/sda1 /mnt\n/dev/sdb1 /data ext4 rw 0 notanumber\n",
    );
    put(r, "/proc/self/status", b"Uid:\tx y\nGid:\n");
    put(r, "/proc/net/route", b"Iface\tDestination\neth0\tZZZZ\n");
    put(r, "/proc/net/if_inet6", b"not an address at all\n");
    put(r, "/proc/sys/kernel/hostname", b"evil.example.com\n");
    put(r, "/proc/uptime", b"-1e400 nan\n");
    put(
        r,
        "/etc/os-release",
        b"\x00\x01ID=\"unterminated\nVERSION_ID=\xff\n",
    );
    put(
        r,
        "/etc/resolv.conf",
        b"nameserver\noptions :::: ndots:\nsearch\n",
    );
    put(r, "/etc/localtime", b"TZif but truncated");
    put(r, "/sys/block/sdz/size", b"not a number\n");
    put(r, "/sys/block/sdz/queue/logical_block_size", b"0\n");
    put(r, "/sys/class/net/eth9/mtu", b"abc\n");
    put(r, "/sys/class/net/eth9/flags", b"0xzz\n");
    // A file far above the read cap: refused with a warning, not loaded.
    // `ip` must exist for Ansible (and so for setup) to report network facts at all.
    put(r, "/usr/bin/ip", b"");
    std::fs::File::create(r.join("etc/hosts"))
        .unwrap()
        .set_len(65 * 1024 * 1024)
        .unwrap();

    let (code, report, facts) = run_setup(&["--root", r.to_str().unwrap()]);
    assert_eq!(code, 0, "{report}");
    let warnings = warnings(&report);
    assert!(warnings.contains("not a valid TZif file"), "{warnings}");
    assert!(warnings.contains("larger than"), "{warnings}");
    assert_eq!(facts["ansible_nodename"], "evil.example.com");
    assert_eq!(facts["ansible_hostname"], "evil");
    assert_eq!(facts["ansible_date_time"]["tz"], "UTC");
    // An unclosed quote makes Ansible's shlex give up on the whole command line.
    assert_eq!(facts["ansible_cmdline"], serde_json::json!({}), "{facts}");
    assert!(facts["ansible_dns"].is_object());
    assert_eq!(facts["ansible_devices"]["sdz"]["sectors"], 0);
    assert_eq!(facts["ansible_eth9"]["device"], "eth9");
    assert!(facts["ansible_eth9"].get("mtu").is_none());
    assert!(facts["ansible_distribution"].is_string());
}
