"""Every public function of perfmodel/api.py (its __all__) called with random and invalid
arguments: a typed result whose every float is finite, or PerfModelError (pydantic's
ValidationError for make_query, the Query's own check). test_fuzz_api.py covers
predict_request, memory and the analysis entry points; this file the rest: make_query,
resolve, evaluate (with arrays), op_breakdown, serve and serve_disagg."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from fuzz_harness import assert_finite
from perfmodel import api
from perfmodel.core.errors import PerfModelError
from perfmodel.core.query import Query

JUNK = [None, 0, -1, 1.5, math.nan, math.inf, -math.inf, 1e308, 10**400, True, "", "x", "NaN",
        [], {}, [None], object(), b"b", ("fp8",), np.nan, np.array([1, 2]), np.array([]),
        np.array([np.nan]), np.array([[1]]), 2**63]
SMALL = dict(model="llama-3.1-8b", gpu="h100-sxm", prompt_tokens=32, output_tokens=3)


def _typed_or_clean(f, *args, **kw):
    try:
        r = f(*args, **kw)
    except (PerfModelError, ValidationError):
        return None
    assert_finite(r)
    return r


def _value(good):
    return st.one_of(st.sampled_from(good), st.sampled_from(JUNK))


def test_every_public_function_is_fuzzed_somewhere():
    covered = {"make_query", "resolve", "evaluate", "op_breakdown", "serve", "serve_disagg",
               "predict_request", "memory"}     # the last two: tests/test_fuzz_api.py
    functions = {n for n in api.__all__ if callable(getattr(api, n))
                 and not isinstance(getattr(api, n), type)}
    assert functions <= covered, functions - covered


@settings(max_examples=40)
@given(field=st.sampled_from(sorted(Query.model_fields)), value=st.sampled_from(JUNK))
def test_make_query_with_a_junk_field(field, value):
    _typed_or_clean(api.make_query, **{**SMALL, "batch": 2, field: value})


@settings(max_examples=40)
@given(model=_value(["llama-3.1-8b", "mixtral-8x7b"]), gpu=_value(["h100-sxm", "mi300x"]),
       weights=_value(["bf16", "fp8", "bf16,experts=fp4"]), kv=_value([None, "fp8"]),
       engine=_value(["vllm", "trtllm"]), tp=_value([1, 2, 3]))
def test_resolve_with_junk_ids(model, gpu, weights, kv, engine, tp):
    r = _typed_or_clean(api.resolve, model, gpu, weights=weights, kv=kv, engine=engine, tp=tp)
    assert r is None or len(r) == 3


@settings(max_examples=40)
@given(field=st.sampled_from(["batch", "prompt_tokens", "output_tokens", "context_tokens"]),
       value=st.one_of(st.sampled_from(JUNK), st.lists(st.integers(-5, 200_000), min_size=1,
                                                       max_size=4).map(np.array)))
def test_evaluate_with_a_junk_array(field, value):
    q = api.make_query(**SMALL, batch=2)
    _typed_or_clean(api.evaluate, q, **{field: value})


@settings(max_examples=25)
@given(value=st.one_of(st.sampled_from(JUNK), st.lists(st.sampled_from(JUNK), max_size=3)))
def test_op_breakdown_with_junk(value):
    _typed_or_clean(api.op_breakdown, value)


def test_op_breakdown_of_hand_made_times():
    from perfmodel.core.roofline import OpTime
    rows = api.op_breakdown([OpTime("mlp", "gemm", 3e-3, 1e-3, 3e-3, 1e9, 2e9),
                             OpTime("allreduce", "comm", 1e-3, 0.0, 0.0, 0.0, 0.0)])
    assert [(r.share, r.bound) for r in rows] == [(0.75, "memory"), (0.25, "communication")]


@settings(max_examples=25)
@given(kw=st.fixed_dictionaries({}, optional={
    "concurrencies": _value([[1, 2], 4]), "rate_rps": _value([2.0, [1.0, 3.0]]),
    "timeline": _value([False, True])}))
def test_serve_with_junk_levels(kw):
    q = api.make_query(**SMALL, num_requests=4)
    _typed_or_clean(api.serve, q, **kw)


@settings(max_examples=25)
@given(kw=st.fixed_dictionaries({}, optional={
    "prefill": _value([dict(workers=1), dict(workers=1, tp=2)]),
    "decode": _value([dict(workers=1), dict(workers=2)]),
    "weights": _value(["bf16", "fp8"]), "kv": _value([None, "fp8"]),
    "engine": _value(["vllm", "sglang"]), "prompt_tokens": _value([32]),
    "output_tokens": _value([3]), "concurrencies": _value([[2]]), "num_requests": _value([4]),
    "seed": _value([0, 7])}))
def test_serve_disagg_with_junk(kw):
    args = dict(prefill=dict(workers=1), decode=dict(workers=1), prompt_tokens=32,
                output_tokens=3, concurrencies=[2], num_requests=4)
    _typed_or_clean(api.serve_disagg, "llama-3.1-8b", "h100-sxm", **{**args, **kw})


@pytest.mark.parametrize("call", [
    # each raised a bare Python error before (TypeError/AttributeError, OverflowError, ValueError)
    lambda: api.op_breakdown(None),
    lambda: api.op_breakdown(["x"]),
    lambda: api.serve(api.make_query(**SMALL), rate_rps=10**400),
    lambda: api.serve_disagg("llama-3.1-8b", "h100-sxm", prefill=dict(workers=1),
                             decode=dict(workers=1), prompt_tokens=32, output_tokens=3,
                             concurrencies=[2], weights=np.array([1, 2])),
])
def test_former_bare_errors_are_clean(call):
    with pytest.raises(PerfModelError):
        call()
