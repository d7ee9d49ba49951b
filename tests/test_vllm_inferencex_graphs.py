"""vLLM prompt steps within the CUDA-graph capture size replay piecewise graphs whose attention
runs eagerly (engines.VLLM_PIECEWISE_ATTENTION_S), and the InferenceX vLLM scripts from PR #947
on capture steps of up to 2048 tokens with a budget of 2 x ISL
(analysis/validation/serving_recipe_vllm.py INFERENCEX_VLLM_GRAPHED_SCRIPTS; docs/vllm_moe.md).

Golden numbers:
- vllm-project/vllm#25444 (Qwen3-Coder-30B-A3B-Instruct-FP8, 48 layers, one H100, 10 requests
  of 1024 in / 128 out): PIECEWISE 4.07 req/s, FULL_AND_PIECEWISE 5.98 req/s; with async
  scheduling 4.29 and 6.20.
- SemiAnalysisAI/InferenceX PR #947 (minimaxm2.5_fp8_b200.sh, v0.19.0): "Add
  --max-cudagraph-capture-size 2048", "Add --max-num-batched-tokens based on ISL" (the script:
  $((ISL * 2))); PR #1047 adds the same to kimik2.5_fp4_b200.sh (image v0.17.0)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from perfmodel.analysis.validation.serving_predict import _with_recipe
from perfmodel.analysis.validation.serving_recipe import recipe_for
from perfmodel.analysis.validation.serving_recipe_vllm import inferencex_vllm_graphs
from perfmodel.core.engines import VLLM_EAGER_LAUNCH_S, VLLM_PIECEWISE_ATTENTION_S
from perfmodel.core.resolve import resolve
from perfmodel.core.roofline import step_time

DUMP_APR = "db-dump/2026-04-27 measured 2026-04-22 image vllm/vllm-openai:v0.19.0-cu130"
DUMP_MAR = "db-dump/2026-04-27 measured 2026-03-27 image vllm/vllm-openai:v0.17.0"
KIMI_APR = "db-dump/2026-04-27 measured 2026-04-20 image vllm/vllm-openai:v0.17.0"


def test_the_piecewise_attention_cost_is_the_published_difference_per_layer():
    # vllm#25444: the same 10 x (1024 in, 128 out) burst; prompt steps run without graphs in
    # both modes, so the 127 decode steps carry the difference, over 48 layers
    per_layer = [(10 / pw - 10 / full) / 127 / 48 for pw, full in ((4.07, 5.98), (4.29, 6.20))]
    assert per_layer[0] == pytest.approx(129e-6, rel=0.01)
    assert per_layer[1] == pytest.approx(118e-6, rel=0.01)
    assert min(per_layer) <= VLLM_PIECEWISE_ATTENTION_S <= max(per_layer)


MM, _, _ = resolve("minimax-m2.5", "b200", weights="fp8", activations="fp8", kv="fp8",
                   tp=4, engine="vllm")


def _prompt_step(engine, T):
    T = np.asarray([T], dtype=float)
    return step_time(MM.model, MM.hw, MM.precision, engine, MM.eff, np.ones_like(T), T,
                     np.zeros_like(T), dep=MM.dep, attention=MM.attention, prefill=True)


def test_a_graphed_minimax_prompt_step_pays_its_62_eager_attention_calls():
    # 62 layers x 120 us = 7.44 ms on top of the GPU work, the graph replay and the step
    # overhead; above the capture size the step pays its ~1,260 kernels x 14 us instead
    graphed = MM.engine.model_copy(update={"prefill_graph_max_tokens": 2048})
    est = _prompt_step(graphed, 922.0)
    gpu, t = float(est.gpu_s[0]), float(est.time_s[0])
    want = gpu + 62 * 120e-6 + graphed.graph_launch_s + graphed.cpu_overhead_per_step_s
    assert t == pytest.approx(want, rel=1e-9)
    eager = _prompt_step(MM.engine, 922.0)
    issue = float(np.max(eager.kernels)) * VLLM_EAGER_LAUNCH_S
    assert float(eager.time_s[0]) == pytest.approx(
        float(eager.gpu_s[0]) + issue + MM.engine.cpu_overhead_per_step_s, rel=1e-9)
    assert t < float(eager.time_s[0])                    # 7.4 ms < ~17.7 ms of issue


def test_one_new_token_per_sequence_is_a_full_graph():
    one = _prompt_step(MM.engine, 1.0)
    assert float(one.time_s[0]) == pytest.approx(
        max(float(one.gpu_s[0]), float(one.cpu_s[0]) - MM.engine.cpu_overhead_per_step_s)
        + MM.engine.cpu_overhead_per_step_s, rel=1e-9)


@pytest.mark.parametrize("model,weights,gpu,version,source,want", [
    ("minimax-m2.5", "fp8", "b200", "0.19.0", DUMP_APR, True),     # PR #947
    ("minimax-m2.5", "fp8", "b200", "0.17.0", DUMP_MAR, False),    # the script before it
    ("minimax-m2.5", "fp4", "b200", "nightly-5b8c30d62b754b57", DUMP_APR, False),
    ("minimax-m2.5", "fp4", "b300", "0.19.0", DUMP_APR, True),     # PR #1055
    ("minimax-m2.5", "fp8", "h200-sxm", "0.18.0", DUMP_MAR, False),
    ("kimi-k2.5", "fp4", "b200", "0.17.0", KIMI_APR, True),        # PR #1047, image unchanged
    ("kimi-k2.5", "fp4", "b200", "0.17.0", DUMP_MAR, False),
    ("kimi-k2.5", "fp4", "b300", "0.19.0", KIMI_APR, False),       # flags only in June
])
def test_which_inferencex_runs_captured_2048_tokens(model, weights, gpu, version, source, want):
    r = recipe_for(source, "vllm", 1024, concurrency=64, gpu=gpu, output=1024, version=version,
                   tp=4, model=model, weights=weights)
    if want:
        assert (r.prefill_graph_max_tokens, r.decode_graph_max_batch) == (2048, 2048)
        assert r.max_num_batched_tokens == 2 * 1024
        assert any("--max-cudagraph-capture-size 2048" in n for n in r.notes)
    else:
        assert r.prefill_graph_max_tokens is None and r.max_num_batched_tokens is None


def test_the_recipe_reaches_the_simulated_engine():
    r = recipe_for(DUMP_APR, "vllm", 8192, concurrency=4, gpu="b200", output=1024,
                   version="0.19.0", tp=4, model="minimax-m2.5", weights="fp8")
    sc = _with_recipe(replace(MM), r)
    assert sc.engine.prefill_graph_max_tokens == 2048
    assert sc.engine.decode_graph_max_batch == 2048
    assert sc.engine.scheduler.max_num_batched_tokens == 16384
    # disaggregated pools and other engines keep their defaults
    assert recipe_for(DUMP_APR, "vllm", 1024, gpu="b200", disagg=True, version="0.19.0",
                      model="minimax-m2.5", weights="fp8").prefill_graph_max_tokens is None
    assert recipe_for(DUMP_APR, "sglang", 1024, gpu="b200", version="0.19.0",
                      model="minimax-m2.5", weights="fp8").prefill_graph_max_tokens is None


@given(model=st.sampled_from(["minimax-m2.5", "kimi-k2.5", "llama-3.1-8b", ""]),
       weights=st.sampled_from(["fp8", "fp4", "int4", "bf16", ""]),
       gpu=st.sampled_from(["b200", "b300", "h200-sxm", "h100-sxm", ""]),
       version=st.one_of(st.none(), st.text(max_size=12), st.sampled_from(["0.19.0", "0.17.0"])),
       measured=st.one_of(st.none(), st.text(max_size=10)),
       prompt=st.integers(1, 1 << 20))
def test_any_row_gets_nothing_or_positive_flags(model, weights, gpu, version, measured, prompt):
    source = f"db-dump/2026-04-27 measured {measured}" if measured is not None else "aic"
    out = inferencex_vllm_graphs(source, "vllm", prompt, model, weights, gpu, version)
    if out is not None:
        fields, note = out
        assert note and all(isinstance(v, int) and v > 0 for v in fields.values())
        assert fields["max_num_batched_tokens"] == 2 * prompt
