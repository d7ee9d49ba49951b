"""Sweep: latency vs throughput over batch (the knee), decode tok/s vs prompt length,
memory per GPU vs context with the usable capacity."""

from __future__ import annotations

import streamlit as st

from perfmodel.units import GB, MS, fmt_bytes
from perfmodel.webapp import charts_sweep, data, inputs
from perfmodel.webapp.texts import num

BATCH_LIMITS = [8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096]
MIN_CONTEXT = 128


def powers_of_two(lo: int, hi: int) -> tuple[int, ...]:
    out, v = [], lo
    while v <= hi:
        out.append(v)
        v *= 2
    if not out or out[-1] != hi:
        out.append(hi)
    return tuple(out)


def render() -> None:
    scn = inputs.sidebar("sweep")
    st.title("Sweep")
    st.caption("Every point is a perfmodel prediction for the sidebar's scenario with one input changed.")
    if inputs.call(data.predict, scn.key()) is None:
        return
    key = scn.key()
    top = st.select_slider("Largest batch", sorted(set(BATCH_LIMITS) | {scn.sweep_max_batch}),
                           key="w_sweep_max_batch",
                           help="Batches 1, 2, 4, ... up to this value (sequences decoded together).")
    curve = inputs.call(data.batch_curve, key, powers_of_two(1, top))
    if curve is not None:
        knee = curve.knee.concurrency if curve.knee else None
        st.plotly_chart(charts_sweep.latency_throughput(curve.x, curve.output_tok_s_total, curve.tpot_s,
                                                        curve.fits, knee), width="stretch")
        if curve.knee is not None:
            st.caption(f"Knee: {'batch ' + str(knee) if knee else 'not reached'} — {curve.knee.reason} "
                       "(the rule perfmodel.endpoint applies to measured curves).")
        if not curve.fits.all():
            st.warning(f"Batches above {int(curve.x[curve.fits].max()) if curve.fits.any() else 0} "
                       "do not fit in memory at this prompt + output length (grey points).")
        st.dataframe({"batch": curve.x.astype(int),
                      "TTFT (ms)": [num(v / MS) for v in curve.ttft_s],
                      "TPOT (ms)": [num(v / MS) for v in curve.tpot_s],
                      "per user (tok/s)": [num(v) for v in curve.decode_tok_s_per_user],
                      "aggregate (tok/s)": [num(v) for v in curve.output_tok_s_total],
                      "fits": curve.fits}, hide_index=True)

    spec = inputs.call(data.model_spec, key)
    if spec is None:
        return
    hi = max(MIN_CONTEXT, spec.max_context - scn.output)
    prompts = powers_of_two(MIN_CONTEXT, hi)
    left, right = st.columns(2)
    ctx = inputs.call(data.context_curve, key, prompts, where=left)
    if ctx is not None:
        left.plotly_chart(charts_sweep.throughput_vs_context(ctx.x, ctx.decode_tok_s_per_user,
                                                             ctx.output_tok_s_total, ctx.ttft_s,
                                                             ctx.fits),
                          width="stretch")
    contexts = powers_of_two(MIN_CONTEXT, spec.max_context)
    mems = inputs.call(data.memory_curve, key, contexts, where=right)
    if mems:
        right.plotly_chart(charts_sweep.memory_vs_context(contexts, mems), width="stretch")
        fit = [c for c, m in zip(contexts, mems) if m.fits]
        right.caption(f"At batch {scn.batch}: longest context that fits "
                      f"{mems[0].max_context} tokens per sequence; the KV cache takes "
                      f"{fmt_bytes(mems[0].kv_bytes_per_token)} per token per GPU." if fit else
                      f"At batch {scn.batch} no context fits; weights alone take "
                      f"{num(mems[0].weight_bytes / GB)} GB per GPU.")


if __name__ == "__main__":
    render()
