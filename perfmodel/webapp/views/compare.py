"""Compare GPUs / sizing: the cheapest deployments that serve a request rate within TTFT
and TPOT targets (perfmodel.analysis.sizing.size), ranked, with tok/s per GPU and $ per Mtok."""

from __future__ import annotations

import streamlit as st

from perfmodel.core.engines import ENGINES
from perfmodel.core.units import MS
from perfmodel.webapp import charts_size, data_pages, inputs
from perfmodel.webapp.texts import help_text, num

PRECISIONS = ["bf16", "fp8", "int4", "fp4", "int8", "fp8/fp8", "int4/fp8"]


def form(scn) -> None:
    with st.form("sizing"):
        c = st.columns(4)
        c[0].number_input("Request rate (req/s)", 0.0, 1e6, step=1.0, key="w_size_rate",
                          help="Poisson arrivals of requests with the sidebar's prompt and output lengths.")
        c[1].number_input("TTFT target (s)", 0.001, 1e4, step=0.1, format="%.3f",
                          key="w_size_ttft_slo_s", help=help_text("ttft_s"))
        c[2].number_input("TPOT target (s)", 0.0001, 1e3, step=0.005, format="%.4f",
                          key="w_size_tpot_slo_s", help=help_text("tpot_s"))
        c[3].number_input("Most GPUs", 1, 256, step=1, key="w_size_max_gpus",
                          help="Largest GPU count of one deployment (replicas x TP x PP).")
        c = st.columns([3, 2, 1])
        c[0].multiselect("GPUs (empty: all)", inputs.gpu_ids(), key="w_size_gpus")
        c[1].multiselect("Precisions (weights[/KV])", sorted(set(PRECISIONS) | set(scn.size_precisions)),
                         key="w_size_precisions")
        c[2].multiselect("Engines", sorted(set(ENGINES) | set(scn.size_engines)), key="w_size_engines")
        st.form_submit_button("Size it")


def render() -> None:
    scn = inputs.sidebar("compare")
    st.title("Compare GPUs / sizing")
    st.caption(f"The cheapest deployments of {scn.model} serving the rate with {scn.prompt}-token "
               f"prompts and {scn.output}-token outputs (sidebar), each GPU at its best shape, "
               "ranked by $ per hour.")
    form(scn)
    scn = inputs.current()
    res = inputs.call(data_pages.sizing, scn.key(*data_pages.SIZING_FIELDS))
    if res is None:
        return
    rows = res.deployments
    if res.infeasible_reason:
        st.error(res.infeasible_reason)
        if res.nearest_miss is not None:
            st.caption(f"Nearest miss: {charts_size.deployment_label(res.nearest_miss)} "
                       f"(fails on {res.nearest_miss.binding}).")
    if not rows:
        return
    best = rows[0]
    m = st.columns(4)
    m[0].metric("Cheapest", f"{best.gpu} x{best.count}",
                help=f"Lowest $ per hour meeting both targets: {charts_size.deployment_label(best)}.")
    m[1].metric("Cost", f"${num(best.usd_per_hour)}/h" if best.usd_per_hour else "no price",
                help="On-demand price per GPU-hour x GPUs (hardware_db).")
    m[2].metric("$ per Mtok", f"${num(best.usd_per_mtok)}" if best.usd_per_mtok else "n/a",
                help=help_text("usd_per_mtok"))
    m[3].metric("Binding constraint", best.binding,
                help="The requirement with the least slack at this rate: memory, TTFT, TPOT or rate.")
    st.dataframe({
        "rank": list(range(1, len(rows) + 1)),
        "deployment": [charts_size.deployment_label(d) for d in rows],
        "GPUs": [d.count for d in rows], "replicas": [d.replicas for d in rows],
        "TTFT (ms)": [num(d.ttft_s / MS) if d.ttft_s is not None else "n/a" for d in rows],
        "TPOT (ms)": [num(d.tpot_s / MS) if d.tpot_s is not None else "n/a" for d in rows],
        "capacity (tok/s)": [num(d.output_tok_s_total) for d in rows],
        "headroom (%)": [num(100 * d.headroom) if d.headroom is not None else "n/a" for d in rows],
        "$/hour": [num(d.usd_per_hour) if d.usd_per_hour else "n/a" for d in rows],
        "$/Mtok": [num(d.usd_per_mtok) if d.usd_per_mtok else "n/a" for d in rows],
        "J/token": [num(d.joules_per_token) if d.joules_per_token else "n/a" for d in rows],
        "binding": [d.binding for d in rows],
    }, hide_index=True)
    left, right = st.columns(2)
    left.plotly_chart(charts_size.throughput_per_gpu(rows), width="stretch")
    right.plotly_chart(charts_size.cost_per_mtok(rows), width="stretch")
    st.caption(f"{res.evaluated} replica shapes evaluated. Assumptions: " + "; ".join(res.assumptions) + ".")


if __name__ == "__main__":
    render()
