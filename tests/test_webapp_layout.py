"""Attention data parallelism (dp) and the node count (nodes) in the web app's sidebar
(issue 14): the Calculator follows them as perfmodel.api does for the same Query, a bad node
count is one inline line, and links and scenario files made before the fields existed still
load. Expected values come from perfmodel's public API, never from the page."""

import json

import pytest
from streamlit.testing.v1 import AppTest

from perfmodel import api
from perfmodel.core.query import make_query
from perfmodel.core.units import MS
from perfmodel.webapp import state
from perfmodel.webapp.data import api_kwargs, ui_query
from perfmodel.webapp.texts import num

from test_webapp import clean, metrics, run

# DeepSeek-V3 fp8 on 8 x H200 with attention DP: the layout of SGLang's
# --tp 8 --enable-dp-attention --dp 2 style deployments (tp 4 per DP group, EP over all 8)
DSV3 = dict(model="deepseek-v3", gpu="h200-sxm", weights="fp8", tp=4, ep=4, batch=8,
            prompt=1024, output=256)


def reference(batch=8, **layout):
    q = make_query(model="deepseek-v3", gpu="h200-sxm", weights="fp8", batch=batch,
                   prompt_tokens=1024, output_tokens=256, **layout)
    return api.request_estimate(api.evaluate(q))


@pytest.fixture(autouse=True)
def uploads(tmp_path, monkeypatch):
    monkeypatch.setenv("PERFMODEL_WEBAPP_UPLOADS", str(tmp_path / "uploads"))


def test_dp_changes_the_calculator_as_the_api_does():
    at = run(**DSV3)
    clean(at)
    one = reference(tp=4, ep=4)
    assert metrics(at)["TPOT"] == f"{num(one.tpot_s / MS)} ms"
    at.sidebar.number_input(key="w_ep").set_value(8)
    at.sidebar.number_input(key="w_dp").set_value(2).run()
    clean(at)
    two = reference(tp=4, dp=2, ep=8)
    assert two.tpot_s != one.tpot_s                     # the layout matters to the model ...
    assert metrics(at)["TPOT"] == f"{num(two.tpot_s / MS)} ms"   # ... and the page follows it
    assert metrics(at)["TTFT"] == f"{num(two.ttft_s / MS)} ms"
    assert at.session_state["scenario"].dp == 2
    assert at.query_params["dp"] in (["2"], "2")         # the link carries it
    assert any("8 (TP x DP x PP)" in c.value for c in at.sidebar.caption)


def test_nodes_reach_the_query_and_a_bad_count_is_one_line():
    scn = state.UIScenario(model="deepseek-v3", gpu="h200-sxm", weights="fp8", tp=4, dp=2, ep=8,
                           nodes=2)
    assert ui_query(scn).nodes == 2 and ui_query(scn).dp == 2
    assert api_kwargs(scn.model_copy(update={"nodes": 0}))["nodes"] is None   # 0: not given
    at = run(**{**DSV3, "ep": 8, "dp": 2, "nodes": 3})
    clean(at)
    errors = [e.value for e in at.error]
    assert any("do not divide evenly" in e and "\n" not in e for e in errors), errors
    at.sidebar.number_input(key="w_nodes").set_value(2).run()   # 8 GPUs over 2 servers: fine
    clean(at)
    ref = api.request_estimate(api.evaluate(ui_query(at.session_state["scenario"])))
    assert at.session_state["scenario"].nodes == 2
    assert metrics(at)["TPOT"] == f"{num(ref.tpot_s / MS)} ms"


def test_old_links_and_scenario_files_without_dp_or_nodes_still_load():
    old_url = {"model": "mixtral-8x7b", "gpu": "h100-sxm", "tp": "2", "pp": "1", "ep": "2",
               "weights": "bf16", "kv": "bf16", "activations": "auto", "engine": "vllm",
               "batch": "8", "prompt": "1024", "output": "256", "profile": ""}
    scn, notes = state.from_query(old_url)
    assert notes == [] and (scn.dp, scn.nodes) == (1, 0) and scn.ep == 2
    doc = json.loads(state.to_json(scn))
    for name in ("dp", "nodes"):
        del doc["scenario"][name]                        # a file saved before the fields existed
    assert state.from_json(json.dumps(doc)) == scn
    at = run(**old_url)
    clean(at)
    ref = api.predict_request("mixtral-8x7b", "h100-sxm", tp=2, ep=2, batch=8, prompt=1024, output=256)
    assert metrics(at)["TPOT"] == f"{num(ref.tpot_s / MS)} ms"


def test_url_round_trip_keeps_the_layout():
    scn = state.UIScenario(model="deepseek-v3", tp=4, dp=2, ep=8, nodes=2)
    back, notes = state.from_query(state.to_query(scn))
    assert back == scn and notes == []
    _, notes = state.from_query({"nodes": "-1", "dp": "0"})
    assert len(notes) == 2                               # out of bounds: reported, default used


