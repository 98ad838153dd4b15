//! The bundled `setup` plugin run by the real `factbuoy` binary: facts that match the host's
//! own files, `gather_subset` and `filter`, and that denied paths and hostile host files cost
//! only the facts that come from them. Its agreement with real Ansible is checked by
//! `tests/ansible/compare.sh` (run by `tests/suite.sh`).

use crate::support;

use std::path::Path;
use std::process::Command;

use serde_json::Value;

/// Runs `factbuoy plugin run setup -o json` with extra arguments: exit code, report, facts.
/// `TZ` is left unset, as on most hosts.
fn run_setup(args: &[&str]) -> (i32, Value, Value) {
    run_setup_with_tz(args, None)
}

/// Like [`run_setup`], with the factbuoy process's `TZ` set to `tz`.
fn run_setup_with_tz(args: &[&str], tz: Option<&str>) -> (i32, Value, Value) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_factbuoy"));
    command
        .args(["plugin", "run", "setup", "-o", "json"])
        .args(args)
        .env("FACTBUOY_CACHE_DIR", support::cache_dir())
        .env_remove("TZ");
    if let Some(tz) = tz {
        command.env("TZ", tz);
    }
    let output = command.output().expect("running factbuoy");
    support::setup_report(&output)
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

/// The user facts name the process's uid as the host root's passwd file does. A uid it does not
/// list (an agent pod's 65532 on a node) keeps its ids and gets no name, home or shell, and no
/// warning, by design (docs/setup.md).
#[test]
fn a_user_the_host_root_does_not_name_keeps_its_ids_without_a_warning() {
    let root = tempfile::tempdir().unwrap();
    let r = root.path();
    put(
        r,
        "/proc/self/status",
        b"Name:\tfactbuoy\nUid:\t65532\t65532\t65532\t65532\nGid:\t65532\t65532\t65532\t65532\n",
    );
    let user_facts = |passwd: &[u8]| {
        put(r, "/etc/passwd", passwd);
        let output = Command::new(env!("CARGO_BIN_EXE_factbuoy"))
            .args(["plugin", "run", "setup", "-o", "json", "--root"])
            .arg(r)
            .args(["-p", "gather_subset=!all,!min,user"])
            .env("FACTBUOY_CACHE_DIR", support::cache_dir())
            // As in a pod: no login name in the environment.
            .env_remove("LOGNAME")
            .env_remove("USER")
            .output()
            .unwrap();
        let (code, report, facts) = support::setup_report(&output);
        assert_eq!(code, 0, "{report}");
        assert!(!warnings(&report).contains("passwd"), "{report}");
        facts
    };
    let unnamed = user_facts(b"root:x:0:0:root:/root:/bin/bash\n");
    for id in [
        "ansible_real_user_id",
        "ansible_effective_user_id",
        "ansible_real_group_id",
        "ansible_effective_group_id",
    ] {
        assert_eq!(unnamed[id], 65532, "{id}: {unnamed}");
    }
    for named in [
        "ansible_user_id",
        "ansible_user_uid",
        "ansible_user_dir",
        "ansible_user_shell",
    ] {
        assert!(unnamed.get(named).is_none(), "{named}: {unnamed}");
    }
    let listed = user_facts(
        b"root:x:0:0:root:/root:/bin/bash\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n",
    );
    assert_eq!(listed["ansible_user_id"], "nonroot");
    assert_eq!(listed["ansible_user_uid"], 65532);
    assert_eq!(listed["ansible_user_dir"], "/home/nonroot");
}

