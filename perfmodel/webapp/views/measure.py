"""Measure: a short load test of a running OpenAI-compatible endpoint (perfmodel.analysis.endpoint),
with the model's prediction for the sidebar's scenario beside each concurrency level."""

from __future__ import annotations

import streamlit as st
from pydantic import ValidationError

from perfmodel.core.errors import PerfModelError, pydantic_message
from perfmodel.core.units import MS
from perfmodel.webapp import charts_measure, inputs
from perfmodel.webapp.data import api_kwargs
from perfmodel.webapp.state import levels_of
from perfmodel.webapp.texts import help_text, num

MAX_SECONDS = 300.0          # one sweep from the page runs at most five minutes
RUN_KEY = "measure_run_json"


def run_sweep(scn):
    from perfmodel.analysis.endpoint import EndpointConfig, run_benchmark

    if not scn.measure_model.strip():
        raise PerfModelError("give the served model id (as the server lists it in /models)")
    try:
        cfg = EndpointConfig(url=scn.measure_url, model=scn.measure_model.strip(),
                             concurrency=levels_of(scn.measure_levels), requests=scn.measure_requests,
                             prompt_tokens=scn.measure_prompt, max_tokens=scn.measure_output,
                             max_seconds=MAX_SECONDS, request_timeout_s=60.0)
    except ValidationError as exc:
        raise PerfModelError(pydantic_message(exc)) from None
    with st.spinner(f"Load-testing {cfg.url} ({len(cfg.concurrency)} levels x {cfg.requests} requests)..."):
        return run_benchmark(cfg, predict=spec_of(scn))


def spec_of(scn):
    from perfmodel.analysis.endpoint import PredictSpec

    kw = api_kwargs(scn)       # the sidebar's ids and whole layout, as every page's Query
    return PredictSpec(**{k: kw[k] for k in ("model", "gpu", "engine", "weights", "kv",
                                             "activations", "tp", "pp", "ep", "dp", "nodes",
                                             "profile")})


def predicted(run, scn):
    """The stored run with the prediction of the CURRENT sidebar scenario on every level."""
    from perfmodel.analysis.endpoint import with_predictions

    return with_predictions(run, spec_of(scn))


def render() -> None:
    scn = inputs.sidebar("measure")
    st.title("Measure an endpoint")
    from perfmodel.analysis import endpoint as ep
    st.caption("Sends streamed requests to a running OpenAI-compatible server (vLLM, SGLang, "
               "TensorRT-LLM, llama.cpp, Ollama) at each concurrency level, and plots the model's "
               "prediction for the sidebar's model, GPU, engine, precision and layout (TP, PP, EP, "
               "DP, Nodes) beside each level.")
    with st.form("measure"):
        c = st.columns([3, 2, 2])
        c[0].text_input("Base URL", key="w_measure_url", help="e.g. http://127.0.0.1:8000/v1")
        c[1].text_input("Served model id", key="w_measure_model", help="As the server lists it in /models.")
        c[2].text_input("Concurrency levels", key="w_measure_levels", help="Comma-separated, e.g. 1,2,4,8.")
        c = st.columns(3)
        c[0].number_input("Requests per level", 1, 1000, step=1, key="w_measure_requests")
        c[1].number_input("Prompt (tokens, approx.)", 1, 131_072, step=64, key="w_measure_prompt")
        c[2].number_input("Max output tokens", 1, 32_768, step=16, key="w_measure_output")
        submitted = st.form_submit_button(f"Run (at most {MAX_SECONDS:.0f} s)")
    st.file_uploader("...or load a run saved by `perfmodel bench-endpoint --out`", type=["json"],
                     key="up_run", on_change=_on_run_file)
    if err := st.session_state.pop("run_error", None):
        st.error(err)
    scn = inputs.current()
    if submitted:
        run = inputs.call(run_sweep, scn)
        if run is not None:
            st.session_state[RUN_KEY] = run.model_dump_json()
    text = st.session_state.get(RUN_KEY)
    if not text:
        st.info("No measurement yet: run one above, or load a saved run.")
        return
    run = inputs.call(lambda: predicted(ep.BenchmarkRun.model_validate_json(text), scn))
    if run is None:
        return
    show(run)


