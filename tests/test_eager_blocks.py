"""Eager prompt steps issue the MLA and MoE blocks' kernels as counted from the engines' code
(core/eager_kernels.py, core/host_cost.eager_block_extra_kernels; issues 13/14).

Golden counts (Python-level launches per layer block, 16-bit path; sources in
perfmodel/core/eager_kernels.py):
- SGLang deepseek_v2.py forward_normal_prepare/forward_normal_core (MHA prefill): input norm,
  fused_qkv_a_proj_with_mqa, q_a_layernorm, q_b_proj, kv_a_layernorm, rotary_emb, q_pe copy,
  _set_mla_kv_buffer, kv_b_proj, _concat_and_cast_mha_k, attn_mha, o_proj, all-reduce = 13;
  DeepseekV2MoE.forward_normal + fused_moe_triton: norm, gate, topk, moe_align_block_size,
  fused_moe_kernel x2, silu_and_mul, moe_sum_reduce, all-reduce = 9 launches, the two Triton
  fused-MoE launches weighing 46.6 / 20.8 us each (calibrate/data/launch-kinds-h200-sxm-
  20261202*.json: Triton fused-MoE launch against an nn.Linear call), plus the shared expert's
  gate_up, SiluAndMul, down and `+= shared_output` = 4; llama.py dense layer 7 + 5 = 12.
- TensorRT-LLM modules/attention.py MLA.forward_impl/forward_context_default: fused_a, two
  norms, q_b_proj, latent concat, kv_b_proj, k_nope copy, attention op, o_proj, fused
  all-reduce+norm = 10; modeling_deepseekv3.py Deepseekv3MoE: gate, routing, fused
  all-reduce+norm = 3 and torch.ops.trtllm.fused_moe (custom op 29.0 / 20.8 us, two autotuner
  look-ups assumed one launch each, the C++ runner call one), shared GatedMLP + add = 4; dense
  layer 4 + 4 = 8.
- DeepSeek-V3 config.json: 61 layers, first_k_dense_replace 3 (58 MoE layers), 1 shared
  expert, q_lora_rank 1536 (MLA in every layer)."""

from __future__ import annotations

import json
import math
import statistics

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from calib_scripts import ROOT, quick_cpu_run
from perfmodel.core import eager_kernels as ek
from perfmodel.core.catalog import load_model
from perfmodel.core.engines import EAGER_LAUNCH_S, ENGINES
from perfmodel.core.host_cost import eager_block_extra_kernels, prompt_issue_s
from perfmodel.core.resolve import resolve
from perfmodel.core.roofline import step_time
from perfmodel.core.eager_kernels import EagerBlockKernels

DSV3 = load_model("deepseek-v3")


def _extra(engine_id: str, model=DSV3) -> float:
    e = ENGINES[engine_id]
    return eager_block_extra_kernels(model, e, e.attention)


def test_the_dense_blocks_are_the_engines_dense_layer():
    # a dense model keeps its count: attention + mlp blocks = kernels_per_layer
    for eid in ("sglang", "trtllm"):
        b = ENGINES[eid].eager_blocks
        assert b.attention + b.mlp == ENGINES[eid].kernels_per_layer
    assert _extra("sglang", load_model("llama-3.1-70b")) == 0.0
    assert _extra("trtllm", load_model("llama-3.1-70b")) == 0.0


def test_deepseek_v3_sglang_by_hand():
    # sourced: 58 MoE layers x (9 + 4 shared - 5 dense MLP) + 61 MLA layers x (13 - 7 GQA),
    # the two Triton fused-MoE launches at 46.6 / 20.8 = 2.24 launches each
    moe = 7 + 2 * 46.6 / 20.8                                   # 11.48
    sourced = 58 * (moe + 4 - 5) + 61 * (13 - 7)                # 607.9 + 366 = 973.9
    # what the op list counted at the dense rate (core/ops.py): per MLA layer q_a, q_b, kv_a,
    # kv_b, o + mla_norms_rotary 3 + attention = 9 against q, k, v, o, rotary, attention = 6;
    # per MoE layer router, shared up/down, experts 3, routing 2, permute, combine = 10
    # against mlp_up, mlp_down = 2; the dense twin has 13 per layer, SGLang launches 12
    priced = 12 * 61 / (13 * 61) * (61 * (9 - 6) + 58 * (10 - 2))   # 0.923 x 647 = 597.2
    assert sourced - priced == pytest.approx(376.7, abs=0.05)
    assert _extra("sglang") == pytest.approx(sourced - priced, rel=1e-12)
    # 26 us each: ~10 ms more host issue per eager prompt step
    e = ENGINES["sglang"]
    assert prompt_issue_s(DSV3, e, e.attention) == pytest.approx(376.7 * EAGER_LAUNCH_S, rel=1e-3)


def test_deepseek_v3_trtllm_by_hand():
    fused_moe = 29.0 / 20.8 + 2 * 1.0 + 1.0                     # 4.39 launches
    sourced = 58 * (3 + fused_moe + 4 - 4) + 61 * (10 - 4)      # 428.9 + 366 = 794.9
    priced = 8 / 13 * (61 * 3 + 58 * 8)                           # 0.615 x 647 = 398.2
    assert _extra("trtllm") == pytest.approx(sourced - priced, rel=1e-12)


