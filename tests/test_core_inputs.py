"""Bad input to the core entry points: a typed result or a clean PerfModelError, never a
traceback, NaN or inf (api.resolve/memory, sweep, load_engine, load_profile, Precision.of,
step_time, the models/gpus commands)."""

import math

import numpy as np
import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from perfmodel import api
from perfmodel.cli import main
from perfmodel.core.efficiency import default_efficiency
from perfmodel.core.engines import ENGINES, load_engine
from perfmodel.core.errors import PerfModelError, UnknownIdError
from perfmodel.core.hardware import load_gpu
from perfmodel.core.memory import MemoryEstimate
from perfmodel.core.predict import Scenario
from perfmodel.core.profile import load_profile
from perfmodel.core.roofline import step_time
from perfmodel.core.specs import Efficiency, Precision
from perfmodel.analysis.sweep import SweepSpec, sweep_arrays

MODELS = ["llama-3.1-8b", "mixtral-8x7b", "deepseek-v3", "gemma-2-9b", "gpt-oss-20b",
          "qwen3-30b-a3b", "nope"]
GPUS = ["h100-sxm", "a100-sxm-80gb", "t4", "mi300x", "apple-m4-max", "tpu-v5e", "b200", "zzz"]
PRECISIONS = ["bf16", "fp16", "fp32", "fp8", "int8", "int4", "int4-g32", "fp4", "fp4-g16", "q4",
              "", "int8-g0", "BF16 "]
odd_ints = st.one_of(st.integers(-3, 70000), st.sampled_from([0, 10**12, 10**30]),
                     st.sampled_from([None, 1.5, "8", True, float("nan")]))


def _finite(obj) -> None:
    for k, v in obj.model_dump().items():
        if isinstance(v, float):
            assert math.isfinite(v), k


# ----------------------------------------------------------------- NaN / inf in spec files


def _card(tmp_path, **update):
    spec = {**load_gpu("h100-sxm").model_dump(mode="json"), "id": "odd-card", **update}
    d = tmp_path / "hw"
    d.mkdir(exist_ok=True)
    (d / "odd-card.yaml").write_text(yaml.safe_dump(spec))
    return str(d)


@pytest.mark.parametrize("update", [{"memory_bandwidth_bytes_per_s": float("inf")},
                                    {"memory_bytes": float("nan")},
                                    {"peak_flops_per_s": {"bf16": float("inf")}}])
def test_non_finite_hardware_figures_are_file_errors(tmp_path, update):
    d = _card(tmp_path, **update)
    with pytest.raises(PerfModelError, match="finite"):
        api.predict_request("llama-3.1-8b", "odd-card", hardware_dir=d)


def test_a_card_without_any_float_peak_is_a_clean_error(tmp_path):
    d = _card(tmp_path, peak_flops_per_s={"int8": 1e15})
    with pytest.raises(PerfModelError, match="no bf16, fp16 or fp32"):
        api.predict_request("llama-3.1-8b", "odd-card", hardware_dir=d)


@pytest.mark.parametrize("body,field", [
    ("engines: {vllm: {launch_s: -1}}", "launch_s"),
    ("engines: {vllm: {graph_launch_s: .inf}}", "graph_launch_s"),
    ("engines: {trtllm: {kernels_per_layer: .nan}}", "kernels_per_layer"),
    ("gpu: h100-sxm\nefficiency: {mem_bw: 0.8, gemm_max: 0.7, gemm_half_m: .inf, "
     "attn_compute: 0.5, attn_mem: 0.8, kernel_s: 1.0e-6, link: 0.7}", "gemm_half_m"),
])
def test_bad_profile_values_name_the_file_and_field(tmp_path, body, field):
    f = tmp_path / "prof.yaml"
    f.write_text(body + "\n")
    with pytest.raises(PerfModelError, match=field) as exc:
        load_profile(f)
    assert "prof.yaml" in str(exc.value)
    with pytest.raises(PerfModelError):
        api.predict_request("llama-3.1-8b", "h100-sxm", profile=str(f))


def test_efficiency_rejects_infinity():
    fields = dict(mem_bw=0.8, gemm_max=0.7, gemm_half_m=16, attn_compute=0.5, attn_mem=0.8,
                  kernel_s=1e-6, link=0.7)
    Efficiency(**fields)
    with pytest.raises(ValueError):
        Efficiency(**{**fields, "kernel_s": float("inf")})


@pytest.mark.parametrize("query", [None, 5, "", "VLLM-", "vllm x"])
def test_engine_ids_of_any_type_are_unknown_id_errors(query):
    with pytest.raises(UnknownIdError):
        load_engine(query)


# ----------------------------------------------------------------- hypothesis over the API


