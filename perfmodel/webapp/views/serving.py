"""Serving run: a simulated benchmark (perfmodel.api.serve, the step-level scheduler
simulation): the timeline of one level (batch composition per step, queue, KV use) beside
the latency and throughput percentiles of every level."""

from __future__ import annotations

import streamlit as st

from perfmodel.core.units import MS
from perfmodel.webapp import charts_serving, data_pages, inputs
from perfmodel.webapp.state import levels_of
from perfmodel.webapp.texts import help_text, num

PAGE_FIELDS = ("serve_levels", "serve_requests", "serve_range_ratio", "serve_prefix_hit")


def _ms(v) -> str:
    return "-" if v is None else num(v / MS)


def controls(scn) -> None:
    c = st.columns(4)
    c[0].text_input("Concurrency levels", key="w_serve_levels",
                    help="Requests in flight, comma-separated: each level is a closed-loop run "
                         "that releases all its requests at t=0 (vLLM bench serve "
                         "--max-concurrency, InferenceMAX).")
    c[1].number_input("Requests per level (0: default)", min_value=0, max_value=100_000, step=1,
                      key="w_serve_requests",
                      help="0 runs the simulator's default number of requests per level.")
    c[2].number_input("Length range ratio", min_value=0.01, max_value=1.0, step=0.05,
                      key="w_serve_range_ratio",
                      help="Prompt and output lengths uniform in [ratio x length, length] "
                           "(vLLM --random-range-ratio); 1 = fixed lengths.")
    c[3].number_input("Prefix-cache hit rate", min_value=0.0, max_value=0.99, step=0.1,
                      key="w_serve_prefix_hit",
                      help="Share of prompt tokens found in the prefix cache (skip prefill).")


def headline(p) -> None:
    c = st.columns(4)
    c[0].metric("TTFT p50", f"{_ms(p.ttft_p50_s)} ms", help=help_text("ttft_s"))
    c[1].metric("TPOT p50", f"{_ms(p.tpot_p50_s)} ms", help=help_text("tpot_s"))
    c[2].metric("Output tok/s (all users)",
                "-" if p.output_tok_s_total is None else f"{num(p.output_tok_s_total)} tok/s",
                help=help_text("output_tok_s_total"))
    c[3].metric("Preemptions", f"{p.preemptions}",
                help="Requests evicted when the KV cache ran out (recomputed later).")


def table(points) -> None:
    st.dataframe({
        "concurrency": [p.concurrency for p in points],
        "fits": [bool(p.fits) for p in points],
        "requests": [p.num_requests for p in points],
        "TTFT p50 (ms)": [_ms(p.ttft_p50_s) for p in points],
        "TTFT p90 (ms)": [_ms(p.ttft_p90_s) for p in points],
        "TTFT p99 (ms)": [_ms(p.ttft_p99_s) for p in points],
        "TPOT p50 (ms)": [_ms(p.tpot_p50_s) for p in points],
        "TPOT p90 (ms)": [_ms(p.tpot_p90_s) for p in points],
        "ITL p99 (ms)": [_ms(p.itl_p99_s) for p in points],
        "E2E p50 (s)": ["-" if p.e2e_p50_s is None else num(p.e2e_p50_s) for p in points],
        "output tok/s": ["-" if p.output_tok_s_total is None else num(p.output_tok_s_total)
                         for p in points],
        "req/s": ["-" if p.request_rate_rps is None else num(p.request_rate_rps) for p in points],
        "preemptions": [p.preemptions for p in points],
        "note": [p.reason for p in points]}, hide_index=True)


def render() -> None:
    scn = inputs.sidebar("serving")
    st.title("Serving run")
    st.caption("A simulated benchmark of the sidebar's scenario: every step of the engine's "
               "scheduler priced by the one op list (perfmodel.serving.simulate).")
    controls(scn)
    levels = inputs.call(levels_of, scn.serve_levels)
    if levels is None:
        return
    rep = inputs.call(data_pages.simulate, scn.key(), levels, scn.serve_requests,
                      scn.serve_range_ratio, scn.serve_prefix_hit)
    if rep is None:
        return
    for w in rep.warnings:
        st.warning(w)
    pts = rep.points
    ran = [p for p in pts if p.timeline is not None and p.ttft_p50_s is not None]
    if not ran:
        st.error("No level ran: " + "; ".join(f"C={p.concurrency}: {p.reason}" for p in pts))
        table(pts)
        return
    by_c = {p.concurrency: p for p in ran}
    default = scn.serve_level if scn.serve_level in by_c else max(by_c)
    if st.session_state.get("w_serve_level") not in by_c:
        st.session_state["w_serve_level"] = default
    shown = st.selectbox("Timeline of the level", list(by_c), key="w_serve_level",
                         help="Which concurrency level's run is drawn step by step.")
    p = by_c[shown]
    headline(p)
    tl = p.timeline
    st.plotly_chart(charts_serving.run_timeline(
        tl.start_s, tl.duration_s, tl.decode_rows, tl.prefill_tokens, tl.waiting,
        tl.kv_used_fraction, title=f"Simulated run at concurrency {shown} "
                                   f"({p.num_requests} requests)"), width="stretch")
    left, right = st.columns(2)
    c = [q.concurrency for q in pts]
    measured = inputs.call(data_pages.measured_serving, scn.key(), where=left) or []
    left.plotly_chart(charts_serving.latency_percentiles(
        c, {"p50": [q.ttft_p50_s for q in pts], "p90": [q.ttft_p90_s for q in pts],
            "p99": [q.ttft_p99_s for q in pts]},
        {"p50": [q.tpot_p50_s for q in pts], "p90": [q.tpot_p90_s for q in pts]},
        [q.fits for q in pts], measured), width="stretch")
    left.caption(f"Diamonds: {len(measured)} measured means of this exact configuration "
                 "(data/serving/aic_silicon_sample.csv; KV precision"
                 + (" and node count" if scn.nodes else "") + " not stated there)."
                 if measured else "No measured serving point for this exact configuration "
                 "(model, GPU, engine, weights, parallelism, prompt and output lengths).")
    right.plotly_chart(charts_serving.throughput(
        c, [q.output_tok_s_total for q in pts], [q.request_rate_rps for q in pts],
        [q.fits for q in pts]), width="stretch")
    table(pts)
    st.caption(f"Scheduler: {rep.scheduler}. " + "; ".join(rep.assumptions))


if __name__ == "__main__":
    render()
