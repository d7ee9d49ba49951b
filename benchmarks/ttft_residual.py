"""The aggregated serving rows outside the TTFT band, by class, rule and group, with the doc
section that accounts for each (the rules: perfmodel/analysis/validation/ttft_residual.py;
the account: docs/ttft_residual.md).

    perfmodel validate --serving-predictor sim --json > V.json
    python benchmarks/ttft_residual.py V.json [--data CSV] [--rules] [--groups]

Prints the row-count arithmetic of the "TTFT within 25% >= 80%" target, then the rows outside
per class, (--rules) per rule, (--groups) per (engine, version, model, GPU, weights).
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import statistics as st
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from perfmodel.analysis.validation import ttft_residual as tr  # noqa: E402
from perfmodel.analysis.validation.serving_run import DEFAULT_SERVING  # noqa: E402


def _med(xs) -> str:
    return f"{st.median(xs):.2f}" if xs else "-"


def _table(header: tuple, rows: list[tuple]) -> None:
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for r in rows:
        print("| " + " | ".join(str(x) for x in r) + " |")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("validate_json", help="a `perfmodel validate --serving-predictor sim --json` result")
    ap.add_argument("--data", default=str(DEFAULT_SERVING), help="the serving file it was run on")
    ap.add_argument("--rules", action="store_true", help="rows outside per rule")
    ap.add_argument("--groups", action="store_true", help="rows outside per group")
    a = ap.parse_args(argv)
    rep = json.loads(Path(a.validate_json).read_text())
    rep = rep.get("serving", rep)
    rows = [r for r in rep["rows"] if r["mode"] == "agg"]
    with open(a.data, newline="") as f:
        csv_rows = {c["id"]: c for c in csv.DictReader(f)}
    cls = tr.classify(rows, csv_rows)
    ratio = {r["row_id"]: r["predicted_ttft_s"] / r["measured_ttft_s"] for r in rows}
    n, out = len(rows), len(cls)
    need = math.ceil(tr.TARGET_SHARE * n)
    print(f"aggregated rows {n}; within 25% {n - out} ({100 * (n - out) / n:.1f}%); the target "
          f"needs {need} ({need - (n - out)} more); outside {out}, "
          f"{sum(ratio[i] < 1 for i in cls)} of them predicted too fast\n")
    by_cls, by_rule = defaultdict(list), defaultdict(list)
    for rid, key in cls.items():
        by_cls[key[1]].append(rid)
        by_rule[key].append(rid)
    _table(("class", "rows outside", "too fast", "too slow", "median pred/meas"),
           [(k, len(v), sum(ratio[i] < 1 for i in v), sum(ratio[i] >= 1 for i in v),
             _med([ratio[i] for i in v])) for k, v in sorted(by_cls.items())])
    if a.rules:
        print()
        _table(("class", "rule", "doc", "rows outside", "too fast", "median pred/meas"),
               [(k[1], k[0], k[2], len(v), sum(ratio[i] < 1 for i in v), _med([ratio[i] for i in v]))
                for k, v in sorted(by_rule.items(), key=lambda kv: (kv[0][1], -len(kv[1])))])
    if a.groups:
        g = defaultdict(list)
        for r in rows:
            g[(r["engine"], r["engine_version"] or "-", r["model"], r["gpu"],
               r["precision"].split()[0][2:])].append(r)
        lines = []
        for k in sorted(g, key=lambda k: -sum(r["row_id"] in cls for r in g[k])):
            o = [r["row_id"] for r in g[k] if r["row_id"] in cls]
            if o:
                ks = defaultdict(int)
                for i in o:
                    ks[cls[i][1]] += 1
                lines.append((*k, len(g[k]), len(o), sum(ratio[i] < 1 for i in o),
                              _med([ratio[r["row_id"]] for r in g[k]]), _med([ratio[i] for i in o]),
                              " ".join(f"{c}:{v}" for c, v in sorted(ks.items()))))
        print()
        _table(("engine", "version", "model", "GPU", "weights", "rows", "outside", "too fast",
                "pred/meas, all", "pred/meas, outside", "classes"), lines)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
