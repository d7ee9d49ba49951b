"""Time `perfmodel validate` over every row, against the issue's 10 s budget (2-core box).

    python benchmarks/bench_validate.py [--repeat 3] [--sample 20]

Prints, from one run: the time of the whole validation (map, predict datasheet and
calibrated, leave-one-out intervals, summaries, the measured serving points), its parts, and
the ratio budget / time; then the serving predictors side by side on a sample of
configurations (steady-state formulas vs the step-level simulator, when present).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from perfmodel.analysis.validation.run import default_data, load_rows, validate  # noqa: E402
from perfmodel.analysis.validation.mapping import map_rows  # noqa: E402
from perfmodel.analysis.validation.predictors import predict_target  # noqa: E402
from perfmodel.analysis.validation.report import accuracy_markdown  # noqa: E402
from perfmodel.analysis.validation.serving_run import DEFAULT_SERVING, validate_serving  # noqa: E402
from perfmodel.analysis.validation import serving_predict as sp  # noqa: E402
from perfmodel.analysis.validation.serving_map import map_serving_rows  # noqa: E402
from perfmodel.analysis.validation.serving_table import read_serving  # noqa: E402
from perfmodel.core.errors import PerfModelError  # noqa: E402

BUDGET_S = 10.0


def timed(fn, repeat: int) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--sample", type=int, default=20,
                    help="serving configurations timed with both predictors")
    args = ap.parse_args()
    t_first, _ = timed(validate, 1)                       # includes imports' lazy caches
    t_all, rep = timed(validate, args.repeat)
    rows = load_rows(default_data())
    t_map, (targets, _) = timed(lambda: map_rows(rows), args.repeat)

    def predict_all():
        n = 0
        for t in targets:
            try:
                predict_target(t)
                n += 1
            except PerfModelError:
                pass
        return n

    t_pred, n_pred = timed(predict_all, args.repeat)
    t_doc, _ = timed(lambda: accuracy_markdown(rep), args.repeat)
    t_srv, srv = timed(lambda: validate_serving(predictor="steady"), args.repeat)
    print(f"cpus: {os.cpu_count()}; rows: {len(rows)} ({len(rep.rows)} predicted, "
          f"{len(rep.unmapped)} unmapped)")
    print(f"validate, first call:      {t_first:7.3f} s")
    print(f"validate, warm (median):   {t_all:7.3f} s  = {1e3 * t_all / len(rows):.2f} ms/row")
    print(f"  mapping only:            {t_map:7.3f} s")
    print(f"  datasheet predictions:   {t_pred:7.3f} s  ({n_pred} rows)")
    print(f"  markdown report:         {t_doc:7.3f} s")
    print(f"  serving points (steady): {t_srv:7.3f} s  ({len(srv.rows)} of {srv.n_rows} rows, "
          f"{len({(r.model, r.gpu, r.engine, r.parallel, r.precision, r.prompt_tokens, r.output_tokens) for r in srv.rows})} "
          "configurations)")
    print(f"budget {BUDGET_S:.0f} s / warm validate = {BUDGET_S / t_all:.1f}x headroom "
          f"({BUDGET_S / t_first:.1f}x for the first call)")
    serving_predictors(args.sample)


def serving_predictors(n_sample: int) -> None:
    """Steady-state vs simulator on the same sample of serving configurations (every k-th),
    and the simulator's whole-file time extrapolated from it."""
    avail = sp.predictors()
    if "sim" not in avail:
        print("serving simulator: not in this checkout")
        return
    targets, _ = map_serving_rows(read_serving(DEFAULT_SERVING), avail["sim"].capabilities)
    configs: dict[tuple, list] = {}
    for t in targets:
        configs.setdefault(t.config(), []).append(t)
    keys = list(configs)[:: max(1, len(configs) // n_sample)]
    sample = [t for k in keys for t in configs[k]]
    t_st, _ = timed(lambda: sp.predict_targets(sample, avail["steady"]), 1)
    t_sim, _ = timed(lambda: sp.predict_targets(sample, avail["sim"]), 1)
    full = t_sim * len(configs) / len(keys)
    print(f"serving sample: {len(keys)} of {len(configs)} configurations ({len(sample)} rows)")
    print(f"  steady-state:            {t_st:7.3f} s")
    print(f"  simulator:               {t_sim:7.3f} s  = {t_sim / t_st:.1f}x steady-state; "
          f"whole file ~{full:.0f} s (budget / that = {BUDGET_S / full:.2f}x)")


if __name__ == "__main__":
    main()
