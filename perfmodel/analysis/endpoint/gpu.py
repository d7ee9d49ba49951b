"""GPU facts from nvidia-smi, when this host has it (i.e. when the server runs here too)."""

from __future__ import annotations

import asyncio
import shutil
import subprocess

from pydantic import BaseModel, ConfigDict

from perfmodel.core.units import MiB

SAMPLE_PERIOD_S = 1.0
QUERY = ["--query-gpu=name,memory.used,memory.total", "--format=csv,noheader,nounits"]


class GpuSnapshot(BaseModel):
    """One nvidia-smi reading: per-GPU names and memory in bytes."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    names: list[str]
    used_bytes: list[float]
    total_bytes: list[float]

    @property
    def used_total_bytes(self) -> float:
        return sum(self.used_bytes)


def parse_nvidia_smi(text: str) -> GpuSnapshot | None:
    """Parse `name, used MiB, total MiB` lines; None when nothing parses."""
    names, used, total = [], [], []
    for line in text.strip().splitlines():
        parts = [p.strip() for p in line.rsplit(",", 2)]
        try:
            used.append(float(parts[1]) * MiB)
            total.append(float(parts[2]) * MiB)
        except (IndexError, ValueError):
            continue
        names.append(parts[0])
    return GpuSnapshot(names=names, used_bytes=used, total_bytes=total) if names else None


def query_gpus() -> GpuSnapshot | None:
    """One reading, or None without nvidia-smi or when it fails."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        out = subprocess.run([exe, *QUERY], capture_output=True, text=True, timeout=5, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    return parse_nvidia_smi(out.stdout)


class PeakMemory:
    """Samples nvidia-smi in the background while a level runs; keeps the peak."""

    def __init__(self) -> None:
        self.peak_bytes: float | None = None
        self._task: asyncio.Task | None = None

    async def _loop(self) -> None:
        while True:
            snap = await asyncio.to_thread(query_gpus)
            if snap is None:
                return
            self.peak_bytes = max(self.peak_bytes or 0.0, snap.used_total_bytes)
            await asyncio.sleep(SAMPLE_PERIOD_S)

    def start(self) -> None:
        if shutil.which("nvidia-smi"):
            self._task = asyncio.create_task(self._loop())

    async def stop(self) -> float | None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
        return self.peak_bytes