@given(st.sampled_from(MODELS), st.sampled_from(GPUS), st.sampled_from(PRECISIONS),
       st.sampled_from(PRECISIONS + [None]), odd_ints, odd_ints, st.sampled_from([1, 2, 3, 8, 0]),
       st.sampled_from([1, 2, 3]), st.sampled_from(list(ENGINES) + ["nope", None]))
def test_memory_api_returns_a_finite_estimate_or_a_clean_error(model, gpu, w, kv, batch, context,
                                                               tp, pp, engine):
    try:
        m = api.memory(model, gpu, weights=w, kv=kv, batch=batch, context=context, tp=tp, pp=pp,
                       engine=engine)
    except PerfModelError as exc:
        assert str(exc) and "\n" not in str(exc)
        return
    assert isinstance(m, MemoryEstimate)
    _finite(m)
    assert m.fits == (m.total_bytes <= m.capacity_bytes)
    assert 0 <= m.max_batch and 0 <= m.max_context


@given(st.sampled_from(MODELS), st.sampled_from(GPUS), st.sampled_from(PRECISIONS),
       st.sampled_from(PRECISIONS + [None]), st.sampled_from(PRECISIONS + [None]),
       st.sampled_from(list(ENGINES) + ["x"]), st.sampled_from([1, 2, 4, 16, 0, -1]),
       st.sampled_from([1, 2, 0]), st.sampled_from([1, 2, 8, 3]),
       st.sampled_from([None, "naive", "flash", "paged", "xformers"]))
def test_resolve_gives_a_scenario_or_a_clean_error(model, gpu, w, kv, act, engine, tp, pp, ep,
                                                   attention):
    try:
        sc, warnings, assumptions = api.resolve(model, gpu, weights=w, kv=kv, activations=act,
                                                engine=engine, tp=tp, pp=pp, ep=ep,
                                                attention=attention)
    except PerfModelError as exc:
        assert str(exc)
        return
    assert isinstance(sc, Scenario)
    assert all(isinstance(x, str) for x in warnings + assumptions)


@given(st.lists(st.sampled_from(MODELS), min_size=1, max_size=2),
       st.lists(st.sampled_from(GPUS), min_size=1, max_size=2),
       st.lists(st.sampled_from(PRECISIONS), min_size=1, max_size=2),
       st.lists(st.one_of(st.integers(-2, 4096), st.sampled_from([10**9, 2.5, "4", None])),
                max_size=3),
       st.lists(st.integers(1, 200_000), min_size=1, max_size=2),
       st.sampled_from([(1,), (2,), (3,), (1, 8), ()]))
def test_sweep_returns_finite_columns_or_a_clean_error(models, gpus, weights, batches, prompts, tps):
    spec = SweepSpec(models=models, gpus=gpus, weights=weights, kvs=["bf16"], engines=["vllm"],
                     batches=batches, prompts=prompts, outputs=[64], tps=tps)
    try:
        cols = sweep_arrays(spec)
    except PerfModelError as exc:
        assert str(exc)
        return
    n = len(cols["batch"])
    assert n > 0 and all(len(v) == n for v in cols.values())
    for k in ("ttft_s", "tpot_s", "e2e_s", "mbu", "mfu"):
        assert np.all(np.isfinite(cols[k])) and np.all(cols[k] > 0), k


@given(st.text(max_size=12) | st.sampled_from(PRECISIONS))
def test_precision_names_parse_or_raise_value_error(text):
    try:
        p = Precision.of(text)
    except ValueError as exc:
        assert "precision" in str(exc)
        return
    assert p.weights.bytes_per_element > 0


@given(st.sampled_from(MODELS[:-1]), st.sampled_from(GPUS[:-1]), st.sampled_from(list(ENGINES)),
       st.sampled_from(["bf16", "fp8", "int4", "fp4"]), st.integers(1, 10**6),
       st.integers(1, 4096), st.integers(0, 10**6), st.booleans())
def test_step_time_is_finite_and_positive_for_any_shape(model, gpu, engine, w, B, T, S, naive):
    sc, _, _ = api.resolve(model, gpu, weights=w, engine=engine)
    try:
        est = step_time(sc.model, sc.hw, sc.precision, sc.engine, default_efficiency(sc.hw), B, T,
                        S, attention="naive" if naive else None)
    except PerfModelError:
        return
    assert math.isfinite(float(est.time_s)) and float(est.time_s) > 0
    assert est.bound in ("compute", "memory", "communication", "overhead")


@given(st.sampled_from(["models", "gpus"]),
       st.lists(st.sampled_from(["--json", "h100-sxm", "zzz", "--hardware-dir", "/nope", "", "x",
                                 "--bad"]), max_size=4))
def test_catalog_commands_exit_0_or_2(command, extra):
    assert main([command, *extra]) in (0, 2)