def test_claims_page_baseline_is_the_api_on_the_whole_layout():
    at = run("claims", **{**DSV3, "ep": 8, "dp": 2, "claim_mode": "free", "claim_metric": "tpot_s"})
    clean(at)
    assert not at.error, [e.value for e in at.error]
    two, one = reference(tp=4, dp=2, ep=8), reference(tp=4, ep=4)
    assert two.tpot_s != one.tpot_s                     # the layout matters to the model ...
    assert metrics(at)["Baseline"] == f"{num(two.tpot_s)} s"   # ... and the claim's baseline
    # the TP lever cannot keep the GPU count under DP: one line says what it does instead
    lines = [i.value for i in at.info if i.value.startswith("parallelism:")]
    assert len(lines) == 1 and "keep DP 2 and EP 8" in lines[0] and "\n" not in lines[0]
    assert not any("not modelled" in i.value for i in at.info)


def test_claim_baseline_carries_every_layout_field_of_the_query():
    from perfmodel.analysis.claims.metrics import evaluate as claim_evaluate
    from perfmodel.webapp.data_pages import claim_baseline

    scn = state.UIScenario(model="deepseek-v3", gpu="h200-sxm", weights="fp8", tp=4, dp=2, ep=8,
                           nodes=2, batch=8, prompt=1024, output=256)
    base = claim_baseline(scn)
    q = ui_query(scn)
    assert (base.tp, base.pp, base.ep, base.dp, base.nodes) == (q.tp, q.pp, q.ep, q.dp, q.nodes)
    ev = claim_evaluate(base)
    ref = api.evaluate(q)
    assert ev.values["tpot_s"] == pytest.approx(ref.tpot_s, rel=1e-12)
    assert ev.values["ttft_s"] == pytest.approx(ref.ttft_s, rel=1e-12)
    assert ev.num_gpus == 8


def _bench_run(levels=(1, 4), requests=4, prompt=1024, output=256):
    """A bench-endpoint run (timings arbitrary: only the predictions beside them are checked)."""
    from perfmodel.analysis.endpoint import (BenchmarkRun, EndpointConfig, LevelResult,
                                             RequestSample, ServerInfo, find_knee, summarize)
    from perfmodel.analysis.endpoint.record import build_record

    cfg = EndpointConfig(url="http://127.0.0.1:8000/v1", model="dsv3", concurrency=levels,
                         requests=requests, prompt_tokens=prompt, max_tokens=output)
    results = []
    for c in levels:
        samples = [RequestSample(index=i, ok=True, start_s=0.0, ttft_s=0.5,
                                 end_s=0.5 + 0.02 * (output - 1), output_tokens=output, prompt_tokens=prompt, tokens_source="usage",
                                 finish_reason="length") for i in range(requests)]
        results.append(LevelResult(concurrency=c, requests_planned=requests,
                                   stats=summarize(samples), requests=samples))
    info = ServerInfo(model_ids=["dsv3"], owned_by="sglang", server_header=None)
    record = build_record(cfg, info, date="2026-12-01T00:00:00+00:00", levels=results,
                          total_time_s=10.0, gpus=None)
    return BenchmarkRun(config=cfg, record=record, levels=results, knee=find_knee(results))


def test_measure_page_predicts_on_the_whole_layout():
    from perfmodel.webapp.views.measure import RUN_KEY

    at = run(**{**DSV3, "ep": 8, "dp": 2})
    at.session_state[RUN_KEY] = _bench_run().model_dump_json()
    at.switch_page("perfmodel/webapp/views/measure.py").run()
    clean(at)
    assert not any("not used" in i.value for i in at.info)
    table = at.dataframe[0].value
    for level, shown in zip((1, 4), table["predicted TPOT (ms)"]):
        two, one = reference(tp=4, dp=2, ep=8, batch=level), reference(tp=4, ep=4, batch=level)
        assert two.tpot_s != one.tpot_s
        assert shown == num(two.tpot_s / MS)
    assert at.session_state["scenario"].dp == 2


def test_speculative_page_uses_the_layout():
    from perfmodel.analysis.speculative import speculative_estimate

    at = run("speculative", **{**DSV3, "ep": 8, "dp": 2, "spec_method": "mtp"})
    clean(at)
    scn = at.session_state["scenario"]
    assert scn.dp == 2
    kw = dict(method="mtp", gamma=scn.spec_gamma, acceptance=scn.spec_alpha, batch=8, context=1024)
    with_dp = speculative_estimate(**api_kwargs(scn), **kw)
    without = speculative_estimate(**{**api_kwargs(scn), "dp": 1, "ep": 4}, **kw)
    assert with_dp.tpot_s != without.tpot_s
    assert metrics(at)["TPOT"].startswith(f"{num(with_dp.tpot_s / MS)} ms")


def test_sweep_memory_curve_is_on_the_whole_layout():
    from perfmodel.webapp import data

    scn = state.UIScenario(model="deepseek-v3", gpu="h200-sxm", weights="fp8", tp=4, dp=2, ep=8)
    got = data.memory_at.__wrapped__(scn.key(), 8, 4096)
    want = api.memory("deepseek-v3", "h200-sxm", weights="fp8", batch=8, context=4096, tp=4,
                      ep=8, dp=2)
    assert got.total_bytes == want.total_bytes
    four = api.memory("deepseek-v3", "h200-sxm", weights="fp8", batch=8, context=4096, tp=4, ep=4)
    assert got.weight_bytes < four.weight_bytes          # experts over 8 GPUs, not the 4 of one group