def _on_run_file() -> None:
    from perfmodel.analysis.endpoint import BenchmarkRun

    f = st.session_state.get("up_run")
    if f is None:
        return
    try:
        run = BenchmarkRun.model_validate_json(f.getvalue())
    except ValidationError as exc:
        st.session_state["run_error"] = f"not a bench-endpoint run: {pydantic_message(exc)}"
        return
    st.session_state[RUN_KEY] = run.model_dump_json()


def show(run) -> None:
    if run.stopped_early:
        st.warning(f"Stopped early: {run.stopped_early}")
    lv = [x for x in run.levels if x.stats.ok]
    failed = sum(x.stats.failed for x in run.levels)
    if failed:
        kinds = {}
        for x in run.levels:
            for k, n in x.stats.errors.items():
                kinds[k] = kinds.get(k, 0) + n
        st.warning(f"{failed} requests failed: " + ", ".join(f"{k} x{n}" for k, n in kinds.items()))
    if not lv:
        st.error("No request succeeded: nothing to plot.")
        return
    top = max(lv, key=lambda x: x.stats.output_tok_s)
    m = st.columns(4)
    m[0].metric("Peak measured", f"{num(top.stats.output_tok_s)} tok/s",
                help=help_text("output_tok_s_total") + f" Measured at concurrency {top.concurrency}.")
    pred = top.prediction
    m[1].metric("Predicted there", f"{num(pred.output_tok_s_total)} tok/s" if pred else "n/a",
                help="The model's aggregate output tok/s for this level's batch and lengths.")
    m[2].metric("TPOT p50 (lowest load)", f"{num(lv[0].stats.tpot_p50_s / MS)} ms",
                help=help_text("tpot_s") + f" Measured at concurrency {lv[0].concurrency}.")
    m[3].metric("Knee (measured)", str(run.knee.concurrency) if run.knee.concurrency else "not reached",
                help=run.knee.reason)
    left, right = st.columns(2)
    left.plotly_chart(charts_measure.latency_throughput(run.levels), width="stretch")
    right.plotly_chart(charts_measure.ttft_vs_concurrency(run.levels), width="stretch")
    st.dataframe({
        "concurrency": [x.concurrency for x in run.levels],
        "ok / failed": [f"{x.stats.ok} / {x.stats.failed}" for x in run.levels],
        "TTFT p50 (ms)": [num(x.stats.ttft_p50_s / MS) if x.stats.ttft_p50_s else "n/a" for x in run.levels],
        "TPOT p50 (ms)": [num(x.stats.tpot_p50_s / MS) if x.stats.tpot_p50_s else "n/a" for x in run.levels],
        "output tok/s": [num(x.stats.output_tok_s) for x in run.levels],
        "predicted TPOT (ms)": [num(x.prediction.tpot_s / MS) if x.prediction else "n/a" for x in run.levels],
        "simulated TTFT p50 (ms)": [_sim_ms(x, "ttft_p50_s") for x in run.levels],
        "simulated TPOT p50 (ms)": [_sim_ms(x, "tpot_p50_s") for x in run.levels],
        "predicted tok/s": [num(x.prediction.output_tok_s_total) if x.prediction else "n/a" for x in run.levels],
        "measured / predicted tok/s": [num(x.prediction.ratios.get("output_tok_s", float("nan")))
                                       if x.prediction else "n/a" for x in run.levels],
    }, hide_index=True)
    st.download_button("Download this run (JSON)", run.model_dump_json(indent=1),
                       file_name="bench-endpoint.json", mime="application/json")


def _sim_ms(level, key: str) -> str:
    """The level's replay by the serving simulation (Prediction.simulated), in ms."""
    v = level.prediction.simulated.get(key) if level.prediction else None
    return num(v / MS) if v is not None else "n/a"


if __name__ == "__main__":
    render()