/// A host root whose `/etc/resolv.conf` and `/etc/localtime` are absolute symlinks, as on a
/// host with systemd-resolved: they mean paths below the root, not on this machine.
fn root_with_absolute_links() -> tempfile::TempDir {
    let root = tempfile::tempdir().unwrap();
    let r = root.path();
    std::fs::create_dir(r.join("etc")).unwrap();
    put(
        r,
        "/run/systemd/resolve/stub-resolv.conf",
        b"nameserver 192.0.2.53\nsearch example.test\n",
    );
    put(
        r,
        "/usr/share/zoneinfo/Europe/Paris",
        include_bytes!("../../guest-sdk/testdata/zoneinfo/Europe/Paris"),
    );
    std::os::unix::fs::symlink(
        "/run/systemd/resolve/stub-resolv.conf",
        r.join("etc/resolv.conf"),
    )
    .unwrap();
    std::os::unix::fs::symlink("/usr/share/zoneinfo/Europe/Paris", r.join("etc/localtime"))
        .unwrap();
    root
}

const DNS_AND_TIME: &str = "gather_subset=!all,!min,dns,date_time";

#[test]
fn absolute_symlinks_resolve_below_the_host_root() {
    let root = root_with_absolute_links();
    let (code, report, facts) =
        run_setup(&["--root", root.path().to_str().unwrap(), "-p", DNS_AND_TIME]);
    assert_eq!(code, 0, "{report}");
    assert_eq!(
        facts["ansible_dns"],
        serde_json::json!({"nameservers": ["192.0.2.53"], "search": ["example.test"]}),
        "{report}"
    );
    let tz = &facts["ansible_date_time"]["tz"];
    assert!(tz == "CET" || tz == "CEST", "{tz}; {report}");
    assert_eq!(facts["ansible_date_time"]["tz_dst"], "CEST");
    assert_eq!(report["warnings"], serde_json::json!([]), "{report}");
}

#[test]
fn an_absolute_symlink_to_an_ungranted_path_stays_unreadable() {
    let root = root_with_absolute_links();
    let r = root.path();
    // /home is not among setup's grants, though the file is there below the root.
    put(r, "/home/resolv.conf", b"nameserver 198.51.100.1\n");
    std::fs::remove_file(r.join("etc/resolv.conf")).unwrap();
    std::os::unix::fs::symlink("/home/resolv.conf", r.join("etc/resolv.conf")).unwrap();
    let (code, report, facts) = run_setup(&["--root", r.to_str().unwrap(), "-p", DNS_AND_TIME]);
    assert_eq!(code, 0, "{report}");
    // As for a dangling link: the sandbox shows nothing there.
    assert_eq!(facts["ansible_dns"], serde_json::json!({}), "{report}");
}

#[test]
fn date_time_follows_the_tz_variable_as_ansible_does() {
    let root = root_with_absolute_links();
    let r = root.path().to_str().unwrap();
    let date_time = |tz: &str| {
        let (code, report, facts) = run_setup_with_tz(
            &["--root", r, "-p", "gather_subset=!all,!min,date_time"],
            Some(tz),
        );
        assert_eq!(code, 0, "{report}");
        facts["ansible_date_time"].clone()
    };
    // A POSIX rule; the root's /etc/localtime (Paris) is not consulted.
    let new_york = date_time("EST5EDT,M3.2.0,M11.1.0");
    assert!(
        new_york["tz"] == "EST" || new_york["tz"] == "EDT",
        "{new_york}"
    );
    assert!(["-0500", "-0400"].contains(&new_york["tz_offset"].as_str().unwrap()));
    assert_eq!(new_york["tz_dst"], "EDT");
    // Empty means UTC; a zone name is read from the root's zoneinfo.
    assert_eq!(date_time("")["tz"], "UTC");
    let paris = date_time(":Europe/Paris");
    assert!(paris["tz"] == "CET" || paris["tz"] == "CEST", "{paris}");
    // The epoch does not depend on the zone.
    let utc = date_time("UTC0");
    let (a, b): (i64, i64) = (
        utc["epoch"].as_str().unwrap().parse().unwrap(),
        paris["epoch"].as_str().unwrap().parse().unwrap(),
    );
    assert!((a - b).abs() < 60);
}
