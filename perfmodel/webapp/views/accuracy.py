"""Accuracy: predictions against published and own measurements (perfmodel.analysis.validation.run), the
summary per metric, the issue's targets, the rows, and predicted vs measured (log-log)."""

from __future__ import annotations

import streamlit as st

from perfmodel.webapp import charts_accuracy, charts_serving, data_pages, inputs
from perfmodel.webapp.texts import num

UNITS = {"decode_tok_s_per_user": "tok/s", "output_tok_s_total": "tok/s", "ttft_ms": "ms",
         "tpot_ms": "ms", "e2e_latency_s": "s", "prefill_tok_s": "tok/s",
         "speculative_speedup": "x", "max_batch": "sequences", "memory_gb": "GB"}


def pct(x) -> str:
    return "n/a" if x is None else f"{100 * x:.0f}%"


def render() -> None:
    scn = inputs.keep_url("accuracy")
    st.title("Accuracy")
    rep = inputs.call(data_pages.validation)
    if rep is None:
        return
    st.caption(f"Every row of {', '.join(rep.data[:3])}{' ...' if len(rep.data) > 3 else ''} mapped "
               "to a scenario and predicted from the datasheet (and with a calibrated profile where "
               f"one exists: {', '.join(rep.profiles) or 'none yet'}). APE = |predicted - measured| "
               f"/ measured. Intervals: {rep.interval_level:.0%}, fitted leaving the row out.")
    headline = [m for m in ("decode_tok_s_per_user", "output_tok_s_total", "ttft_ms", "tpot_ms")
                if m in rep.summary]
    for col, m in zip(st.columns(max(1, len(headline))), headline):
        s = rep.summary[m]
        col.metric(f"{m}: median APE", pct(s.median_ape),
                   help=f"Median |predicted - measured| / measured over {s.n} rows ({UNITS[m]}), "
                        f"datasheet efficiencies; {pct(s.within_25pct)} of rows within 25%.")
    st.subheader("Summary (datasheet-only)")
    metrics = list(rep.summary)
    st.dataframe({"metric": metrics, "unit": [UNITS.get(m, "") for m in metrics],
                  "rows": [rep.summary[m].n for m in metrics],
                  "median APE": [pct(rep.summary[m].median_ape) for m in metrics],
                  "within 25%": [pct(rep.summary[m].within_25pct) for m in metrics],
                  "interval coverage": [pct(rep.summary[m].interval_coverage) for m in metrics]},
                 hide_index=True)
    if rep.targets:
        st.dataframe({"target": [t.name for t in rep.targets],
                      "value": [pct(t.value) for t in rep.targets],
                      "limit": [t.limit for t in rep.targets], "rows": [t.n for t in rep.targets],
                      "met": ["n/a" if t.met is None else ("yes" if t.met else "NO") for t in rep.targets]},
                     hide_index=True)

    choices = sorted({r.metric for r in rep.rows})
    if scn.acc_metric not in choices and choices:
        st.session_state["w_acc_metric"] = choices[0]
    st.selectbox("Metric", choices or [scn.acc_metric], key="w_acc_metric",
                 format_func=lambda m: f"{m} ({UNITS.get(m, '')})")
    metric = st.session_state["w_acc_metric"]
    rows = [r for r in rep.rows if r.metric == metric and not r.low_confidence]
    st.plotly_chart(charts_accuracy.predicted_vs_measured(rows, metric, UNITS.get(metric, ""),
                                                          rep.interval_level), width="stretch")
    st.dataframe({"row": [r.label for r in rows], "gpu": [r.gpu for r in rows],
                  "model": [r.model for r in rows], "engine": [r.engine for r in rows],
                  "workload": [r.workload for r in rows], "measured": [num(r.measured) for r in rows],
                  "predicted": [num(r.predicted) for r in rows], "APE": [pct(r.ape) for r in rows],
                  "interval": [f"{num(r.interval_lo)} - {num(r.interval_hi)}" for r in rows],
                  "calibrated": [num(r.calibrated_predicted) if r.calibrated_predicted else "" for r in rows],
                  "bound": [r.bound for r in rows],
                  "diagnosis": [r.diagnosis for r in rows]}, hide_index=True)
    if rep.serving is not None:
        serving_section(rep.serving)
    with st.expander(f"Rows not predicted ({len(rep.unmapped)})"):
        st.dataframe({"row": [u.label for u in rep.unmapped], "metric": [u.metric for u in rep.unmapped],
                      "gpu": [u.gpu for u in rep.unmapped], "model": [u.model for u in rep.unmapped],
                      "reason": [u.reason for u in rep.unmapped]}, hide_index=True)


def serving_section(srv) -> None:
    """The measured serving points (perfmodel.analysis.validation.serving_run)."""
    st.subheader("Serving under load")
    st.caption(f"{len(srv.rows)} of {srv.n_rows} measured serving points ({', '.join(srv.data)}) "
               f"predicted with the {srv.predictor_description}; compared: {srv.statistic} vs "
               "the measured means.")
    st.dataframe({"target": [t.name for t in srv.targets],
                  "value": [pct(t.value) for t in srv.targets],
                  "limit": [t.limit for t in srv.targets], "rows": [t.n for t in srv.targets],
                  "met": ["n/a" if t.met is None else ("yes" if t.met else "NO")
                          for t in srv.targets]}, hide_index=True)
    groups = [g for g in srv.groups if g.by != "engine x gpu x model"]
    st.dataframe({"by": [g.by for g in groups], "key": [g.key for g in groups],
                  "rows": [g.n for g in groups],
                  "TTFT median APE": [pct(g.ttft_median_ape) for g in groups],
                  "TTFT pred/meas": [f"{g.ttft_median_ratio:.2f}" for g in groups],
                  "TPOT median APE": [pct(g.tpot_median_ape) for g in groups],
                  "TPOT pred/meas": [f"{g.tpot_median_ratio:.2f}" for g in groups]},
                 hide_index=True)
    agg = [r for r in srv.rows if r.mode == "agg"]
    left, right = st.columns(2)
    left.plotly_chart(charts_serving.ratio_vs_concurrency(agg, "ttft"), width="stretch")
    right.plotly_chart(charts_serving.ratio_vs_concurrency(agg, "tpot"), width="stretch")
    with st.expander(f"Serving points not predicted ({len(srv.unmapped)}), by reason"):
        st.dataframe({"reason": [r.reason for r in srv.unmapped_reasons],
                      "rows": [r.n for r in srv.unmapped_reasons]}, hide_index=True)


if __name__ == "__main__":
    render()
