"""The prefill cost the measured TPOT implies, per group, beside the model's (a diagnostic;
the method and its assumptions: perfmodel/analysis/validation/prefill_implied.py,
docs/prefill_implied.md).

    python benchmarks/prefill_implied.py [--data CSV] [--predictions VALIDATE.json]
                                         [--by engine,moe,gpu] [--markdown]

--predictions: a `perfmodel validate --serving-predictor sim --json` result; its TTFT and TPOT
give the same estimator on the simulated run, P_eff(sim), and Q_sim. Prints, per group, the
medians of: P_model (one prompt alone), P_eff / P_model, P_eff(sim) / P_model, the cost
factor P_eff(sim) / P_eff, Q_meas = TTFT_meas / P_eff, Q_sim = TTFT_pred / P_eff(sim), the
queue factor Q_sim / Q_meas and TTFT_pred / TTFT_meas (= cost factor x queue factor per row).
"""

from __future__ import annotations

import argparse
import collections
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from perfmodel.analysis.validation import prefill_implied as pi  # noqa: E402
from perfmodel.analysis.validation.serving_run import DEFAULT_SERVING  # noqa: E402
from perfmodel.analysis.validation.serving_table import read_serving  # noqa: E402
from perfmodel.core.errors import PerfModelError  # noqa: E402
from perfmodel.core.units import MS  # noqa: E402

DEFAULT_BY = "family,engine,moe,gpu,weights,prompt_tokens"
FIT_HEADER = ("configs", "a", "b = P_eff/P_model", "a (sim)", "b (sim)", "cost b_sim/b",
              "Q_meas", "Q_sim", "queue sim/meas", "TTFT pred/meas")
FIT_STATS = ("decode_scale", "ratio", "decode_scale_sim", "ratio_sim", "cost_factor",
             "q_measured", "q_simulated", "queue_factor", "ttft_ratio")
HEADER = ("rows", "P_model ms", "prefill share of TPOT", "P_eff/P_model", "P_eff(sim)/P_model", "cost sim/meas",
          "Q_meas", "Q_sim", "queue sim/meas", "TTFT pred/meas")


def _cell(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "MoE" if v else "dense"
    return f"{v:.2f}" if isinstance(v, float) else str(v)


def _lines(groups, fields, markdown: bool) -> list[str]:
    head = list(fields) + list(HEADER)
    body = [[_cell(k) for k in g.key] + [str(g.n), f"{g.prefill_model_s / MS:.0f}"]
            + [_cell(getattr(g, f)) for f in pi.GROUP_STATS] for g in groups]
    return _table(head, body, markdown)


def _fit_lines(groups, fields, markdown: bool) -> list[str]:
    body = [[_cell(k) for k in g.key] + [str(g.configs)]
            + [_cell(getattr(g, f)) for f in FIT_STATS] for g in groups]
    return _table(list(fields) + list(FIT_HEADER), body, markdown)


def _table(head, body, markdown: bool) -> list[str]:
    if markdown:
        out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        return out + ["| " + " | ".join(r) + " |" for r in body]
    widths = [max(len(x) for x in col) for col in zip(head, *body)]
    return ["  ".join(x.ljust(w) for x, w in zip(r, widths)) for r in [head] + body]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=str(DEFAULT_SERVING))
    ap.add_argument("--predictions", default=None)
    ap.add_argument("--by", default=DEFAULT_BY,
                    help=f"ImpliedRow fields to group by (default {DEFAULT_BY})")
    ap.add_argument("--min-concurrency", type=int, default=pi.MIN_CONCURRENCY)
    ap.add_argument("--min-share", type=float, default=0.0,
                    help="group only rows whose prefill share of the measured TPOT is at least "
                         "this (P_eff moves by D's relative error / share)")
    ap.add_argument("--fit", action="store_true",
                    help="per configuration, fit TPOT(C) = a D(C) + b (C-1) P_model / (O-1) "
                         "over its levels and print the medians of a and b per group")
    ap.add_argument("--markdown", action="store_true")
    a = ap.parse_args(argv)
    try:
        fields = tuple(f.strip() for f in a.by.split(",") if f.strip())
        bad = [f for f in fields if f not in pi.ImpliedRow.model_fields]
        if bad or not fields:
            raise PerfModelError(f"--by: unknown field(s) {', '.join(bad) or '(none given)'}; "
                                 f"known: {', '.join(pi.ImpliedRow.model_fields)}")
        pred = pi.load_predictions(a.predictions) if a.predictions else None
        rows, skipped = pi.implied_rows(read_serving(a.data), pred, a.min_concurrency)
    except PerfModelError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    kept = [r for r in rows if r.readable and r.share >= a.min_share]
    if a.fit:
        fits = pi.fit_configs(rows)
        print("\n".join(_fit_lines(pi.group_fits(fits, fields), fields, a.markdown)))
        print(f"\n{len(fits)} configurations fitted (>= {pi.MIN_FIT_LEVELS} levels, a and b "
              "positive)")
    else:
        print("\n".join(_lines(pi.group(kept, fields), fields, a.markdown)))
    why = collections.Counter(re.sub(r"\d[\d.e-]*", "N", s.reason) for s in skipped)
    unread = sum(1 for r in rows if not r.readable)
    print(f"\n{len(rows)} rows read: {unread} with a measured TPOT not above D (fit only), "
          f"{len(kept)} readable with a prefill share >= {a.min_share:g}; {len(skipped)} "
          "skipped: "
          + "; ".join(f"{n} x {w}" for w, n in why.most_common(4)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
