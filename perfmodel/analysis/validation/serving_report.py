"""The serving sections of docs/accuracy.md, written from a ServingReport (formatting only)."""

from __future__ import annotations

from statistics import median

from perfmodel.core.units import MS
from perfmodel.analysis.validation.markdown import pct as _pct
from perfmodel.analysis.validation.markdown import table as _table
from perfmodel.analysis.validation.serving_map import CHECKPOINT_SUFFIXES, MODE_NOTES, QUANT_MODES
from perfmodel.analysis.validation.serving_results import (ServingReport, ServingRowResult,
                                                           ServingSummary)

WORST_N = 12
LOW_C_MAX = 8          # "low concurrency": at most this many requests in flight
HIGH_C_MIN = 64        # "high concurrency": at least this many
_MET = {True: "yes", False: "**no**", None: "no data"}
SUMMARY_HEADER = ["rows", "set", "n", "TTFT median error", "TTFT within 25%",
                  "TTFT predicted/measured", "TPOT median error", "TPOT within 25%",
                  "TPOT predicted/measured"]


def _stats(s: ServingSummary | None) -> list[str]:
    if s is None:
        return ["0"] + ["-"] * 6
    return [str(s.n), _pct(s.ttft_median_ape), _pct(s.ttft_within_25pct),
            f"{s.ttft_median_ratio:.2f}", _pct(s.tpot_median_ape), _pct(s.tpot_within_25pct),
            f"{s.tpot_median_ratio:.2f}"]


def _summary_row(name: str, what: str, s: ServingSummary | None) -> list[str]:
    return [name, what] + _stats(s)


def serving_summary_lines(rep: ServingReport) -> list[str]:
    """Targets and headline errors (README block and the docs' summary)."""
    out = [f"Measured serving points ({', '.join(rep.data)}): {rep.n_rows} rows, predicted with "
           f"the {rep.predictor_description}; compared: {rep.statistic} vs the measured means.",
           ""]
    out += _table(["target", "limit", "value", "rows", "met"],
                  [[t.name, t.limit, _pct(t.value), str(t.n), _MET[t.met]] for t in rep.targets])
    rows = [_summary_row("aggregated", "datasheet", rep.summary),
            _summary_row("aggregated MoE", "datasheet", rep.summary_moe),
            _summary_row("disaggregated", "datasheet", rep.summary_disagg)]
    if rep.baseline_summary is not None:
        rows.append(_summary_row("aggregated, same rows", f"baseline: {rep.baseline_description}",
                                 rep.baseline_summary))
    out += [""] + _table(SUMMARY_HEADER, rows)
    n_pred = len(rep.rows)
    out += ["", f"{n_pred} of {rep.n_rows} rows predicted ({rep.n_agg} aggregated, "
            f"{rep.n_disagg} disaggregated in the file); {len(rep.unmapped)} listed with the reason."]
    return out


def _groups(rep: ServingReport, by: str) -> list[str]:
    return _table(["key", "n", "TTFT median error", "TTFT within 25%", "TTFT pred/meas",
                   "TPOT median error", "TPOT within 25%", "TPOT pred/meas"],
                  [[g.key] + _stats(g) for g in rep.groups if g.by == by])


def _worst(rep: ServingReport, metric: str) -> list[str]:
    rows = sorted(rep.rows, key=lambda r: -getattr(r, f"{metric}_ape"))[:WORST_N]
    return _table(["row", "id", "model", "GPU", "engine", "parallel", "precision",
                   "ISL/OSL", "C", f"measured {metric.upper()} ms", "predicted ms", "error"],
                  [[r.label, r.row_id, r.model, f"{r.gpu} x{r.num_gpus}",
                    f"{r.engine} {r.engine_version}".strip(), r.parallel, r.precision,
                    f"{r.prompt_tokens}/{r.output_tokens}", str(r.concurrency),
                    f"{getattr(r, f'measured_{metric}_s') / MS:.4g}",
                    f"{getattr(r, f'predicted_{metric}_s') / MS:.4g}",
                    _pct(getattr(r, f"{metric}_ape"))] for r in rows])


def _residual_ms(rows) -> str:
    """Median measured - predicted TTFT of `rows` in ms ('-' for none)."""
    if not rows:
        return "-"
    return f"{median(r.measured_ttft_s - r.predicted_ttft_s for r in rows) / MS:+.0f}"


