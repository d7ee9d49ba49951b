"""Sweep: latency vs throughput over batch or serving concurrency (the knee), decode tok/s vs prompt length,
memory per GPU vs context with the usable capacity."""

from __future__ import annotations

import streamlit as st

from perfmodel.core.units import GB, MS, fmt_bytes
from perfmodel.serving.knee import KNEE_RULE
from perfmodel.webapp import charts_sweep, data, data_pages, inputs
from perfmodel.webapp.texts import help_text, num

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


def batch_section(key: str, grid: tuple[int, ...]) -> None:
    curve = inputs.call(data.batch_curve, key, grid)
    if curve is None:
        return
    knee = curve.knee.concurrency if curve.knee else None
    headline(curve.x, curve.output_tok_s_total, curve.tpot_s, curve.fits, knee, "batch")
    st.plotly_chart(charts_sweep.latency_throughput(curve.x, curve.output_tok_s_total, curve.tpot_s,
                                                    curve.fits, knee), width="stretch")
    if curve.knee is not None:
        st.caption(f"Knee: {'batch ' + str(knee) if knee else 'not reached'} — {curve.knee.reason}. "
                   f"{curve.knee.rule} (the same rule measured curves use).")
    if not curve.fits.all():
        st.warning(f"Batches above {int(curve.x[curve.fits].max()) if curve.fits.any() else 0} "
                   "do not fit in memory at this prompt + output length (grey points).")
    table(curve.x, "batch", curve.ttft_s, curve.tpot_s, curve.decode_tok_s_per_user,
          curve.output_tok_s_total, curve.fits, curve.bound)


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else num(seconds / MS)


def concurrency_section(key: str, grid: tuple[int, ...]) -> None:
    res = inputs.call(data_pages.serve, key, grid)
    if res is None:
        return
    rep, knee = res
    for w in rep.warnings:
        st.warning(w)
    pts = rep.points
    x = [p.concurrency for p in pts]
    total = [p.output_tok_s_total or 0.0 for p in pts]
    tpot = [p.tpot_p50_s or 0.0 for p in pts]
    fits = [bool(p.fits and p.tpot_p50_s) for p in pts]
    k = knee.concurrency if knee else None
    headline(x, total, tpot, fits, k, "concurrency")
    st.plotly_chart(charts_sweep.latency_throughput(x, total, tpot, fits, k, x_name="concurrency"),
                    width="stretch")
    st.caption(f"Simulated closed-loop benchmark (perfmodel.serving.simulate): C requests released "
               f"at once, TPOT and TTFT are p50s. Knee: "
               f"{'concurrency ' + str(k) if k else 'not reached'}"
               f"{' (' + knee.reason + ')' if knee else ''}. {KNEE_RULE}. Scheduler: {rep.scheduler}.")
    st.dataframe({"concurrency": x,
                  "TTFT p50 (ms)": [_ms(p.ttft_p50_s) for p in pts],
                  "TTFT p90 (ms)": [_ms(p.ttft_p90_s) for p in pts],
                  "TPOT p50 (ms)": [_ms(p.tpot_p50_s) for p in pts],
                  "TPOT p90 (ms)": [_ms(p.tpot_p90_s) for p in pts],
                  "aggregate (tok/s)": ["-" if p.output_tok_s_total is None
                                        else num(p.output_tok_s_total) for p in pts],
                  "fits": [bool(p.fits) for p in pts],
                  "note": [p.reason for p in pts]}, hide_index=True)


def headline(x, total, tpot, fits, knee, name: str) -> None:
    """The best point that fits, and the knee, as metrics with units and definitions."""
    ok = [i for i, f in enumerate(fits) if f]
    c = st.columns(3)
    if ok:
        best = max(ok, key=lambda i: total[i])
        c[0].metric("Peak aggregate (fits)", f"{num(total[best])} tok/s",
                    help=help_text("output_tok_s_total") + f" Highest among the points that fit "
                         f"in memory: {name} {int(x[best])}.")
        c[1].metric(f"TPOT at {name} {int(x[best])}", f"{num(tpot[best] / MS)} ms", help=help_text("tpot_s"))
    c[2].metric("Knee", f"{name} {int(knee)}" if knee else "not reached",
                help=KNEE_RULE)


def table(x, name, ttft, tpot, per_user, total, fits, bound=None) -> None:
    extra = {} if bound is None else {"decode bound": [str(b) for b in bound]}
    st.dataframe({name: [int(v) for v in x],
                  "TTFT (ms)": [num(v / MS) for v in ttft],
                  "TPOT (ms)": [num(v / MS) for v in tpot],
                  "per user (tok/s)": [num(v) for v in per_user],
                  "aggregate (tok/s)": [num(v) for v in total],
                  "fits": [bool(f) for f in fits], **extra}, hide_index=True)


def render() -> None:
    scn = inputs.sidebar("sweep")
    st.title("Sweep")
    st.caption("Every point is a perfmodel prediction for the sidebar's scenario with one input changed.")
    if inputs.call(data.predict, scn.key()) is None:
        return
    key = scn.key()
    c1, c2 = st.columns([1, 3])
    c1.radio("Sweep over", ["batch", "concurrency"], key="w_sweep_over", horizontal=True,
             help="batch: B sequences decoded together (perfmodel.core.predict). concurrency: C requests "
                  "in flight on a serving engine, a simulated benchmark (perfmodel.serving.simulate).")
    top = c2.select_slider(f"Largest {scn.sweep_over}", sorted(set(BATCH_LIMITS) | {scn.sweep_max_batch}),
                           key="w_sweep_max_batch",
                           help="Points at 1, 2, 4, ... up to this value.")
    grid = powers_of_two(1, top)
    if scn.sweep_over == "batch":
        batch_section(key, grid)
    else:
        concurrency_section(key, grid)

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
