"""docs/accuracy.md and the README's accuracy block, written from a ValidationReport.

Formatting only: every number comes from perfmodel.analysis.validation.run. The README block between
<!-- accuracy:start --> and <!-- accuracy:end --> is the summary section of docs/accuracy.md,
so the two never disagree.
"""

from __future__ import annotations

import re
from pathlib import Path

from perfmodel.analysis.validation.intervals import IntervalTable
from perfmodel.core.gguf import GGUF_BITS_PER_WEIGHT as GGUF_BPW
from perfmodel.analysis.validation.markdown import pct
from perfmodel.analysis.validation.markdown import table as _table
from perfmodel.analysis.validation.names import ENGINE_NOTES, FRAMEWORK_ENGINES
from perfmodel.analysis.validation.results import MetricSummary, RowResult, ValidationReport
from perfmodel.analysis.validation.serving_report import serving_markdown, serving_summary_lines

START, END = "<!-- accuracy:start -->", "<!-- accuracy:end -->"
UNITS = {"decode_tok_s_per_user": "tok/s", "output_tok_s_total": "tok/s", "ttft_ms": "ms",
         "tpot_ms": "ms", "e2e_latency_s": "s", "prefill_tok_s": "tok/s",
         "speculative_speedup": "x", "max_batch": "seqs", "memory_gb": "GB"}


def num(x: float | None) -> str:
    return "-" if x is None else f"{x:.4g}"


def _metric_rows(summary: dict[str, MetricSummary]) -> list[list[str]]:
    return [[m, str(s.n), pct(s.median_ape), f"{s.median_abs_log_ratio:.3f}", pct(s.within_25pct),
             pct(s.interval_coverage)] for m, s in summary.items()]


METRIC_HEADER = ["metric", "rows", "median error", "median abs ln ratio", "within 25%",
                 "80% interval coverage"]


def summary_section(rep: ValidationReport) -> str:
    """Targets and per-metric errors: the part the README shows."""
    met = {True: "yes", False: "**no**", None: "no data"}
    out = ["Datasheet-only predictions (no calibration) against every mapped row of "
           f"{', '.join(rep.data)}; errors are median |predicted - measured| / measured; "
           "interval coverage is leave-one-out. Low-confidence rows are excluded.", ""]
    out += _table(["target", "limit", "value", "rows", "met"],
                  [[t.name, t.limit, pct(t.value), str(t.n), met[t.met]] for t in rep.targets])
    out += [""] + _table(METRIC_HEADER, _metric_rows(rep.summary))
    n_map, n_un = len(rep.rows), len(rep.unmapped)
    out += ["", f"{n_map} rows predicted, {n_un} listed as unmapped with the reason; "
            "details, worst rows and every row in docs/accuracy.md."]
    if rep.serving is not None:
        out += [""] + serving_summary_lines(rep.serving)
    return "\n".join(out)


def _row_line(r: RowResult) -> list[str]:
    interval = f"[{num(r.interval_lo)}, {num(r.interval_hi)}]"
    return [r.label, r.metric, r.model, f"{r.gpu} x{r.num_gpus}", r.engine, r.precision,
            r.workload, num(r.measured), num(r.predicted), pct(r.ape), interval,
            "yes" if r.covered else "no"]


def _calibrated(rep: ValidationReport) -> list[str]:
    if not rep.summary_calibrated:
        found = ", ".join(rep.profiles) or "none"
        return [f"No calibrated profile matches a mapped row's GPU (profiles: {found}), so "
                "only datasheet-only predictions are shown."]
    rows = []
    for m, cal in rep.summary_calibrated.items():
        base = rep.summary_calibrated_baseline[m]
        rows.append([m, str(cal.n), pct(base.median_ape), pct(cal.median_ape),
                     pct(base.within_25pct), pct(cal.within_25pct), pct(cal.interval_coverage)])
    return [f"Profiles: {', '.join(rep.profiles)}."] + [""] + _table(
        ["metric", "rows", "datasheet median error", "calibrated median error",
         "datasheet within 25%", "calibrated within 25%", "calibrated coverage"], rows)


def _intervals(rep: ValidationReport, table: IntervalTable | None) -> list[str]:
    cov = rep.coverage
    out = [f"Each prediction carries an {rep.interval_level:.0%} interval from the log "
           "residuals of its kind (metric x engine family x calibrated); see "
           "perfmodel/analysis/validation/intervals.py. Coverage below is leave-one-out: every row is "
           "checked against an interval fitted without it.", ""]
    out += _table(["rows", "n", "datasheet coverage", "calibrated coverage"],
                  [[src, str(cov.get(f"{src}_n", 0)), pct(cov.get(f"{src}_datasheet")),
                    pct(cov.get(f"{src}_calibrated"))]
                   for src in ("public", "own", "all") if f"{src}_n" in cov])
    if table is not None:
        out += ["", "Committed factors (perfmodel/analysis/validation/intervals.yaml; `perfmodel validate "
                "--fit-intervals` refits them):", ""]
        out += _table(["metric", "engine family", "calibrated", "rows of kind", "pooled from",
                       "low x", "high x"],
                      [[k.metric, k.engine_family, "yes" if k.calibrated else "no", str(k.n),
                        f"{k.pooled_from} ({k.pooled_n})", f"{k.lo_factor:.3g}",
                        f"{k.hi_factor:.3g}"] for k in table.kinds])
    return out


