"""Helpers for tests of the calibrate/ scripts: load one as a module, run a bench's --quick CPU
smoke run and read its JSON."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def load_script(path: Path):
    """Import a calibrate/ script (not a package) as a module."""
    spec = importlib.util.spec_from_file_location(path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def quick_cpu_run(script: Path, out: Path, timeout: float = 600) -> dict:
    """Run `script --quick --device cpu --out out` from the repository root; its JSON."""
    proc = subprocess.run([sys.executable, str(script), "--quick", "--device", "cpu",
                           "--out", str(out)], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(out.read_text())
