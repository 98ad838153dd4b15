#!/usr/bin/env python3
"""Writes one journal export-format stream of synthetic entries to stdout, for
systemd-journal-remote to make a real journal file of: file FILE of FILES, TOTAL entries over
all files. Every file covers the same hours, so files interleave entry by entry. Deterministic
for given arguments. Used by bench/journal.sh and tests/all/journal.rs.

Usage: journal_stream.py FILE FILES TOTAL
"""

import random, sys
file, files, total = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
rng = random.Random(file)
out = sys.stdout.buffer
boot = "%032x" % (0xb0075 + file % 2)
words = ("started stopped failed connection accepted closed request served in ms user session "
         "opened for root from port ssh2 kernel audit type=1400 apparmor DENIED operation").split()
units = ["unit-%02d.service" % n for n in range(60)]
# Every file covers the same hours, so the files interleave entry by entry.
realtime = 1_700_000_000_000_000 + file * 7_919
chunk = []
for n in range(total // files):
    realtime += rng.randrange(1, 20_000)
    unit = units[rng.randrange(len(units))]
    shape = rng.random()
    if shape < 0.04:
        message = " ".join(rng.choice(words) for _ in range(rng.randrange(100, 400)))
    else:
        message = "%s %s #%d: %s" % (unit, rng.choice(words), n,
                                      " ".join(rng.choice(words) for _ in range(rng.randrange(3, 25))))
    pid = 1000 + (n * 7 + file) % 30000
    entry = (
        "__REALTIME_TIMESTAMP=%d\n__MONOTONIC_TIMESTAMP=%d\n_BOOT_ID=%s\n_MACHINE_ID=0123456789abcdef0123456789abcdef\n"
        "_HOSTNAME=bench-host\n_TRANSPORT=stdout\n_UID=%d\n_GID=%d\n_PID=%d\n_COMM=%s\n"
        "_SYSTEMD_UNIT=%s\n_SYSTEMD_SLICE=system.slice\n_SYSTEMD_CGROUP=/system.slice/%s\n"
        "SYSLOG_IDENTIFIER=%s\nPRIORITY=%d\nSYSLOG_FACILITY=3\nMESSAGE=%s\n"
        % (realtime, realtime - 1_699_990_000_000_000, boot, n % 3 * 500, n % 3 * 500, pid,
           unit[:15], unit, unit, unit.split(".")[0], rng.choice([3, 4, 5, 6, 6, 6, 7]), message)
    ).encode()
    if rng.random() < 0.01:
        blob = bytes(rng.randrange(256) for _ in range(rng.randrange(8, 64)))
        entry += b"BINARY\n" + len(blob).to_bytes(8, "little") + blob + b"\n"
    chunk.append(entry + b"\n")
    if len(chunk) >= 2000:
        out.write(b"".join(chunk))
        chunk = []
out.write(b"".join(chunk))
