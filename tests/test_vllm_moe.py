"""vLLM pays an eager prompt step's kernel issue in series with its GPU work, as SGLang and
TensorRT-LLM do (EngineProfile.eager_issue_overlap False; perfmodel/core/engines.py,
docs/vllm_moe.md).

Golden numbers:
- data/serving/aic_silicon_sample.csv, InferenceX rows
  minimaxm2_5_h200_vllm_fp8_agg_{1024,8192}x1024_c4_cfg637 (vLLM 0.18.0, MiniMax-M2.5 FP8,
  8 x H200 tp8, concurrency 4): mean TTFT 106 ms at 1024 prompt tokens, 198 ms at 8192
  (lengths uniform in [0.8 L, L]: means 922 and 7373 tokens);
- vLLM's capture limit: max_cudagraph_capture_size = min(2 x max_num_seqs, 512) tokens
  (vllm/config/vllm.py _set_cudagraph_sizes); a 922-token prompt step runs without graphs."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from perfmodel.core.engines import ENGINES, VLLM_EAGER_LAUNCH_S
from perfmodel.core.resolve import resolve
from perfmodel.core.roofline import step_time
from perfmodel.serving import stepcost

MM, _, _ = resolve("minimax-m2.5", "h200-sxm", weights="fp8", activations="fp8", kv="fp8",
                   tp=8, engine="vllm")
PROMPTS = (922.5, 7373.0)          # mean InferenceX prompt at 1k and 8k (range ratio 0.8)
MEASURED_C4_TTFT_S = (0.106, 0.198)


def _prefill(engine, T):
    T = np.asarray(T, dtype=float)
    return step_time(MM.model, MM.hw, MM.precision, engine, MM.eff, np.ones_like(T), T,
                     np.zeros_like(T), dep=MM.dep, attention=MM.attention, prefill=True)


def test_a_vllm_prompt_step_above_the_capture_size_pays_gpu_plus_issue():
    est = _prefill(MM.engine, list(PROMPTS))
    gpu, t = np.asarray(est.gpu_s), np.asarray(est.time_s)
    issue = float(np.max(est.kernels)) * VLLM_EAGER_LAUNCH_S
    assert t == pytest.approx(gpu + issue + MM.engine.cpu_overhead_per_step_s, rel=1e-6)
    # the issue of a MiniMax-M2.5 step (62 layers, ~1,260 kernels at 14 us) is ~18 ms, a term
    # the max() hid under the 1k prompt's ~24 ms of GPU work
    assert 10e-3 < issue < 30e-3
    assert issue < gpu[0]


def test_the_lone_prefill_stays_below_the_measured_low_concurrency_ttft():
    # at C=4 a request's TTFT holds its own prefill and part of the others' in its wave: the lone
    # prompt step is a lower bound on both lengths, and the rise 1k -> 8k is the GPU growth
    t = np.asarray(_prefill(MM.engine, list(PROMPTS)).time_s)
    assert np.all(t < np.asarray(MEASURED_C4_TTFT_S))
    rise = float(t[1] - t[0])
    assert rise == pytest.approx(MEASURED_C4_TTFT_S[1] - MEASURED_C4_TTFT_S[0], rel=0.35)


def test_steps_within_the_capture_size_and_decode_steps_stay_graph_replays():
    cost = stepcost.build(MM, max_rows=8192, max_seqs=64, max_chunk=8192, max_context=9216)
    overlap = ENGINES["vllm"].model_copy(update={"eager_issue_overlap": True})
    cost_o = stepcost.build(replace(MM, engine=overlap), max_rows=8192, max_seqs=64,
                            max_chunk=8192, max_context=9216)
    # a 64-row decode step replays a full graph: the rule changes nothing
    assert cost.step_s(64, 64 * 1500.0) == pytest.approx(cost_o.step_s(64, 64 * 1500.0))
    # a 256-token prompt step replays piecewise graphs: the rule adds at most their eager
    # attention (62 layers x 120 us, engines.VLLM_PIECEWISE_ATTENTION_S)
    graphed, graphed_o = (c.step_s(0, 0.0, [256.0], [0.0], 1) for c in (cost, cost_o))
    assert cost.piecewise_s == pytest.approx(62 * 120e-6)
    assert graphed_o <= graphed <= graphed_o + cost.piecewise_s + cost.cpu_s + 1e-12
    # a mixed step past 512 token rows adds at most the whole issue time
    mixed, mixed_o = (c.step_s(64, 64 * 1500.0, [922.0], [0.0], 1) for c in (cost, cost_o))
    assert mixed > mixed_o
    assert mixed - mixed_o <= cost.eager_cpu_s + 1e-12


@given(t=st.floats(513.0, 16384.0), extra=st.floats(0.0, 8192.0))
def test_vllm_series_never_beats_the_max_and_grows_with_the_prompt(t, extra):
    overlap = MM.engine.model_copy(update={"eager_issue_overlap": True})
    lo, hi = np.asarray(_prefill(MM.engine, [t, t + extra]).time_s)
    assert np.isfinite(lo) and np.isfinite(hi) and hi >= lo * (1 - 1e-12)
    assert lo >= np.asarray(_prefill(overlap, [t]).time_s)[0] * (1 - 1e-12)
