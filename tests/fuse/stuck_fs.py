#!/usr/bin/env python3
"""A FUSE file system of one regular file, `stuck`, whose reads never return: what a hung
network file system looks like to a process reading it. tests/sandbox.rs mounts it below a
plugin's grant to get a plugin stuck inside a host call.

Usage: stuck_fs.py MOUNTPOINT   (runs in the foreground until unmounted or killed)
"""

import errno
import stat
import sys
import threading
import time

from fuse import FUSE, FuseOSError, Operations

NEVER = threading.Event()


class Stuck(Operations):
    def getattr(self, path, fh=None):
        now = time.time()
        if path == "/":
            return {"st_mode": stat.S_IFDIR | 0o755, "st_nlink": 2,
                    "st_atime": now, "st_mtime": now, "st_ctime": now}
        if path == "/stuck":
            return {"st_mode": stat.S_IFREG | 0o444, "st_nlink": 1, "st_size": 4096,
                    "st_atime": now, "st_mtime": now, "st_ctime": now}
        raise FuseOSError(errno.ENOENT)

    def readdir(self, path, fh):
        return [".", "..", "stuck"]

    def open(self, path, flags):
        return 0

    def read(self, path, size, offset, fh):
        NEVER.wait()
        return b""


if __name__ == "__main__":
    FUSE(Stuck(), sys.argv[1], foreground=True, nothreads=False, allow_other=False)
