"""What the run ran on: CPU, memory, OS, file system, Python and library versions.

Recorded in results.json under ``machine`` so that numbers are never read
without their context.
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from typing import Any

__all__ = ["machine_info", "filesystem_of"]


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _memory_bytes() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def filesystem_of(path: str) -> dict[str, str] | None:
    """The mount (device, mount point, type) holding ``path``, from /proc/mounts."""
    try:
        with open("/proc/mounts", encoding="utf-8") as f:
            mounts = [line.split()[:3] for line in f if len(line.split()) >= 3]
    except OSError:
        return None
    target = os.path.realpath(path)
    best = None
    for device, mount_point, fstype in mounts:
        mp = mount_point.replace("\\040", " ")
        if target == mp or target.startswith(mp.rstrip("/") + "/") or mp == "/":
            if best is None or len(mp) > len(best[1]):
                best = (device, mp, fstype)
    if best is None:
        return None
    return {"device": best[0], "mount_point": best[1], "type": best[2]}


def _git_commit() -> str | None:
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    try:
        out = subprocess.run(["git", "-C", root, "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True, timeout=5, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def machine_info(db_root: str, engine_versions: dict[str, str]) -> dict[str, Any]:
    uname = platform.uname()
    return {
        "cpu": _cpu_model(),
        "cores": os.cpu_count(),
        "memory_bytes": _memory_bytes(),
        "os": f"{uname.system} {uname.release}",
        "python": f"{platform.python_implementation()} {sys.version.split()[0]}",
        "db_filesystem": filesystem_of(db_root),
        "proc_self_io": os.path.exists("/proc/self/io"),
        "engine_versions": engine_versions,
        "lsmkv_commit": _git_commit(),
    }