def _mapping_notes() -> list[str]:
    engines = ", ".join(f"`{pat}` -> {eng}" for pat, eng in FRAMEWORK_ENGINES)
    out = ["- GPU names: vendor words, capacity, form factor and memory type are split off "
           "and the base name is looked up in an explicit alias table "
           "(perfmodel/analysis/validation/names.py); parentheses are commentary (a form "
           "factor or capacity there narrows the variants only when the name states none). A "
           "variant that is not stated takes the likeliest one (SXM in 8-GPU servers), said in "
           "the row's assumptions; `--strict` leaves it unmapped. A card not in hardware_db, a "
           "mix of cards or one die of a package is unmapped with the reason. Power caps are "
           "not modelled (datasheet clocks).",
           "- Model names: lowercased, fine-tune suffixes dropped, looked up exactly in the "
           "catalog or its fine-tune alias table (perfmodel/core/catalog/aliases.py, said in the "
           "row's assumptions); the table's params_b must agree within 15%.",
           f"- Frameworks -> engine presets (first match): {engines}."]
    out += [f"  - {v}" for v in ENGINE_NOTES.values()]
    out += ["- Precisions: fp8 and fp4 weights are W8A8/W4A4 (NVFP4 = fp4 with 16-element "
            "blocks); int4/GPTQ/AWQ/q4f16 are weight-only int4 with the stated group (default "
            f"128; q4f16 32); 'N bpw' and GGUF types ({', '.join(GGUF_BPW)}) use their average "
            "bits per weight; a KV precision that is not stated is 16-bit.",
            "- Loads: 'batch B' -> B sequences in lockstep, aggregate = B x output / E2E; "
            "'request rate r' -> the serving curve read open-loop at r (queueing.py); "
            "'max throughput' or saturated -> serving.max_throughput; 'capacity search' -> the "
            "memory model's max batch (a power of two when the search used powers of two).",
            "- Speculative rows use perfmodel/analysis/speculative.py with the mean accepted tokens per "
            "step stated in the row (acceptance is data, never fitted); rows without it are "
            "unmapped."]
    return out


def accuracy_markdown(rep: ValidationReport, table: IntervalTable | None = None) -> str:
    out = ["# Accuracy", "",
           "Generated by `perfmodel validate --write-docs`; do not edit by hand.", "",
           "## Summary", "", summary_section(rep), "",
           "## By source", ""]
    for src, summ in rep.summary_by_source.items():
        out += [f"### {src}", ""] + _table(METRIC_HEADER, _metric_rows(summ)) + [""]
    if rep.serving is not None:
        out += serving_markdown(rep.serving)
    out += ["## Calibrated beside datasheet-only", ""] + _calibrated(rep) + [""]
    out += ["## Prediction intervals", ""] + _intervals(rep, table) + [""]
    out += ["## By metric x GPU x engine", ""]
    out += _table(["metric", "GPU", "engine", "rows", "median error", "within 25%"],
                  [[g.metric, g.gpu, g.engine, str(g.n), pct(g.median_ape), pct(g.within_25pct)]
                   for g in rep.groups])
    by_label = {r.label: r for r in rep.rows}
    out += ["", "## Worst rows and what the model lacks", ""]
    for src, labels in rep.worst.items():
        out += [f"### {src}", ""] + _table(
            ["row", "metric", "model", "GPU", "engine", "measured", "predicted",
             "what the model lacks"],
            [[r.label, r.metric, r.model, f"{r.gpu} x{r.num_gpus}", r.engine, num(r.measured),
              num(r.predicted), r.diagnosis or "-"] for r in (by_label[x] for x in labels)]) + [""]
    low = [r for r in rep.rows if r.low_confidence]
    out += ["", "## Low-confidence rows (not in the summaries)", ""]
    out += _table(["row", "metric", "model", "GPU", "measured", "predicted", "error"],
                  [[r.label, r.metric, r.model, r.gpu, num(r.measured), num(r.predicted),
                    pct(r.ape)] for r in low]) if low else ["None among the mapped rows."]
    header = ["row", "metric", "model", "GPU", "engine", "precision", "workload", "measured",
              "predicted", "error", "80% interval", "covered"]
    out += ["", "## Every predicted row", ""] + _table(header, [_row_line(r) for r in rep.rows])
    out += ["", "## Unmapped rows", ""]
    out += _table(["row", "metric", "GPU", "model", "framework", "reason"],
                  [[u.label, u.metric, u.gpu, u.model, u.framework, u.reason]
                   for u in rep.unmapped]) if rep.unmapped else ["None."]
    out += ["", "## How rows are mapped", ""] + _mapping_notes()
    return "\n".join(out) + "\n"


def replace_block(text: str, block: str) -> str | None:
    """text with the part between the accuracy markers replaced; None without markers."""
    pat = re.compile(re.escape(START) + r".*?" + re.escape(END), re.DOTALL)
    if not pat.search(text):
        return None
    return pat.sub(lambda _: f"{START}\n{block}\n{END}", text, count=1)


def write_docs(rep: ValidationReport, docs_path: Path, readme_path: Path,
               table: IntervalTable | None = None) -> list[Path]:
    """Rewrite docs/accuracy.md, and the README block if its markers exist."""
    written = []
    docs_path.parent.mkdir(parents=True, exist_ok=True)
    docs_path.write_text(accuracy_markdown(rep, table))
    written.append(docs_path)
    if readme_path.exists():
        new = replace_block(readme_path.read_text(), summary_section(rep))
        if new is not None:
            readme_path.write_text(new)
            written.append(readme_path)
    return written
