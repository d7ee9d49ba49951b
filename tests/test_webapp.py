"""The web calculator through streamlit.testing's AppTest: every page runs without an
exception, shows its key numbers with units, and the numbers follow the inputs, the URL
and the uploaded files. Expected values come from perfmodel's public API, not the page."""

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from streamlit.testing.v1 import AppTest

from perfmodel import api
from perfmodel.core.engines import ENGINES
from perfmodel.core.units import MS
from perfmodel.webapp import state
from perfmodel.webapp.inputs import INTERNAL_ERROR
from perfmodel.webapp.texts import DEFINITIONS, num

from conftest import ROOT

APP = str(ROOT / "app.py")
VIEWS = "perfmodel/webapp/views/"


def run(page: str | None = None, **query) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=30)
    for k, v in query.items():
        at.query_params[k] = str(v)
    at.run()
    if page:
        at.switch_page(f"{VIEWS}{page}.py").run()
    return at


def clean(at: AppTest) -> None:
    assert not at.exception, at.exception
    assert not [e.value for e in at.error if INTERNAL_ERROR in e.value]


def metrics(at: AppTest) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


def number(text: str) -> float:
    return float(text.split()[0].replace(",", "").lstrip("x"))


@pytest.fixture(autouse=True)
def uploads(tmp_path, monkeypatch):
    monkeypatch.setenv("PERFMODEL_WEBAPP_UPLOADS", str(tmp_path / "uploads"))


# --------------------------------------------------------------------------- calculator


def test_calculator_shows_every_key_number_with_unit_and_definition():
    at = run()
    clean(at)
    m = metrics(at)
    units = {"TTFT": "ms", "TPOT": "ms", "E2E": "s", "Per user": "tok/s", "Aggregate": "tok/s",
             "MBU": "%", "MFU": "%"}
    for label, unit in units.items():
        assert m[label].endswith(" " + unit), (label, m[label])
    assert m["Bound (decode)"] in ("memory", "compute", "communication", "overhead")
    assert any(k.startswith("Memory/GPU") and v.endswith(" GB") for k, v in m.items())
    assert all(x.proto.help for x in at.metric)              # every number has its definition
    assert len(at.get("plotly_chart")) == 4                  # memory, ops, roofline, tornado


def test_calculator_matches_the_api_and_follows_inputs():
    at = run()
    ref = api.predict_request("llama-3.1-8b", "h100-sxm", batch=8, prompt=1024, output=256)
    m0 = metrics(at)
    assert m0["TPOT"] == f"{num(ref.tpot_s / MS)} ms"
    assert m0["TTFT"] == f"{num(ref.ttft_s / MS)} ms"
    at.sidebar.number_input(key="w_batch").set_value(64).run()
    clean(at)
    m1 = metrics(at)
    assert number(m1["Aggregate"]) > number(m0["Aggregate"])
    assert number(m1["TPOT"]) > number(m0["TPOT"])
    assert at.query_params["batch"] == ["64"] or at.query_params["batch"] == "64"
    at.sidebar.selectbox(key="w_gpu").set_value("h200-sxm").run()   # 4.8 vs 3.35 TB/s
    assert number(metrics(at)["TPOT"]) < number(m1["TPOT"])


def test_url_reproduces_the_scenario():
    q = dict(model="qwen2.5-7b", gpu="h200-sxm", weights="fp8", kv="fp8", batch=32, prompt=2048,
             output=128, engine="sglang")
    at = run(**q)
    clean(at)
    ref = api.predict_request("qwen2.5-7b", "h200-sxm", weights="fp8", kv="fp8", batch=32,
                              prompt=2048, output=128, engine="sglang")
    assert metrics(at)["TPOT"] == f"{num(ref.tpot_s / MS)} ms"
    assert at.session_state["scenario"].engine == "sglang"


def test_bad_inputs_are_one_line_messages_not_tracebacks():
    at = run(tp=3)                                  # 32 heads are not divisible by 3
    clean(at)
    assert at.error and "does not divide" in at.error[0].value and "\n" not in at.error[0].value
    at = run(model="llama-9-1b")
    clean(at)
    assert "unknown model" in at.error[0].value
    at = run(batch="abc", spec_alpha="2")
    clean(at)
    assert sum("ignored" in w.value for w in at.sidebar.warning) == 2
    assert metrics(at)["TPOT"]                         # defaults used, page still works


def test_does_not_fit_is_shown_inline():
    at = run(model="llama-3.1-70b", gpu="rtx-4090")
    clean(at)
    assert metrics(at)["Fits? / max batch"].startswith("NO")
    assert any("Does not fit" in e.value for e in at.error)
    assert any("does not fit" in w.value for w in at.warning)


def test_sensitivity_metric_choice_changes_the_chart():
    at = run()
    title = lambda: json.loads(at.get("plotly_chart")[-1].proto.spec)["layout"]["title"]["text"]
    assert "TPOT" in title()
    at.selectbox(key="w_metric").set_value("ttft_s").run()
    clean(at)
    assert "TTFT" in title()


# --------------------------------------------------------------------------- uploads and JSON

LLAMA_HALF = {  # Llama-3.1-8B's published config.json with 16 of its 32 layers
    "model_type": "llama", "hidden_size": 4096, "intermediate_size": 14336,
    "num_hidden_layers": 16, "num_attention_heads": 32, "num_key_value_heads": 8,
    "vocab_size": 128256, "max_position_embeddings": 131072, "rms_norm_eps": 1e-5,
    "tie_word_embeddings": False}


