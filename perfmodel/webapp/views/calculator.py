"""Calculator: one configuration -> TTFT, TPOT, E2E, tok/s, MBU/MFU, bound, memory,
per-op time, roofline and the sensitivity of a chosen metric."""

from __future__ import annotations

import streamlit as st

from perfmodel.core.units import GB, MS
from perfmodel.webapp import charts, data, inputs
from perfmodel.webapp.sensitivity import sensitivity
from perfmodel.webapp.state import METRIC_LABELS
from perfmodel.webapp.texts import help_text, num

SCALE = {"ms": MS, "s": 1.0, "tok/s": 1.0}


def metric(col, key: str, label: str, value: str) -> None:
    col.metric(label, value, help=help_text(key))


def render() -> None:
    scn = inputs.sidebar("calculator")
    st.title("Calculator")
    r = inputs.call(data.predict, scn.key())
    if r is None:
        return
    st.caption(f"{r.model} on {r.gpu} x{r.tp * r.dp * r.pp} (TP {r.tp}, PP {r.pp}, EP {r.ep}, "
               f"DP {r.dp}) · "
               f"{r.engine} · {r.precision} · matmuls in {r.compute_dtype} · batch {r.batch}, "
               f"{r.prompt_tokens} tokens in / {r.output_tokens} out")
    for w in r.warnings:
        st.warning(w)
    if r.assumptions:
        st.caption("Assumed: " + "; ".join(r.assumptions))
    c = st.columns(5)
    metric(c[0], "ttft_s", "TTFT", f"{num(r.ttft_s / MS)} ms")
    metric(c[1], "tpot_s", "TPOT", f"{num(r.tpot_s / MS)} ms")
    metric(c[2], "e2e_s", "E2E", f"{num(r.e2e_s)} s")
    metric(c[3], "decode_tok_s_per_user", "Per user", f"{num(r.decode_tok_s_per_user)} tok/s")
    metric(c[4], "output_tok_s_total", "Aggregate", f"{num(r.output_tok_s_total)} tok/s")
    c = st.columns(5)
    metric(c[0], "mbu", "MBU", f"{num(100 * r.mbu)} %")
    metric(c[1], "mfu", "MFU", f"{num(100 * r.mfu)} %")
    metric(c[2], "bound", "Bound (decode)", r.bound)
    m = r.memory
    metric(c[3], "memory", f"Memory/GPU (of {num(m.capacity_bytes / GB)} GB)",
           f"{num(m.total_bytes / GB)} GB")
    metric(c[4], "max_batch", "Fits? / max batch", f"{'yes' if r.fits else 'NO'} / {m.max_batch}")
    if not r.fits:
        st.error(f"Does not fit: {num(m.total_bytes / GB)} GB needed per GPU, "
                 f"{num(m.capacity_bytes / GB)} GB usable. Largest batch at this length: "
                 f"{m.max_batch}; longest context at this batch: {m.max_context} tokens.")
    st.plotly_chart(charts.memory_bar(m), width="stretch")

    phase = st.radio("Step shown below", ["decode", "prefill"], horizontal=True, key="w_step",
                     help="decode: one step at the prompt's context; prefill: the whole prompt.")
    ops = r.ops if phase == "decode" else inputs.call(data.prefill_ops, scn.key())
    hw = inputs.call(data.hardware, scn.key())
    if ops is not None and hw is not None:
        left, right = st.columns(2)
        dtype = r.compute_dtype
        left.plotly_chart(charts.op_breakdown(ops, title=f"Time per op ({phase} step)"), width="stretch")
        right.plotly_chart(charts.roofline(hw, ops, dtype, title=f"Roofline ({phase})"), width="stretch")

    st.subheader("Sensitivity")
    st.selectbox("Metric", list(METRIC_LABELS), key="w_metric",
                 format_func=lambda k: f"{METRIC_LABELS[k][0]} ({METRIC_LABELS[k][1]})")
    key = scn.key()
    metric_id = st.session_state["w_metric"]
    s = inputs.call(sensitivity, key, metric_id)
    if s is not None:
        label, unit = METRIC_LABELS[metric_id]
        st.plotly_chart(charts.tornado(s.base, s.variations, label, unit, SCALE[unit]), width="stretch")
        notes = [f"{v.name}: {v.note}" for v in s.variations if v.note]
        if notes:
            st.caption("Not evaluated: " + " · ".join(notes))


if __name__ == "__main__":
    render()
