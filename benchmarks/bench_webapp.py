"""Calculator rerun time through streamlit.testing's AppTest (the budget is 300 ms on a
2-core machine). Prints, measured in one run:
  - a rerun after an input change that misses every cache (new batch each time),
  - a rerun with nothing changed (every perfmodel call cached),
  - the first run of a session (imports excluded: one warm-up run first).
    python benchmarks/bench_webapp.py [--reruns 20]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

from streamlit.testing.v1 import AppTest

APP = str(Path(__file__).resolve().parent.parent / "app.py")
BUDGET_S = 0.300


def timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def summary(name: str, xs: list[float]) -> str:
    xs = sorted(xs)
    p90 = xs[min(len(xs) - 1, int(round(0.9 * (len(xs) - 1))))]
    return (f"{name:<34} median {1e3 * statistics.median(xs):6.0f} ms   p90 {1e3 * p90:6.0f} ms   "
            f"max {1e3 * xs[-1]:6.0f} ms   (n={len(xs)})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reruns", type=int, default=20)
    args = ap.parse_args()
    AppTest.from_file(APP, default_timeout=120).run()           # imports, catalog, caches

    first = []
    for _ in range(3):
        at = AppTest.from_file(APP, default_timeout=120)
        first.append(timed(at.run))
    assert not at.exception, at.exception

    changed = []
    for i in range(args.reruns):                                # batches never seen before
        at.sidebar.number_input(key="w_batch").set_value(9 + 7 * i)
        changed.append(timed(at.run))
        assert not at.exception and at.metric, "calculator did not render"
    same = [timed(at.run) for _ in range(args.reruns)]

    print(f"Calculator page, AppTest, {os.cpu_count()} CPUs; budget {1e3 * BUDGET_S:.0f} ms per rerun")
    print(summary("rerun, input changed (cache miss)", changed))
    print(summary("rerun, nothing changed (cached)", same))
    print(summary("first run of a new session", first))
    ratio = statistics.median(changed) / BUDGET_S
    print(f"input-changed rerun / budget = {ratio:.2f} ({'within' if ratio <= 1 else 'OVER'} budget)")


if __name__ == "__main__":
    main()
