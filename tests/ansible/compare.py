#!/usr/bin/env python3
"""Compare factbuoy's `setup` plugin with Ansible's `setup` module on this machine.

Runs the real `ansible -m setup` (from the venv compare.sh prepares) and the real `factbuoy plugin
run setup -o json`, then reports:

- key coverage: how many of Ansible's top-level facts factbuoy also reports (bar: 95 %);
- deterministic values: facts that do not change between two runs a second apart (host name,
  distribution, kernel, CPU counts, memory totals, mounts, interfaces and addresses, default
  routes, machine id, DNS, virtualization, service and package manager, ...), which must all be
  identical (bar: 100 %).

Exit status: 0 when both bars are met, 1 when not, 2 when a tool could not be run.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

KEY_COVERAGE_BAR = 95.0


def run_ansible(ansible, python):
    """ansible_facts from `ansible -m setup` against localhost over the local connection."""
    with tempfile.TemporaryDirectory() as tree:
        command = [
            ansible, "-i", "localhost,", "-c", "local", "localhost", "-m", "setup",
            "-e", f"ansible_python_interpreter={python}", "--tree", tree,
        ]
        done = subprocess.run(command, capture_output=True, text=True)
        path = os.path.join(tree, "localhost")
        if done.returncode != 0 or not os.path.exists(path):
            sys.exit(f"ansible -m setup failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
        with open(path) as f:
            return json.load(f)["ansible_facts"]


def run_factbuoy(factbuoy):
    """The setup plugin's artifact from the real factbuoy binary, and its warnings."""
    done = subprocess.run([factbuoy, "plugin", "run", "setup", "-o", "json"],
                          capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"factbuoy plugin run setup failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    report = json.loads(done.stdout)
    artifacts = [a for a in report["artifacts"] if a["name"] == "ansible_facts.json"]
    if not artifacts:
        sys.exit(f"factbuoy wrote no ansible_facts.json: {report}")
    content = artifacts[0]["content"]
    facts = json.loads(content) if isinstance(content, str) else content
    return facts, report.get("warnings", [])


def get(facts, path):
    """facts['a']['b'] for path 'a.b'; a missing step gives the marker MISSING."""
    value = facts
    for step in path.split("."):
        if not isinstance(value, dict) or step not in value:
            return MISSING
        value = value[step]
    return value


MISSING = "<missing>"


def as_set(value):
    if value is MISSING or value is None:
        return value
    return sorted(json.dumps(v, sort_keys=True) for v in value)


def mounts(value):
    if value is MISSING:
        return value
    return sorted((m.get("device"), m.get("mount"), m.get("fstype"), m.get("options"),
                   m.get("uuid"), m.get("block_size"), m.get("inode_total")) for m in value)


def ipv6(value):
    return as_set(value)


def deterministic_checks(ansible):
    """(name, path, normaliser) for every fact whose value must match exactly."""
    top_level = [(f"ansible_{k}", f"ansible_{k}", None) for k in [
        "hostname", "nodename", "fqdn", "domain", "system", "kernel", "kernel_version",
        "machine", "architecture", "userspace_bits", "userspace_architecture", "machine_id",
        "distribution", "distribution_version", "distribution_major_version",
        "distribution_minor_version", "distribution_release", "distribution_file_path",
        "distribution_file_variety", "distribution_file_parsed", "os_family", "lsb",
        "processor", "processor_count", "processor_cores", "processor_threads_per_core",
        "processor_vcpus", "processor_nproc", "flags", "memtotal_mb", "swaptotal_mb",
        "dns", "virtualization_type", "virtualization_role", "service_mgr", "pkg_mgr",
        "selinux", "apparmor", "fips", "is_chroot", "cmdline", "proc_cmdline",
        "system_vendor", "product_name", "product_uuid", "product_serial", "bios_vendor",
        "bios_version", "form_factor", "lvm", "iscsi_iqn", "hostnqn", "fibre_channel_wwn",
        "user_id", "user_uid", "user_gid", "user_dir", "user_shell", "real_user_id",
        "effective_user_id", "real_group_id", "effective_group_id", "device_links",
        "system_capabilities_enforced", "system_capabilities",
    ]]
    checks = top_level + [
        ("ansible_memory_mb.real.total", "ansible_memory_mb.real.total", None),
        ("ansible_memory_mb.swap.total", "ansible_memory_mb.swap.total", None),
        ("ansible_virtualization_tech_guest", "ansible_virtualization_tech_guest", as_set),
        ("ansible_virtualization_tech_host", "ansible_virtualization_tech_host", as_set),
        ("ansible_mounts (device, mount, fstype, options, uuid, block size, inodes)",
         "ansible_mounts", mounts),
        ("ansible_interfaces", "ansible_interfaces", as_set),
        ("ansible_all_ipv4_addresses", "ansible_all_ipv4_addresses", as_set),
        ("ansible_all_ipv6_addresses", "ansible_all_ipv6_addresses", as_set),
        ("ansible_locally_reachable_ips.ipv4", "ansible_locally_reachable_ips.ipv4", as_set),
        ("ansible_locally_reachable_ips.ipv6", "ansible_locally_reachable_ips.ipv6", as_set),
        ("ansible_date_time.tz", "ansible_date_time.tz", None),
        ("ansible_date_time.tz_dst", "ansible_date_time.tz_dst", None),
        ("ansible_date_time.tz_offset", "ansible_date_time.tz_offset", None),
    ]
    for family in ("ipv4", "ipv6"):
        for key in ("interface", "address", "gateway", "netmask", "network", "prefix",
                    "broadcast", "macaddress", "mtu", "type", "alias", "scope"):
            path = f"ansible_default_{family}.{key}"
            checks.append((path, path, None))
    for name in ansible.get("ansible_interfaces", []):
        fact = f"ansible_{name.replace('-', '_')}"
        for key in ("device", "macaddress", "mtu", "active", "type", "promisc", "module",
                    "pciid", "speed", "ipv4", "ipv4_secondaries", "interfaces", "slaves", "mode",
                    "features", "timestamping", "hw_timestamp_filters", "phc_index"):
            path = f"{fact}.{key}"
            checks.append((path, path, None))
        checks.append((f"{fact}.ipv6", f"{fact}.ipv6", ipv6))
    for device in ansible.get("ansible_devices", {}):
        for key in ("removable", "rotational", "sectors", "sectorsize", "size", "vendor",
                    "model", "scheduler_mode", "support_discard", "virtual", "holders",
                    "partitions", "links", "serial", "wwn", "host"):
            path = f"ansible_devices.{device}.{key}"
            checks.append((path, path, None))
    # Only what Ansible reports here is compared: a fact missing from both proves nothing, so
    # it counts neither as identical nor as different. main() lists the ones left out.
    return checks


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--factbuoy", required=True, help="the factbuoy binary to test")
    parser.add_argument("--ansible", required=True, help="the ansible program")
    parser.add_argument("--python", required=True, help="the Python Ansible runs its module with")
    parser.add_argument("--show-values", action="store_true", help="print both values of each mismatch in full")
    args = parser.parse_args()

    ansible = run_ansible(args.ansible, args.python)
    factbuoy, warnings = run_factbuoy(args.factbuoy)

    ansible_keys = set(ansible)
    present = ansible_keys & set(factbuoy)
    missing = sorted(ansible_keys - set(factbuoy))
    extra = sorted(set(factbuoy) - ansible_keys)
    coverage = 100.0 * len(present) / len(ansible_keys)

    candidates = deterministic_checks(ansible)
    checks = [c for c in candidates if get(ansible, c[1]) is not MISSING]
    not_reported = sorted({c[0] for c in candidates if get(ansible, c[1]) is MISSING})
    mismatches = []
    for name, path, normalise in checks:
        a, f = get(ansible, path), get(factbuoy, path)
        if normalise:
            a, f = normalise(a), normalise(f)
        if a != f:
            mismatches.append((name, a, f))
    identical = 100.0 * (len(checks) - len(mismatches)) / len(checks)

    print(f"setup vs ansible -m setup on {ansible.get('ansible_hostname')} "
          f"({ansible.get('ansible_distribution')} {ansible.get('ansible_distribution_version')})")
    print(f"  key coverage:          {len(present)}/{len(ansible_keys)} of Ansible's keys = "
          f"{coverage:.1f} % (bar {KEY_COVERAGE_BAR:.0f} %)")
    print(f"  deterministic values:  {len(checks) - len(mismatches)}/{len(checks)} identical = "
          f"{identical:.1f} % (bar 100 %)")
    if missing:
        print(f"  keys Ansible has and factbuoy lacks: {', '.join(missing)}")
    if not_reported:
        listed = not_reported if args.show_values else not_reported[:8]
        more = "" if len(listed) == len(not_reported) else ", ... (--show-values lists all)"
        print(f"  not compared, as Ansible reports none of them here: {len(not_reported)} "
              f"facts ({', '.join(listed)}{more})")
    if extra:
        print(f"  keys factbuoy has and Ansible lacks: {', '.join(extra)}")
    for name, a, f in mismatches:
        a_text, f_text = json.dumps(a, sort_keys=True), json.dumps(f, sort_keys=True)
        if not args.show_values:
            a_text, f_text = a_text[:300], f_text[:300]
        print(f"  DIFFERENT {name}:\n    ansible:  {a_text}\n    factbuoy: {f_text}")
    if warnings:
        print(f"  factbuoy warnings: {warnings}")

    ok = coverage >= KEY_COVERAGE_BAR and not mismatches
    print("PASS" if ok else "FAIL: below the bar")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
