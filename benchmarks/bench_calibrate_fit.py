"""Time `perfmodel calibrate fit` on the committed H200 raw run, this tree against a git ref
("before"), against issue 17's 10 s budget (2-core box shared with other work).

    python benchmarks/bench_calibrate_fit.py [--before 791fea0] [--repeat 3] [--raw PATH]

The ref's perfmodel/ is unpacked with `git archive` into a temporary folder; both versions run
as fresh processes (`python -m perfmodel calibrate fit RAW --gpu h200-sxm --out TMP`),
interleaved (before, after, before, after, ...) so that load from other processes falls on
both alike. Prints per version the median wall time and the median CPU time of the process
(user + system: what the code costs, whatever the load), and the ratios before / after.
"""

from __future__ import annotations

import argparse
import io
import os
import resource
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RAW = ROOT / "calibrate" / "data" / "raw-h200-sxm-20261201.json"
BUDGET_S = 10.0
BEFORE = "791fea0"   # main when issue 17's calibrate-fit item was taken up


def unpack(ref: str, dest: Path) -> Path:
    tar = subprocess.run(["git", "-C", str(ROOT), "archive", ref, "perfmodel", "hardware_db"],
                         capture_output=True, check=True).stdout
    with tarfile.open(fileobj=io.BytesIO(tar)) as t:
        t.extractall(dest, filter="data")
    return dest


def run_once(code_root: Path, raw: Path, out: Path) -> tuple[float, float]:
    """(wall s, CPU s) of one `calibrate fit` process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "perfmodel", "calibrate", "fit", str(raw),
                           "--gpu", "h200-sxm", "--out", str(out)], cwd=code_root,
                          env={**os.environ, "PYTHONPATH": str(code_root)},
                          capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"calibrate fit failed in {code_root}: {proc.stderr[-500:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", default=BEFORE, help=f"git ref of the 'before' code (default {BEFORE})")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--raw", type=Path, default=RAW)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        old = unpack(args.before, Path(tmp) / "before")
        runs: dict[str, list[tuple[float, float]]] = {"before": [], "after": []}
        for i in range(args.repeat):
            runs["before"].append(run_once(old, args.raw.resolve(), Path(tmp) / f"b{i}.yaml"))
            runs["after"].append(run_once(ROOT, args.raw.resolve(), Path(tmp) / f"a{i}.yaml"))
    med = {k: (statistics.median(w for w, _ in v), statistics.median(c for _, c in v))
           for k, v in runs.items()}
    print(f"perfmodel calibrate fit {args.raw.name} --gpu h200-sxm, {args.repeat} runs each, "
          f"interleaved; os.cpu_count()={os.cpu_count()}, load avg {os.getloadavg()[0]:.1f}")
    print(f"{'version':<28}{'wall s (median)':>16}{'CPU s (median)':>16}")
    print(f"{'before (' + args.before + ')':<28}{med['before'][0]:>16.2f}{med['before'][1]:>16.2f}")
    print(f"{'after (this tree)':<28}{med['after'][0]:>16.2f}{med['after'][1]:>16.2f}")
    print(f"ratio before/after: wall {med['before'][0] / med['after'][0]:.2f}x, "
          f"CPU {med['before'][1] / med['after'][1]:.2f}x; budget {BUDGET_S:.0f} s / after wall = "
          f"{BUDGET_S / med['after'][0]:.2f}")


if __name__ == "__main__":
    main()
