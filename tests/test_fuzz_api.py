"""The API entry points the CLI and the web app use, called with junk arguments (issue 17):
each returns a typed result whose numbers are finite, or raises PerfModelError."""

import math
from pathlib import Path

import pytest
from hypothesis import given, strategies as st

from fuzz_harness import assert_finite
from perfmodel import api
from perfmodel.analysis import sizing, speculative
from perfmodel.core.engines import ENGINES
from perfmodel.core.errors import PerfModelError
from perfmodel.core.profile import Profile, apply_engine
from perfmodel.serving import curve

ROOT = Path(__file__).resolve().parent.parent
JUNK = [None, 0, -1, 1.5, math.nan, math.inf, 1e308, 10**400, True, "", "x", "h100-sxm", [],
        {}, [None], ["h100-sxm", 5], {"a": 1}, object(), b"bytes", ("fp8",)]
GOOD = {
    "model": ["llama-3.1-8b", "qwen2.5-72b", "deepseek-r1", "mixtral-8x7b"],
    "gpu": ["h100-sxm", "a10", "gb200", "rtx-4090"],
    "weights": ["bf16", "fp8", "int4", "fp32"], "kv": [None, "fp8", "bf16"],
    "activations": [None, "fp8", "fp32"], "engine": list(ENGINES),
    "batch": [1, 8, 256], "prompt": [1, 512, 100_000], "output": [1, 128, 4096],
    "context": [None, 0, 4096, 116_000], "tp": [1, 2, 4, 8], "pp": [1, 2], "ep": [1, 4],
    "new_tokens": [1, 8], "rate_rps": [0.0, 1.0, 1e4], "ttft_slo_s": [None, 0.5, 1e-9],
    "tpot_slo_s": [None, 0.05, 1e-9], "gpus": [None, ["h100-sxm"], ["a10", "h200-sxm"]],
    "precisions": [None, ["fp8"], ["bf16/fp8"]], "engines": [None, ["vllm"], ["sglang"]],
    "max_gpus": [1, 8], "concurrencies": [None, [1, 2, 64]], "max_batch": [None, 1, 64],
    "limit": [1, 20], "counts": [None, [1, 2]], "prices": [None, {"h100-sxm": 2.5}],
}


def _kwargs(names):
    return st.fixed_dictionaries({n: st.one_of(st.sampled_from(GOOD.get(n, [None])),
                                               st.sampled_from(GOOD.get(n, [None])),
                                               st.sampled_from(JUNK)) for n in names})


def _call(fn, kw):
    try:
        out = fn(**kw)
    except PerfModelError:
        return None
    assert_finite(out)
    return out


@given(_kwargs(["model", "gpu", "weights", "kv", "activations", "engine", "batch", "prompt",
                "output", "context", "new_tokens", "tp", "pp", "ep"]))
def test_predict_request_junk(kw):
    r = _call(api.predict_request, kw)
    if r is not None:
        assert 0 <= r.mfu <= 1 + 1e-9 and 0 <= r.mbu <= 1 + 1e-9


@given(_kwargs(["model", "gpu", "weights", "kv", "engine", "tp", "pp", "prompt", "output",
                "concurrencies", "ttft_slo_s", "tpot_slo_s", "max_batch"]))
def test_serve_curve_junk(kw):
    _call(curve.serve_curve, kw)


@given(_kwargs(["model", "rate_rps", "prompt", "output", "ttft_slo_s", "tpot_slo_s", "gpus",
                "precisions", "engines", "max_gpus", "counts", "prices", "limit"]))
def test_size_junk(kw):
    _call(sizing.size, kw)


@given(st.sampled_from(JUNK + [{"vllm": {"launch_s": "x"}}, {"vllm": None}, {"vllm": [1]},
                               {"vllm": {"nope": 1}}, {5: {}}, {"vllm": {"launch_s": -1.0}}]))
def test_apply_engine_malformed_block(engines):
    try:
        prof = Profile.model_validate({"engines": engines})
    except Exception as exc:  # noqa: BLE001 - a malformed block may already fail the schema
        assert isinstance(exc, (PerfModelError, ValueError))
        return
    try:
        out = apply_engine(ENGINES["vllm"], prof)
    except PerfModelError:
        return
    assert out.id == "vllm"


@given(method=st.sampled_from(["draft", "eagle", "medusa", "ngram", "mtp", "x", None, 5]),
       acceptance=st.sampled_from([None, 0.0, 0.5, 1 - 1e-12, 1.0, 1e-300, -1.0, math.nan, "x"]),
       gamma=st.sampled_from([None, 1, 4, 64, 10**6, 0, -1, 2.5]),
       batch=st.sampled_from([1, 64, 0, 10**9]), context=st.sampled_from([1, 4096, 0, 10**12]))
def test_estimate_specs_extremes(method, acceptance, gamma, batch, context):
    sc, _, _ = api.resolve("llama-3.1-8b", "h100-sxm")
    _call(speculative.estimate_specs,
          dict(target=sc, method=method, batch=batch, context=context, gamma=gamma,
               acceptance=acceptance, mean_accepted_tokens=None if acceptance is not None else 2.0))


@pytest.mark.parametrize("field,value", [("memory_bandwidth_bytes_per_s", 1e-300),
                                         ("memory_bandwidth_bytes_per_s", 1e300)])
def test_extreme_gpu_file_gives_finite_result_or_clean_error(tmp_path, field, value):
    import yaml
    data = yaml.safe_load((ROOT / "hardware_db" / "h100-sxm.yaml").read_text())
    data["id"] = "extreme"
    data[field] = value
    data["peak_flops_per_s"] = {k: 1e-300 for k in data["peak_flops_per_s"]} \
        if value < 1 else data["peak_flops_per_s"]
    f = tmp_path / "extreme.yaml"
    f.write_text(yaml.safe_dump(data))
    _call(api.predict_request, dict(model="llama-3.1-8b", gpu=str(f), batch=4))


@pytest.mark.parametrize("engine,prof", [
    (None, None), ("vllm", None), (ENGINES["vllm"], {"engines": {}}),
    (ENGINES["vllm"], Profile.model_construct(engines={"vllm": [1, 2]})),
    (ENGINES["vllm"], Profile.model_construct(engines={"vllm": {5: 1}})),
    (ENGINES["vllm"], Profile.model_construct(engines={"vllm": {"launch_s": "x"}})),
    (ENGINES["vllm"], Profile.model_construct(engines=None)),
])
def test_apply_engine_wrong_types_are_clean_errors(engine, prof):
    """Issue 17: a malformed engine block raised TypeError/AttributeError."""
    try:
        out = apply_engine(engine, prof)
    except PerfModelError:
        return
    assert out is engine
