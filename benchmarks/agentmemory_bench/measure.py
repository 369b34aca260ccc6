"""Measurement helpers: timers, percentiles, resident memory, directory sizes."""

from __future__ import annotations

import ctypes
import gc
import math
import os
import platform
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_LIBC: Any = None


def rss_bytes() -> int:
    """Resident set size of this process (Linux ``/proc``; 0 where unavailable)."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def settle() -> int:
    """Collect garbage and hand freed heap back to the OS (glibc ``malloc_trim``), so RSS deltas
    of later phases are not hidden by memory freed earlier; returns the RSS after."""
    global _LIBC
    gc.collect()
    if _LIBC is None:
        try:
            _LIBC = ctypes.CDLL("libc.so.6")
        except OSError:
            _LIBC = False
    if _LIBC:
        try:
            _LIBC.malloc_trim(0)
        except AttributeError:
            pass
    return rss_bytes()


def dir_size(path: Path) -> int:
    """Total bytes of the regular files under ``path`` (or of ``path`` itself)."""
    if path.is_file():
        return path.stat().st_size
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += (Path(root) / name).stat().st_size
            except OSError:
                pass
    return total


@dataclass
class Latencies:
    """Per-call wall times in seconds."""

    samples: list[float]

    def pct(self, q: float) -> float | None:
        """The ``q``-th percentile in milliseconds (nearest rank), None when empty."""
        if not self.samples:
            return None
        ordered = sorted(self.samples)
        idx = min(len(ordered) - 1, max(0, math.ceil(q / 100.0 * len(ordered)) - 1))
        return ordered[idx] * 1000.0

    def summary(self) -> dict[str, Any]:
        """p50/p95/mean in ms and the sample count."""
        return {
            "p50_ms": self.pct(50),
            "p95_ms": self.pct(95),
            "mean_ms": statistics.fmean(self.samples) * 1000.0 if self.samples else None,
            "count": len(self.samples),
        }


def timed_loop(
    fn: Callable[[int], Any], count: int, *, budget_s: float, min_count: int = 5, warmup: int = 1
) -> tuple[Latencies, list[Any]]:
    """Call ``fn(i)`` for i in 0..count-1, timing each call; stop early once ``budget_s`` is spent
    (after at least ``min_count`` calls). ``warmup`` untimed calls run first on i=0.."""
    for i in range(min(warmup, count)):
        fn(i)
    samples: list[float] = []
    results: list[Any] = []
    start = time.perf_counter()
    for i in range(count):
        t0 = time.perf_counter()
        results.append(fn(i))
        samples.append(time.perf_counter() - t0)
        if i + 1 >= min_count and time.perf_counter() - start > budget_s:
            break
    return Latencies(samples), results


def ratio(value: float | None, reference: float | None) -> float | None:
    """value / reference, None when either is missing or the reference is 0."""
    if value is None or reference is None or reference == 0:
        return None
    return value / reference


def machine_info() -> dict[str, Any]:
    """What the numbers were measured on."""
    info: dict[str, Any] = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
    }
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("model name"):
                    info["cpu"] = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        info["mem_gib"] = round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)
    except (ValueError, OSError):
        pass
    try:
        info["loadavg"] = [round(x, 2) for x in os.getloadavg()]
    except OSError:
        pass
    return info


def versions(names: Sequence[str]) -> dict[str, str | None]:
    """Installed versions of the given distributions (None when absent)."""
    from importlib import metadata

    out: dict[str, str | None] = {}
    for name in names:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out