def ttft_residual_table(rows: list[ServingRowResult]) -> list[str]:
    """Aggregated `rows` by engine x dense/MoE: the median TTFT residual (measured - predicted, ms)
    at low and at high concurrency, with the median measured and predicted TTFT at low
    concurrency. A residual that stays put across concurrency is a per-request latency the model
    lacks; one that grows with it is queueing or step cost."""
    groups: dict[tuple[str, str], list] = {}
    for r in rows:
        if r.mode == "agg":
            groups.setdefault((r.engine, "MoE" if r.moe else "dense"), []).append(r)
    body = []
    for (engine, kind), group in sorted(groups.items()):
        low = [r for r in group if r.concurrency <= LOW_C_MAX]
        high = [r for r in group if r.concurrency >= HIGH_C_MIN]
        meas = f"{median(r.measured_ttft_s for r in low) / MS:.0f}" if low else "-"
        pred = f"{median(r.predicted_ttft_s for r in low) / MS:.0f}" if low else "-"
        body.append([engine, kind, str(len(low)), meas, pred, _residual_ms(low), str(len(high)),
                     _residual_ms(high)])
    return _table(["engine", "model", f"rows C <= {LOW_C_MAX}", "measured TTFT ms",
                   "predicted TTFT ms", "measured - predicted ms", f"rows C >= {HIGH_C_MIN}",
                   "measured - predicted ms"], body)


def _calibrated(rep: ServingReport) -> list[str]:
    if rep.summary_calibrated is None:
        return [f"No calibrated profile matches a predicted row's GPU (profiles: "
                f"{', '.join(rep.profiles) or 'none'})."]
    return [f"Rows whose GPU has a calibrated profile ({', '.join(rep.profiles)}):", ""] + _table(
        SUMMARY_HEADER, [_summary_row("aggregated", "datasheet", rep.summary_calibrated_baseline),
                         _summary_row("aggregated", "calibrated profile", rep.summary_calibrated)])


def _mapping_notes() -> list[str]:
    modes = ", ".join(f"{k} -> W {w} / A {a}" for k, (w, a) in QUANT_MODES.items())
    return ["- Engine: the backend through the framework rules below (trtllm, vllm, sglang).",
            "- GPU: the system id with '_' -> '-' looked up exactly in hardware_db; else the id "
            "without its form-factor suffix when hardware_db has that card and no other variant.",
            "- Model: the Hugging Face repo id without a checkpoint-format suffix "
            f"({', '.join(CHECKPOINT_SUFFIXES)}), then its name part, looked up in the catalog.",
            f"- Weights: the experts' quant mode for MoE models, the GEMM mode otherwise ({modes}).",
            *[f"  - {v}" for v in MODE_NOTES.values()],
            "- KV cache (not stated per row): fp8 for fp8/fp4 weights, else bf16; said in each "
            "row's assumptions.",
            "- Parallelism: tp, pp, and for MoE models ep = moe_ep_size; attention DP is the stated "
            "attention_dp_size or moe_tp x moe_ep / tp; rows needing attention DP or "
            "disaggregated workers are unmapped until the predictor supports them.",
            "- Load: concurrency = batch_size (all requests in flight), prompt = isl, output = osl."]


def serving_markdown(rep: ServingReport) -> list[str]:
    """The serving section of docs/accuracy.md."""
    out = ["## Serving under load", ""] + serving_summary_lines(rep) + [""]
    out += ["### Calibrated beside datasheet-only", ""] + _calibrated(rep) + [""]
    for by in ("engine", "gpu", "model", "concurrency", "engine x gpu x model"):
        out += [f"### Aggregated rows by {by}", ""] + _groups(rep, by) + [""]
    if rep.rows:
        out += ["### TTFT residual by engine and model kind", "",
                "Median measured - predicted TTFT of the aggregated rows (medians of each "
                "column). A residual that is the same at low and high concurrency is a "
                "per-request latency the model lacks; one that grows with concurrency comes from "
                "queueing or the step cost.", ""] + ttft_residual_table(rep.rows) + [""]
        out += [f"### Worst {WORST_N} rows by TTFT", ""] + _worst(rep, "ttft") + [""]
        out += [f"### Worst {WORST_N} rows by TPOT", ""] + _worst(rep, "tpot") + [""]
    out += ["### Rows not predicted, by reason", ""]
    out += _table(["reason", "rows"], [[r.reason, str(r.n)] for r in rep.unmapped_reasons]) \
        if rep.unmapped_reasons else ["None."]
    out += ["", "Every row, predicted or not, is in `perfmodel validate --json` (`serving.rows`, "
            "`serving.unmapped`).", "", "### How serving rows are mapped", ""] + _mapping_notes()
    return out + [""]
