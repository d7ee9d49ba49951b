"""Run environment and result files of the calibrate/ benchmarks. torch + the standard library.

env_section: one device (bench.py); nccl_env_section: the GPUs of one host (bench_nccl.py).
write_json: atomic (a temporary file, then a rename); non-finite floats become null.
The fields are documented in the docstrings of bench.py and bench_nccl.py.
"""
from __future__ import annotations

import datetime
import json
import math
import os
import platform
import socket
import subprocess
import sys

try:
    import torch
except ImportError:  # the scripts report a missing torch themselves
    torch = None


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def log_rank0(msg: str) -> None:
    """log() on the process of rank 0 (torchrun's RANK) only."""
    if int(os.environ.get("RANK", "0")) == 0:
        log(msg)


def one_line(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}".strip().splitlines()
    return text[0][:300] if text else type(exc).__name__


def date_utc() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


# ----------------------------------------------------------------------------- one device

def nvidia_smi() -> dict | None:
    query = "driver_version,clocks.sm,clocks.mem,clocks.max.sm"
    try:
        out = subprocess.run(["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=15, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    fields = [f.strip() for f in out.strip().splitlines()[0].split(",")] if out.strip() else []
    if len(fields) != 4:
        return {"raw": out.strip()}

    def mhz(s):
        try:
            return float(s.split()[0])
        except (ValueError, IndexError):
            return None
    return {"driver_version": fields[0], "clocks_sm_mhz": mhz(fields[1]),
            "clocks_mem_mhz": mhz(fields[2]), "clocks_max_sm_mhz": mhz(fields[3])}


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def cpu_info() -> dict:
    """The host CPU from /proc/cpuinfo (Linux): model, vendor/family/model/stepping, and the
    clock each core reports ("cpu MHz": median, min, max over cores), plus the cpufreq maximum
    where the kernel exposes it. Host-bound timings (eager, HF generate) depend on these."""
    info: dict = {"model_name": None, "vendor_id": None, "family": None, "model": None,
                  "stepping": None, "mhz_median": None, "mhz_min": None, "mhz_max": None,
                  "cpufreq_max_mhz": None, "logical_cpus": os.cpu_count(), "source": "/proc/cpuinfo"}
    mhz = []
    keys = {"model name": "model_name", "vendor_id": "vendor_id", "cpu family": "family",
            "model": "model", "stepping": "stepping"}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                key, value = key.strip(), value.strip()
                if key == "cpu MHz":
                    try:
                        mhz.append(float(value))
                    except ValueError:
                        pass
                elif key in keys and info[keys[key]] is None:
                    info[keys[key]] = value
    except OSError as exc:
        info["source"] = f"unavailable: {one_line(exc)}"
        info["model_name"] = platform.processor() or platform.machine()
    if mhz:
        mhz.sort()
        info.update(mhz_median=mhz[len(mhz) // 2], mhz_min=mhz[0], mhz_max=mhz[-1])
    try:
        with open("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq") as f:
            info["cpufreq_max_mhz"] = int(f.read().strip()) / 1000.0
    except (OSError, ValueError):
        pass
    return info


def env_section(device: str) -> dict:
    env = {"device": device, "torch_version": torch.__version__,
           "cuda_version": torch.version.cuda, "python_version": platform.python_version(),
           "hostname": socket.gethostname(), "date_utc": date_utc(),
           "argv": sys.argv, "cpu_name": cpu_name(), "cpu": cpu_info(), "cpu_count": os.cpu_count(),
           "torch_threads": torch.get_num_threads(), "gpu_name": None,
           "compute_capability": None, "sm_count": None, "l2_bytes": None,
           "total_memory_bytes": None, "nvidia_smi_before": None, "nvidia_smi_after": None}
    if device == "cuda":
        p = torch.cuda.get_device_properties(0)
        env.update(gpu_name=p.name, compute_capability=[p.major, p.minor],
                   sm_count=p.multi_processor_count, l2_bytes=getattr(p, "L2_cache_size", None),
                   total_memory_bytes=p.total_memory, nvidia_smi_before=nvidia_smi())
    return env


# ----------------------------------------------------------------------------- GPUs of one host

MULTICAST_VARS = ("NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST", "NVSHMEM_DISABLE_NVLS")


def sh(cmd: list[str]) -> str:
    """A command's stdout, or "unavailable: <why>"."""
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=20).stdout.strip()
    except (OSError, subprocess.SubprocessError) as exc:
        return f"unavailable: {one_line(exc)}"


def nccl_env_section(cuda: bool) -> dict:
    nccl = None
    if cuda:
        try:
            v = torch.cuda.nccl.version()
            nccl = ".".join(map(str, v)) if isinstance(v, tuple) else str(v)
        except Exception as exc:  # noqa: BLE001 -- recorded, not fatal
            nccl = f"unavailable: {one_line(exc)}"
    return {"torch_version": torch.__version__, "cuda_version": torch.version.cuda,
            "nccl_version": nccl, "python_version": platform.python_version(),
            "hostname": socket.gethostname(), "date_utc": date_utc(),
            "gpu_names": [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
            if cuda else [],
            "driver_version": sh(["nvidia-smi", "--query-gpu=driver_version",
                                  "--format=csv,noheader"]).splitlines()[:1] if cuda else None,
            "topo": sh(["nvidia-smi", "topo", "-m"]) if cuda else None,
            "cpu_count": os.cpu_count(),
            "multicast_env": {k: os.environ.get(k) for k in MULTICAST_VARS}}


# ----------------------------------------------------------------------------- result file

def finite(obj):
    """JSON without NaN/inf: non-finite floats become null."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [finite(v) for v in obj]
    return obj


def write_json(path: str, result: dict) -> None:
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(finite(result), f, indent=1, allow_nan=False)
        f.write("\n")
    os.replace(tmp, path)
