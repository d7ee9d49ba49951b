"""Time `perfmodel validate` over every row, against the issue's 10 s budget (2-core box).

    python benchmarks/bench_validate.py [--repeat 3]

Prints, from one run: the time of the whole validation (map, predict datasheet and
calibrated, leave-one-out intervals, summaries, the measured serving points), its parts, and
the ratio budget / time.
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
from perfmodel.analysis.validation.serving_run import validate_serving  # noqa: E402
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


if __name__ == "__main__":
    main()
