"""What a measurement ran on: the stamp every benchmark result and runtime sweep records."""
from __future__ import annotations

import os
import platform
from pathlib import Path


def machine() -> dict:
    model = ""
    try:
        model = next(line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                     if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    memory_kib = 0
    try:
        memory_kib = int(Path("/proc/meminfo").read_text().split()[1])
    except (OSError, IndexError, ValueError):
        pass
    return {"host": platform.node(), "cpu": model, "cores": os.cpu_count(), "memory_gib": round(memory_kib / 2**20, 1),
            "kernel": platform.release(), "python": platform.python_version()}
