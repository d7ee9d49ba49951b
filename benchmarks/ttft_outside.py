"""The aggregated serving rows outside the TTFT band, by class, rule and group, with the doc
section that accounts for each (the rules: benchmarks/ttft_outside_rules.py;
the account: docs/ttft_outside.md).

    perfmodel validate --serving-predictor sim --json > V.json
    python benchmarks/ttft_outside.py V.json [--data CSV] [--rules] [--groups]
    python benchmarks/ttft_outside.py --replay ROW_ID [--range-ratio R]
    python benchmarks/ttft_outside.py --what-if-range-ratio R

Prints the row-count arithmetic of the "TTFT within 25% >= 80%" target, then the rows outside
per class, (--rules) per rule, (--groups) per (engine, version, model, GPU, weights).
--replay: one row simulated as `validate` simulates it, its steps (the first 24 segments of the
timeline) and its mean TTFT/TPOT; --range-ratio replaces its recipe's length spread (a what-if).
--what-if-range-ratio: every aggregated AIConfigurator-harness row ("aic" recipe) predicted
with its recipe and with that length spread, TTFT median error / rows within 25% per group.
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
sys.path.insert(0, str(Path(__file__).resolve().parent))

import ttft_outside_rules as tr  # noqa: E402  (this folder: the rules, kept out of the validation code)
from perfmodel.analysis.validation.serving_run import DEFAULT_SERVING  # noqa: E402


def _med(xs) -> str:
    return f"{st.median(xs):.2f}" if xs else "-"


def _table(header: tuple, rows: list[tuple]) -> None:
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for r in rows:
        print("| " + " | ".join(str(x) for x in r) + " |")


def _targets():
    from perfmodel.analysis.validation import serving_predict as sp
    from perfmodel.analysis.validation.serving_map import map_serving_rows
    from perfmodel.analysis.validation.serving_table import read_serving
    pred = sp.get_predictor("sim")
    targets, _ = map_serving_rows(read_serving(DEFAULT_SERVING), pred.capabilities)
    return sp, pred, targets


def replay(row_id: str, range_ratio: float | None) -> None:
    from perfmodel import api
    from perfmodel.serving.report import serve_report
    sp, _, targets = _targets()
    t = next((t for t in targets if t.measurement.get("id") == row_id), None)
    if t is None or (t.prefill and t.decode):
        raise SystemExit(f"no aggregated row {row_id!r} in {DEFAULT_SERVING}")
    ep = t.ep if t.recipe.expert_parallel is None or not t.moe else t.recipe.expert_parallel
    dp = t.attention_dp if t.recipe.attention_dp is None else t.recipe.attention_dp
    specs = sp._Specs()
    rr = t.recipe.range_ratio if range_ratio is None else range_ratio
    q = api.make_query(model=specs.model(t.model), gpu=specs.gpu(t.gpu), weights=t.weights,
                       kv=t.kv, activations=t.activations, engine=t.engine,
                       tp=t.tp * t.attention_dp // dp, pp=t.pp, ep=ep, dp=dp,
                       prompt_tokens=t.prompt, output_tokens=t.output, range_ratio=rr)
    sc, warnings, assumptions = api.resolve(q)
    sc = sp._with_recipe(sc, t.recipe)
    p = serve_report(q, sc, warnings, assumptions, concurrencies=[t.concurrency],
                     timeline=True).points[0]
    m = t.measurement
    print(f"{row_id}: C={t.concurrency} {t.prompt}/{t.output}, range ratio {rr}, "
          f"limits (max seqs, token budget) {sc.engine.scheduler.limits(sc.hw, sc.dep.pp)}")
    print(f"TTFT mean {p.ttft_mean_s * 1e3:.1f} ms (measured {float(m.get('silicon_ttft_ms')):.1f}), "
          f"TPOT mean {p.tpot_mean_s * 1e3:.2f} ms (measured {float(m.get('silicon_tpot_ms')):.2f})")
    tl = p.timeline
    _table(("start ms", "duration ms", "steps", "decode rows", "prompt tokens", "waiting"),
           [(f"{tl.start_s[i] * 1e3:.1f}", f"{tl.duration_s[i] * 1e3:.1f}", tl.steps[i],
             tl.decode_rows[i], f"{tl.prefill_tokens[i]:.0f}", tl.waiting[i])
            for i in range(min(24, len(tl.start_s)))])


def what_if_range_ratio(rr: float) -> None:
    sp, pred, targets = _targets()
    sel = [t for t in targets if t.recipe.family == "aic" and not (t.prefill and t.decode)]
    alt = [t.model_copy(update={"recipe": t.recipe.model_copy(update={"range_ratio": rr})})
           for t in sel]
    before, _ = sp.predict_targets(sel, pred)
    after, _ = sp.predict_targets(alt, pred)
    g = defaultdict(list)
    for t, b, a in zip(sel, before, after):
        if b is None or a is None:
            continue
        m = t.measurement
        meas = float(m.get("silicon_ttft_ms")) / 1e3
        key = (m.get("backend"), m.get("backend_version") or "-", t.model, t.gpu,
               f"ISL {'<=' if t.prompt <= 1024 else '>'} 1024")
        g[key].append((abs(b.ttft_s - meas) / meas, abs(a.ttft_s - meas) / meas))
        g[("all",)].append(g[key][-1])
    _table(("rows", "n", "TTFT error, recipe", f"range ratio {rr}", "within 25%, recipe",
            f"range ratio {rr}"),
           [(" ".join(k), len(v), f"{100 * st.median(x for x, _ in v):.1f}%",
             f"{100 * st.median(y for _, y in v):.1f}%", sum(x <= tr.BAND for x, _ in v),
             sum(y <= tr.BAND for _, y in v)) for k, v in sorted(g.items(), key=lambda kv: -len(kv[1]))])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("validate_json", nargs="?",
                    help="a `perfmodel validate --serving-predictor sim --json` result")
    ap.add_argument("--replay", metavar="ROW_ID", help="simulate one row with its timeline")
    ap.add_argument("--range-ratio", type=float, help="with --replay: the length spread")
    ap.add_argument("--what-if-range-ratio", type=float, metavar="R",
                    help="the AIConfigurator-harness rows with length spread R")
    ap.add_argument("--data", default=str(DEFAULT_SERVING), help="the serving file it was run on")
    ap.add_argument("--rules", action="store_true", help="rows outside per rule")
    ap.add_argument("--groups", action="store_true", help="rows outside per group")
    a = ap.parse_args(argv)
    if a.replay:
        replay(a.replay, a.range_ratio)
        return 0
    if a.what_if_range_ratio is not None:
        what_if_range_ratio(a.what_if_range_ratio)
        return 0
    if not a.validate_json:
        ap.error("give a validate JSON, --replay or --what-if-range-ratio")
    try:
        rep = json.loads(Path(a.validate_json).read_text())
        rep = rep.get("serving", rep)
        rows = [r for r in rep["rows"] if r["mode"] == "agg"]
        with open(a.data, newline="") as f:
            csv_rows = {c["id"]: c for c in csv.DictReader(f)}
        cls = tr.classify(rows, csv_rows)
    except (OSError, ValueError, KeyError, AttributeError, TypeError) as exc:
        print(f"error: cannot read {a.validate_json} against {a.data}: "
              f"{type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    if not rows:
        print(f"error: no aggregated rows in {a.validate_json}", file=sys.stderr)
        return 2
    ratio = {r["row_id"]: r["predicted_ttft_s"] / r["measured_ttft_s"] for r in rows}
    n, out = len(rows), len(cls)
    need = math.ceil(tr.TARGET_SHARE * n)
    print(f"aggregated rows {n}; within 25% {n - out} ({100 * (n - out) / n:.1f}%); the target "
          f"needs {need} ({need - (n - out)} more); outside {out}, "
          f"{sum(ratio[i] < 1 for i in cls)} of them predicted too fast\n")
    pairs = tr.falling_pairs(list(csv_rows.values()))
    ape = {r["row_id"]: r["ttft_ape"] for r in rows}
    in_pairs = {i for p in pairs for i in p if i in ape}
    inside = sum(ape[i] <= tr.BAND for i in in_pairs)
    print(f"falling pairs {len(pairs)} over {len(in_pairs)} rows, {inside} of them within 25% now; "
          f"at most {tr.most_inside(pairs)} can be at once (class a gains at most "
          f"{tr.most_inside(pairs) - inside} rows)")
    meas = {r["row_id"]: (r["measured_ttft_s"], r["measured_tpot_s"]) for r in rows}
    print(f"distinct measurements (TTFT, TPOT) among the rows outside: "
          f"{len({meas[i] for i in cls})} of {out}\n")
    by_cls, by_rule = defaultdict(list), defaultdict(list)
    for rid, key in cls.items():
        by_cls[key[1]].append(rid)
        by_rule[key].append(rid)
    _table(("class", "rows outside", "distinct measurements", "too fast", "too slow",
            "median pred/meas"),
           [(k, len(v), len({meas[i] for i in v}), sum(ratio[i] < 1 for i in v),
             sum(ratio[i] >= 1 for i in v), _med([ratio[i] for i in v]))
            for k, v in sorted(by_cls.items())])
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
