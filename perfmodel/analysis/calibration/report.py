"""The fit's typed result: fitted-vs-measured per point, error summaries, parameters, notes.

Errors are relative: predicted / measured - 1. Summaries give the median and the max of
its absolute value, on the points the fit used and on the held-out points separately, next
to the datasheet-only prediction (default efficiencies + preset engines) of the same points.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from perfmodel.analysis.calibration.stats import ratio_errors
from perfmodel.core.units import MS


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True)


class FitPoint(_Frozen):
    """One end-to-end point: measured, fitted and datasheet-only seconds."""

    name: str
    mode: str = Field(description="bench mode: eager, graph, compile, hf_generate.")
    engine: str = Field(description="engine preset the mode maps to.")
    dtype: str = Field(description="bench dtype: bf16, fp16, fp8_e4m3.")
    phase: Literal["decode", "prefill"]
    batch: int = Field(description="B: sequences in the step.")
    new_tokens: int = Field(description="T: tokens per sequence in the step (prompt for prefill).")
    context: float = Field(description="S: cached tokens the step attends to (0 for prefill).")
    measured_s: float
    fitted_s: float
    datasheet_s: float
    held_out: bool = Field(description="True: the fit never saw this point.")

    @property
    def fitted_err(self) -> float:
        return self.fitted_s / self.measured_s - 1.0

    @property
    def datasheet_err(self) -> float:
        return self.datasheet_s / self.measured_s - 1.0


class FitParam(_Frozen):
    """One parameter: its value, where it started, the datasheet/preset value, how it was set."""

    name: str = Field(description="'efficiency.<field>' or '<engine id>.<field>'.")
    value: float
    start: float
    datasheet: float = Field(description="Default efficiency or preset engine value.")
    status: Literal["fitted", "measured", "kept"]
    source: str
    note: str = ""


class ErrorSummary(_Frozen):
    """|error| median and max of a set of points, calibrated and datasheet-only."""

    points: int
    median_abs_err: float | None
    max_abs_err: float | None
    datasheet_median_abs_err: float | None
    datasheet_max_abs_err: float | None


class FitReport(_Frozen):
    """Everything the fit did, for the CLI, the report file and the web UI's chart."""

    gpu: str
    device: str
    points: list[FitPoint]
    params: list[FitParam]
    fit: ErrorSummary
    held_out: ErrorSummary
    gemm_by_dtype: dict[str, dict[str, float]] = Field(default_factory=dict)
    notes: list[str] = Field(default_factory=list)

    def kept(self) -> list[FitParam]:
        return [p for p in self.params if p.status == "kept"]

    def to_markdown(self, title: str = "Calibration fit report") -> str:
        return "\n".join(_markdown(self, title)) + "\n"


def summarize(points: list[FitPoint], held_out: bool) -> ErrorSummary:
    sel = [p for p in points if p.held_out == held_out]
    if not sel:
        return ErrorSummary(points=0, median_abs_err=None, max_abs_err=None,
                            datasheet_median_abs_err=None, datasheet_max_abs_err=None)
    meas = [p.measured_s for p in sel]
    f = ratio_errors([p.fitted_s for p in sel], meas)
    d = ratio_errors([p.datasheet_s for p in sel], meas)
    return ErrorSummary(points=len(sel), median_abs_err=f["median_abs_rel"],
                        max_abs_err=f["max_abs_rel"], datasheet_median_abs_err=d["median_abs_rel"],
                        datasheet_max_abs_err=d["max_abs_rel"])


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def _signed(x: float) -> str:
    return f"{100 * x:+.1f}%"


def summary_rows(rep: FitReport) -> list[dict[str, Any]]:
    return [{"points": name, "n": s.points,
             "calibrated median": _pct(s.median_abs_err), "calibrated max": _pct(s.max_abs_err),
             "datasheet median": _pct(s.datasheet_median_abs_err),
             "datasheet max": _pct(s.datasheet_max_abs_err)}
            for name, s in (("held out", rep.held_out), ("fit", rep.fit))]


def mode_rows(rep: FitReport) -> list[dict[str, Any]]:
    """Per engine group: the bench mode and the engine preset it implements."""
    rows = []
    for mode in sorted({p.mode for p in rep.points}):
        engine = next(p.engine for p in rep.points if p.mode == mode)
        for held in (True, False):
            s = summarize([p for p in rep.points if p.mode == mode], held)
            if s.points:
                rows.append({"engine": engine, "mode": mode,
                             "points": "held out" if held else "fit", "n": s.points,
                             "calibrated median": _pct(s.median_abs_err),
                             "calibrated max": _pct(s.max_abs_err),
                             "datasheet median": _pct(s.datasheet_median_abs_err),
                             "datasheet max": _pct(s.datasheet_max_abs_err)})
    return rows


def _table(rows: list[dict[str, Any]]) -> list[str]:
    cols = list(rows[0])
    out = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    out += ["| " + " | ".join(str(r[c]) for c in cols) + " |" for r in rows]
    return out


def _markdown(rep: FitReport, title: str) -> list[str]:
    lines = [f"# {title}", "", f"Card: {rep.gpu} (device {rep.device}). Error = predicted / "
             "measured - 1; 'datasheet' = default efficiencies and preset engines, no calibration.",
             "", "## Summary (|error|)", ""]
    lines += _table(summary_rows(rep))
    lines += ["", "## By engine group (|error|)", ""]
    lines += _table(mode_rows(rep))
    lines += ["", "## Parameters", ""]
    lines += _table([{"parameter": p.name, "value": f"{p.value:.4g}", "start": f"{p.start:.4g}",
                      "datasheet/preset": f"{p.datasheet:.4g}", "how": p.status,
                      "start from": p.source, "note": p.note or ""} for p in rep.params])
    if rep.gemm_by_dtype:
        lines += ["", "## GEMM efficiency curves per dtype (microbenchmark fit)", ""]
        lines += _table([{"dtype": d, "gemm_max": f"{c['gemm_max']:.3f}",
                          "gemm_half_m": f"{c['gemm_half_m']:.1f}",
                          "large-M fraction of peak": f"{c['large_m_flops_fraction']:.3f}",
                          "points": int(c["points"]), "median |err|": _pct(c["median_abs_err"]),
                          "max |err|": _pct(c["max_abs_err"])} for d, c in rep.gemm_by_dtype.items()])
    lines += ["", "## Points", ""]
    lines += _table([{"point": p.name, "set": "held out" if p.held_out else "fit",
                      "measured ms": f"{p.measured_s / MS:.3f}", "fitted ms": f"{p.fitted_s / MS:.3f}",
                      "fitted err": _signed(p.fitted_err), "datasheet ms": f"{p.datasheet_s / MS:.3f}",
                      "datasheet err": _signed(p.datasheet_err)}
                     for p in sorted(rep.points, key=lambda p: (not p.held_out, p.name))])
    if rep.notes:
        lines += ["", "## Notes", ""] + [f"- {n}" for n in rep.notes]
    return lines
