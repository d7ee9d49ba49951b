"""`perfmodel validate`: predictions against measured tables -> the accuracy table."""

from __future__ import annotations

from pathlib import Path

from perfmodel.cli import HELP
from perfmodel.cli.common import print_json, print_table
from perfmodel.core.errors import PerfModelError
from perfmodel.analysis.validation.run import ROOT, fit_intervals, validate
from perfmodel.analysis.validation import intervals as iv
from perfmodel.analysis.validation.report import pct, write_docs
from perfmodel.analysis.validation.serving_predict import docs_predictor


def register(sub) -> None:
    p = sub.add_parser("validate", help=HELP["validate"])
    p.add_argument("--data", action="append", default=None, metavar="FILE",
                   help="measurement table (.csv with the columns of data/public_measurements.csv) "
                        "or calibrate/bench.py raw result (.json); repeatable "
                        "(default: data/public_measurements.csv and calibrate/data/raw-*.json)")
    p.add_argument("--profile", action="append", default=None, metavar="F",
                   help="calibrated profile YAML; repeatable (default: calibrate/profiles/*.yaml)")
    p.add_argument("--strict", action="store_true",
                   help="leave rows unmapped whose GPU variant is not stated (default: assume "
                        "the likeliest, e.g. SXM in 8-GPU servers, and say so in the row)")
    p.add_argument("--serving-data", action="append", default=None, metavar="FILE",
                   help="measured serving points (.csv with the columns of "
                        "data/serving/aic_silicon_sample.csv); repeatable (default: that file "
                        "when --data is not given, else none)")
    p.add_argument("--no-serving", action="store_true", help="skip the serving points")
    p.add_argument("--serving-predictor", default=None, metavar="NAME",
                   help="serving predictor: steady (steady-state serve_curve, a quick estimate: "
                        "the default) or sim (the step-level simulator, minutes over the whole "
                        "file; the default with --write-docs)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--fit-intervals", action="store_true",
                   help="refit the interval factors and rewrite perfmodel/analysis/validation/intervals.yaml")
    p.add_argument("--write-docs", action="store_true",
                   help="rewrite docs/accuracy.md and the README's accuracy block")
    p.set_defaults(func=run)


def run(args) -> int:
    serving = [] if args.no_serving else args.serving_data
    predictor = args.serving_predictor
    if predictor is None and args.write_docs:
        predictor = docs_predictor()
    rep = validate(args.data, args.profile, serving, predictor, strict=args.strict)
    table = None
    if args.fit_intervals:
        table = fit_intervals(rep)
        iv.save(table)
    if args.write_docs:
        if table is None:
            try:
                table = iv.load()
            except PerfModelError:   # no committed table: the docs say so
                table = None
        written = write_docs(rep, ROOT / "docs" / "accuracy.md", ROOT / "README.md", table)
        if not args.json:
            print("wrote " + ", ".join(str(Path(w).relative_to(ROOT)) for w in written))
    if args.json:
        print_json(rep)
        return 0
    print(f"data: {', '.join(rep.data)}; profiles: {', '.join(rep.profiles) or 'none'}")
    print_table([{"target": t.name, "limit": t.limit, "value": pct(t.value), "rows": t.n,
                  "met": {True: "yes", False: "NO", None: "no data"}[t.met]} for t in rep.targets])
    print()
    print_table([{"metric": m, "rows": s.n, "median error": pct(s.median_ape),
                  "within 25%": pct(s.within_25pct), "80% coverage": pct(s.interval_coverage),
                  **({"calibrated error": pct(rep.summary_calibrated[m].median_ape)}
                     if m in rep.summary_calibrated else {})}
                 for m, s in rep.summary.items()])
    by_label = {r.label: r for r in rep.rows}
    for src, labels in rep.worst.items():
        print(f"\nworst rows ({src}):")
        for label in labels:
            r = by_label[label]
            print(f"  {label} {r.metric} {r.model} on {r.gpu} x{r.num_gpus} ({r.engine}): "
                  f"measured {r.measured:.4g}, predicted {r.predicted:.4g}. {r.diagnosis}")
    print(f"\nunmapped rows ({len(rep.unmapped)}):")
    for u in rep.unmapped:
        print(f"  {u.label} {u.metric}: {u.reason}")
    if rep.serving is not None:
        _print_serving(rep.serving)
    return 0


def _print_serving(s) -> None:
    print(f"\nserving points ({', '.join(s.data)}): {len(s.rows)} of {s.n_rows} predicted with "
          f"the {s.predictor_description}")
    print_table([{"target": t.name, "limit": t.limit, "value": pct(t.value), "rows": t.n,
                  "met": {True: "yes", False: "NO", None: "no data"}[t.met]} for t in s.targets])
    print()
    print_table([{"by": g.by, "key": g.key, "rows": g.n, "TTFT error": pct(g.ttft_median_ape),
                  "TTFT pred/meas": f"{g.ttft_median_ratio:.2f}",
                  "TPOT error": pct(g.tpot_median_ape),
                  "TPOT pred/meas": f"{g.tpot_median_ratio:.2f}"}
                 for g in s.groups if g.by != "engine x gpu x model"])
    print("\nserving rows not predicted:")
    for r in s.unmapped_reasons:
        print(f"  {r.n:5d}  {r.reason}")