def test_engines_without_sourced_blocks_keep_the_op_list_count():
    assert ENGINES["vllm"].eager_blocks is None
    assert _extra("vllm") == 0.0
    assert ENGINES["trtllm-trt"].eager_launch_s == 0.0        # no eager step: nothing added
    e = ENGINES["trtllm-trt"]
    assert prompt_issue_s(DSV3, e, e.attention) == 0.0


def _step(sc, engine, prefill, T):
    return step_time(sc.model, sc.hw, sc.precision, engine, sc.eff, 1.0, T, 0.0, dep=sc.dep,
                     attention=sc.attention, prefill=prefill)


def test_only_eager_prompt_steps_move():
    sc, _, _ = resolve("deepseek-v3", "h200-sxm", weights="fp8", tp=8, engine="sglang")
    before = sc.engine.model_copy(update={"eager_blocks": None})
    # prompt step of 1024 tokens, eager and in series with the GPU: the extra issue adds on
    new, old = _step(sc, sc.engine, True, 1024.0), _step(sc, before, True, 1024.0)
    assert float(new.time_s) - float(old.time_s) == pytest.approx(
        _extra("sglang") * EAGER_LAUNCH_S, rel=1e-6)
    assert float(new.gpu_s) == pytest.approx(float(old.gpu_s), rel=1e-12)
    # decode steps replay CUDA graphs: unchanged
    d_new, d_old = _step(sc, sc.engine, False, 1.0), _step(sc, before, False, 1.0)
    assert float(d_new.time_s) == pytest.approx(float(d_old.time_s), rel=1e-12)


counts = st.floats(min_value=1.0, max_value=60.0, allow_nan=False)


@given(attention=counts, mlp=counts, mla=counts, moe=counts,
       shared=st.floats(min_value=0.0, max_value=20.0),
       gate=st.floats(min_value=0.0, max_value=10.0),
       model=st.sampled_from(["deepseek-v3", "qwen3-235b-a22b", "qwen3.5-397b-a17b", "glm-5",
                              "minimax-m2.5", "llama-3.1-8b"]))
def test_any_block_counts_give_a_finite_positive_issue(attention, mlp, mla, moe, shared, gate,
                                                       model):
    b = EagerBlockKernels(attention=attention, mlp=mlp, mla_attention=mla, moe=moe,
                          shared_expert=shared, shared_expert_gate=gate)
    engine = ENGINES["sglang"].model_copy(update={"eager_blocks": b})
    sc, _, _ = resolve(model, "h200-sxm", engine="sglang", tp=8)
    est = step_time(sc.model, sc.hw, sc.precision, engine, sc.eff, 1.0, 2048.0, 0.0,
                    dep=sc.dep, attention=sc.attention, prefill=True)
    extra = eager_block_extra_kernels(sc.model, engine, sc.attention or engine.attention)
    assert math.isfinite(extra)
    # the step's issue never goes below zero kernels: total = op-list count + extra >= 0
    assert float(est.kernels) + extra >= 0.0
    assert np.isfinite(est.time_s) and float(est.time_s) > 0.0


def _launch_kinds_means() -> dict:
    """Mean over the two committed H200 runs of each launch kind's median host time."""
    runs = [json.loads((ROOT / "calibrate" / "data" / name).read_text())
            for name in ("launch-kinds-h200-sxm-20261202.json",
                         "launch-kinds-h200-sxm-20261202-rep.json")]
    kinds = {r["kind"] for r in runs[0]["records"]}
    return {k: statistics.mean(r["host_s_per_launch"] for run in runs for r in run["records"]
                               if r["kind"] == k) for k in kinds}


def test_launch_weights_are_the_committed_h200_measurements():
    mean = _launch_kinds_means()
    base = mean["module_linear"]
    assert ek.PY_CUSTOM_OP_LAUNCHES == pytest.approx(mean["custom_op"] / base, rel=0.01)
    assert ek.TRITON_FUSED_MOE_LAUNCHES == pytest.approx(mean["triton_fused_moe"] / base,
                                                         rel=0.01)
    # every kind a step issues costs a few to a few tens of microseconds on that host: the
    # 26 us per kernel of EAGER_LAUNCH_S sits inside the measured range
    assert min(mean.values()) < EAGER_LAUNCH_S < max(mean.values())


def test_bench_quick_cpu_run(tmp_path):
    res = quick_cpu_run(ROOT / "calibrate" / "bench_launch_kinds.py", tmp_path / "l.json")
    done = {r["kind"]: r for r in res["records"] if "host_s_per_launch" in r}
    assert {"torch_add", "custom_op", "module_linear"} <= set(done)
    assert all(0.0 < r["host_s_per_launch"] < 10.0 for r in done.values())
    assert "triton_fused_moe" not in done           # no GPU: the Triton kinds are not run
