"""bench-endpoint's prediction beside each level (PredictSpec) on a whole layout: tp, pp, ep,
attention dp and nodes reach the one Query, so the prediction is api.evaluate's for the same
deployment; a bad layout is a typed error (the spec) or one PerfModelError line (the model),
and the CLI refuses it in one line before any request is sent."""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from perfmodel import api
from perfmodel.analysis.endpoint import PredictSpec
from perfmodel.analysis.endpoint.predict import predict_one
from perfmodel.cli import main
from perfmodel.core.errors import PerfModelError
from perfmodel.core.query import make_query

DSV3 = dict(model="deepseek-v3", gpu="h200-sxm", weights="fp8")


def test_layout_reaches_the_query_and_changes_the_prediction():
    spec = PredictSpec(**DSV3, tp=4, dp=2, ep=8, nodes=1)
    q = spec.query(batch=8, prompt_tokens=1024, output_tokens=256)
    assert (q.tp, q.pp, q.ep, q.dp, q.nodes) == (4, 1, 8, 2, 1)
    got = predict_one(spec, batch=8, prompt=1024, output=256)
    want = api.evaluate(make_query(**DSV3, tp=4, dp=2, ep=8, nodes=1, batch=8,
                                   prompt_tokens=1024, output_tokens=256))
    one = predict_one(PredictSpec(**DSV3, tp=4, ep=4), batch=8, prompt=1024, output=256)
    assert got.tpot_s == want.tpot_s and got.ttft_s == want.ttft_s
    assert got.tpot_s != one.tpot_s


def test_a_run_saved_before_the_layout_fields_reads_as_one_gpu():
    old = PredictSpec.model_validate({"model": "llama-3.1-8b", "gpu": "h100-sxm",
                                      "engine": "vllm", "weights": "bf16", "kv": None})
    assert (old.tp, old.pp, old.ep, old.dp, old.nodes) == (1, 1, 1, 1, None)


def test_cli_bad_layout_is_one_line_before_any_request(capsys):
    # port 9 (discard) is never contacted: the first level is predicted before requests
    rc = main(["bench-endpoint", "--url", "http://127.0.0.1:9/v1", "--model", "dsv3",
               "--predict", "--predict-model", "deepseek-v3", "--gpu", "h200-sxm",
               "--weights", "fp8", "--tp", "4", "--dp", "2", "--ep", "8", "--nodes", "3",
               "--no-progress"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and err.count("\n") == 0 and "nodes" in err and "Traceback" not in err


@settings(max_examples=30, deadline=None)
@given(tp=st.integers(0, 9), pp=st.integers(0, 3), ep=st.sampled_from([0, 1, 2, 3, 4, 8, 16]),
       dp=st.integers(0, 4), nodes=st.one_of(st.none(), st.integers(-1, 5)),
       model=st.sampled_from(["deepseek-v3", "llama-3.1-8b", "mixtral-8x7b"]))
def test_fuzz_layouts_give_a_prediction_or_a_clean_error(tp, pp, ep, dp, nodes, model):
    try:
        spec = PredictSpec(model=model, gpu="h200-sxm", weights="fp8", tp=tp, pp=pp, ep=ep,
                           dp=dp, nodes=nodes)
    except ValidationError:
        assert min(tp, pp, ep, dp) < 1 or (nodes is not None and nodes < 1)
        return
    try:
        ev = predict_one(spec, batch=4, prompt=512, output=64)
    except PerfModelError as exc:
        assert str(exc) and "\n" not in str(exc)
        return
    assert all(math.isfinite(v) and v > 0 for v in (ev.ttft_s, ev.tpot_s, ev.e2e_s))
    q = make_query(model=model, gpu="h200-sxm", weights="fp8", tp=tp, pp=pp, ep=ep, dp=dp,
                   nodes=nodes, batch=4, prompt_tokens=512, output_tokens=64)
    assert ev.tpot_s == pytest.approx(api.evaluate(q).tpot_s, rel=1e-12)