def test_uploaded_config_and_gpu_are_used_and_travel_in_json(root):
    ref = state.save_upload("model", json.dumps(LLAMA_HALF).encode(), "config.json")
    gpu_yaml = (root / "hardware_db" / "h100-sxm.yaml").read_text()
    gref = state.save_upload("gpu", gpu_yaml.replace("id: h100-sxm", "id: my-h100").encode(), "my.yaml")
    at = run(model=ref, gpu=gref)
    clean(at)
    half = number(metrics(at)["TPOT"])
    full = api.predict_request("llama-3.1-8b", "h100-sxm", batch=8, prompt=1024, output=256)
    assert half < full.tpot_s / MS                      # half the layers: a faster step
    doc = state.to_json(at.session_state["scenario"])
    assert json.loads(doc)["uploads"]["model"].startswith("{")
    assert state.from_json(doc) == at.session_state["scenario"]


def test_bad_uploads_and_scenario_files_raise_one_line():
    from perfmodel.core.errors import PerfModelError
    for kind, data in (("gpu", b"id: [unclosed"), ("model", b"{\"model_type\": \"nope\"}"),
                       ("profile", b"\xff\xfe"), ("gpu", b"{}")):
        with pytest.raises(PerfModelError) as exc:
            state.save_upload(kind, data, "f")
        assert "\n" not in str(exc.value) and "/" not in str(exc.value).split(":")[0]
    for doc in (b"not json", b"[]", json.dumps({"kind": "perfmodel-scenario", "scenario": {"batch": 0}}),
                json.dumps({"kind": "perfmodel-scenario", "scenario": {"zzz": 1}})):
        with pytest.raises(PerfModelError):
            state.from_json(doc)
    with pytest.raises(PerfModelError, match="not on this server"):
        state.upload_path("upload:0123456789abcdef.json")
    with pytest.raises(PerfModelError):
        state.upload_path("upload:../../etc/passwd")


def test_query_round_trip():
    scn = state.UIScenario(model="mixtral-8x7b", tp=2, batch=17, spec_alpha=0.55, metric="e2e_s")
    back, notes = state.from_query(state.to_query(scn))
    assert back == scn and notes == []


# --------------------------------------------------------------------------- fuzz

PAGES = ["calculator", "sweep", "serving", "compare", "speculative", "claims", "calibration",
         "accuracy", "measure", "definitions"]
MODELS = ["llama-3.1-8b", "mixtral-8x7b", "deepseek-v3", "gemma-2-9b", "qwen3-30b-a3b", "phi-3-mini"]
GPUS = ["h100-sxm", "a10", "mi300x", "t4", "rtx-4090", "apple-m4-max", "tpu-v5e"]


@settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))
@given(model=st.sampled_from(MODELS), gpu=st.sampled_from(GPUS),
       weights=st.sampled_from(["bf16", "fp8", "int4", "fp4", "fp32", "int4-g64"]),
       act=st.sampled_from(["auto", "fp8", "int8", "bf16", "fp4"]),
       kv=st.sampled_from(["bf16", "fp8", "int4"]), engine=st.sampled_from(sorted(ENGINES)),
       tp=st.sampled_from([1, 2, 3, 8]), pp=st.sampled_from([1, 2]),
       ep=st.sampled_from([1, 2, 8]), dp=st.sampled_from([1, 2, 3]), nodes=st.sampled_from([0, 1, 2, 3]),
       batch=st.integers(1, 5000), prompt=st.integers(1, 300_000), output=st.integers(1, 5000),
       page=st.sampled_from(PAGES))
def test_fuzz_widgets_never_raise(model, gpu, weights, act, kv, engine, tp, pp, ep, dp, nodes,
                                  batch, prompt, output, page):
    at = run(None if page == "calculator" else page)
    if page in ("accuracy", "definitions"):           # no scenario widgets there
        clean(at)
        return
    sb = at.sidebar
    sb.selectbox(key="w_model").set_value(model)
    sb.selectbox(key="w_gpu").set_value(gpu)
    sb.selectbox(key="w_weights").set_value(weights)
    sb.selectbox(key="w_activations").set_value(act)
    sb.selectbox(key="w_kv").set_value(kv)
    sb.selectbox(key="w_engine").set_value(engine)
    for k, v in (("w_tp", tp), ("w_pp", pp), ("w_ep", ep), ("w_dp", dp), ("w_nodes", nodes),
                 ("w_batch", batch), ("w_prompt", prompt), ("w_output", output)):
        sb.number_input(key=k).set_value(v)
    at.run()
    clean(at)
    assert at.metric or at.error or at.dataframe or at.info   # a result or a readable reason


@settings(max_examples=10, deadline=None, suppress_health_check=list(HealthCheck))
@given(params=st.dictionaries(st.sampled_from(list(state.FIELDS)),
                              st.one_of(st.text(max_size=12), st.sampled_from(
                                  ["0", "-1", "1e9", "nan", "inf", "999999999", "upload:zz", ",,",
                                   "h100-sxm", "fp8", "int4-g7", "0.999"])), max_size=6),
       page=st.sampled_from(PAGES))
def test_fuzz_url_never_raises(params, page):
    at = run(None if page == "calculator" else page, **params)
    clean(at)


def test_sidebar_widgets_are_labelled_by_the_query_fields():
    from perfmodel.core.query import Query, field_help, field_label
    from perfmodel.webapp import inputs, state

    for ui_name, q_name in inputs.QUERY_OF.items():
        assert ui_name in state.UIScenario.model_fields
        assert Query.model_fields[q_name].title == field_label(q_name) and field_help(q_name)
    assert field_label("prompt_tokens") == "Prompt (tokens)"    # the sidebar's label before
    assert inputs._bounds("tp") == (1, state.MAX_GPUS)
    assert inputs._bounds("dp") == (1, state.MAX_GPUS)
    assert inputs._bounds("nodes") == (0, state.MAX_GPUS)         # 0: not given
    assert inputs._bounds("prompt") == (1, state.MAX_TOKENS)
