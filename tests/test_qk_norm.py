"""q/k RMSNorm over all heads (MiniMax-M2): its kernels and, under TP, its all-reduce."""

import json

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from perfmodel.core.catalog import load_model
from perfmodel.core.catalog.hf_config import load_hf_config
from perfmodel.core.efficiency import default_efficiency
from perfmodel.core.engines import ENGINES
from perfmodel.core.hardware import load_gpu
from perfmodel.core.ops import ops
from perfmodel.core.parallel import comm_times
from perfmodel.core.roofline import step_time
from perfmodel.core.specs import Deployment, Precision

FP8 = Precision.of("fp8")
MINIMAX = load_model("minimax-m2.5")


def _comm(m, dep, gpu="b200", M=4.0):
    hw = load_gpu(gpu)
    return dict(comm_times(m, hw, default_efficiency(hw), dep, M))


def test_minimax_catalog_norms_across_heads_and_others_do_not():
    # MiniMax-M2/M2.5 config.json: "use_qk_norm": true, "qk_norm_type": "per_layer" (one RMS over
    # all 48 q heads, another over the 8 k heads); Qwen3's q_norm/k_norm are per head (head_dim).
    assert load_model("minimax-m2").qk_norm_across_heads
    assert MINIMAX.qk_norm_across_heads
    assert not load_model("qwen3-235b-a22b").qk_norm_across_heads
    assert not load_model("llama-3.1-70b").qk_norm_across_heads


def test_hf_config_reads_the_norm_type(tmp_path):
    base = {"model_type": "minimax_m2", "architectures": ["MiniMaxM2ForCausalLM"],
            "num_hidden_layers": 62, "hidden_size": 3072, "num_attention_heads": 48,
            "num_key_value_heads": 8, "head_dim": 128, "intermediate_size": 1536,
            "num_local_experts": 256, "num_experts_per_tok": 8, "vocab_size": 200064,
            "max_position_embeddings": 196608, "use_qk_norm": True}
    specs = {}
    for kind in ("per_layer", "per_head"):
        d = tmp_path / kind
        d.mkdir()
        (d / "config.json").write_text(json.dumps({**base, "qk_norm_type": kind}))
        specs[kind] = load_hf_config(d / "config.json")
    assert specs["per_layer"].qk_norm_across_heads
    assert not specs["per_head"].qk_norm_across_heads


def test_qk_norm_op_reads_and_writes_q_and_k_with_two_kernels_per_layer():
    # Worked number: (N + K) * H = (48 + 8) * 128 = 7168 elements per token per layer;
    # B = 4 tokens, 62 layers, 16-bit: read + write = 2 * 4 * 7168 * 2 * 62 = 7,110,656 bytes.
    op = next(o for o in ops(MINIMAX, FP8, 4.0, 1.0, 1024.0) if o.name == "qk_norm")
    assert float(op.cost.act_bytes) == 7_110_656
    assert float(op.cost.kernels) == 2 * 62
    assert not any(o.name == "qk_norm" for o in ops(load_model("qwen3-235b-a22b"), FP8, 4.0, 1.0, 1024.0))


def test_tp4_all_reduce_is_the_tree_latency_per_layer():
    # Worked number (B200, NVLink latency 3 us in hardware_db/b200.yaml): an all-reduce over 4 GPUs
    # takes 2 * ceil(log2 4) = 4 latency hops; the payload (4 tokens x 2 fp32 sums = 32 bytes) adds
    # 2 * 3/4 * 32 B / (900 GB/s * 0.75) = 0.07 ns. 62 layers: 62 * 4 * 3 us = 744 us per step.
    t = float(_comm(MINIMAX, Deployment(tp=4))["tp_allreduce_qk_norm"])
    assert abs(t - 744e-6) < 1e-7


def test_no_all_reduce_without_tp_and_none_for_per_head_norms():
    assert "tp_allreduce_qk_norm" not in _comm(MINIMAX, Deployment(tp=1))
    assert "tp_allreduce_qk_norm" not in _comm(load_model("qwen3-235b-a22b"), Deployment(tp=4))


def test_dense_models_keep_their_step_time():
    # the flag defaults off: a model without cross-head norms has exactly the op list it had
    m = load_model("llama-3.1-70b")
    names = [o.name for o in ops(m, FP8, 8.0, 1.0, 2048.0)]
    assert "qk_norm" not in names
    assert "tp_allreduce_qk_norm" not in _comm(m, Deployment(tp=8))


@given(tp=st.sampled_from([2, 4, 8]), batch=st.integers(1, 512))
def test_norm_all_reduce_never_cheaper_on_more_gpus(tp, batch):
    # the tree has 2 * ceil(log2 p) hops: doubling tp adds latency; the ring term grows with (p-1)/p
    small = float(_comm(MINIMAX, Deployment(tp=tp), M=float(batch))["tp_allreduce_qk_norm"])
    if tp < 8:
        big = float(_comm(MINIMAX, Deployment(tp=2 * tp), M=float(batch))["tp_allreduce_qk_norm"])
        assert big > small
    assert np.isfinite(small) and small > 0


@given(batch=st.integers(1, 256))
def test_minimax_tp_step_slower_with_the_norm_than_without(batch):
    hw = load_gpu("h200-sxm")
    eff, eng = default_efficiency(hw), ENGINES["vllm"]
    without = MINIMAX.model_copy(update={"qk_norm_across_heads": False})
    dep = Deployment(tp=8)
    a = step_time(MINIMAX, hw, FP8, eng, eff, batch, 1, 2048, dep=dep).time_s
    b = step_time(without, hw, FP8, eng, eff, batch, 1, 2048, dep=dep).time_s
    assert float(a) > float(b)
