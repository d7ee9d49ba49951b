"""Ops every TP rank runs whole: MLA's latent down-projections and the DSA indexer
(perfmodel/core/parallel.py TP_REPLICATED)."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from perfmodel.core.catalog import load_model
from perfmodel.core.memory import weight_bytes_by_group
from perfmodel.core.parallel import TP_REPLICATED, rank_ops
from perfmodel.core.params import all_matrices
from perfmodel.core.specs import Deployment, Precision

BF16 = Precision.of("bf16")


def _weights(model: str, tp: int) -> dict[str, float]:
    ops = rank_ops(load_model(model), BF16, 4.0, 1.0, 1024.0, Deployment(tp=tp), attention="flash")
    return {o.name: float(o.cost.weight_bytes) for o in ops}


def test_deepseek_v3_down_projections_are_whole_on_every_rank():
    # DeepSeek-V3 config: D = 7168, q_lora_rank 1536, kv_lora_rank 512 + rope 64, 61 layers;
    # inference/model.py builds wq_a and wkv_a as plain Linear: every TP rank reads all of them
    w1, w8 = _weights("deepseek-v3", 1), _weights("deepseek-v3", 8)
    assert w8["q_a_proj"] == pytest.approx(7168 * 1536 * 61 * 2)
    assert w8["kv_a_proj"] == pytest.approx(7168 * 576 * 61 * 2)
    assert w8["q_a_proj"] == w1["q_a_proj"] and w8["kv_a_proj"] == w1["kv_a_proj"]
    # the up-projections and o_proj are Column/RowParallelLinear: split 8 ways
    for name in ("q_b_proj", "kv_b_proj", "o_proj"):
        assert w8[name] == pytest.approx(w1[name] / 8)


def test_glm5_indexer_is_whole_on_every_rank():
    # DeepSeek-V3.2-Exp Indexer: wq_b, wk, weights_proj are plain Linear (same top-k on all ranks)
    w1, w8 = _weights("glm-5", 1), _weights("glm-5", 8)
    for name in ("indexer_wq", "indexer_wk", "indexer_weights"):
        assert w8[name] == pytest.approx(w1[name]) and w8[name] > 0


def test_memory_holds_the_replicated_matrices_whole():
    m = load_model("deepseek-v3")
    replicated = sum(x.elements for x in all_matrices(m)
                     if x.name in TP_REPLICATED and x.group == "attention") * 2.0
    attn1 = weight_bytes_by_group(m, BF16, Deployment(tp=1))["attention"]
    attn8 = weight_bytes_by_group(m, BF16, Deployment(tp=8))["attention"]
    assert attn8 == pytest.approx((attn1 - replicated) / 8 + replicated)


def test_the_router_is_whole_on_every_rank():
    # vLLM/SGLang Qwen3-MoE: self.gate = ReplicatedLinear(hidden_size, num_experts);
    # Qwen3-235B: D = 4096, E = 128, 94 MoE layers, 16-bit
    w1, w8 = _weights("qwen3-235b-a22b", 1), _weights("qwen3-235b-a22b", 8)
    assert w8["router"] == pytest.approx(4096 * 128 * 94 * 2) == w1["router"]


def test_memory_holds_the_router_whole():
    m = load_model("qwen3-235b-a22b")
    assert (weight_bytes_by_group(m, BF16, Deployment(tp=8))["router"]
            == pytest.approx(4096 * 128 * 94 * 2))


@given(st.sampled_from(["llama-3.1-70b", "qwen3-235b-a22b", "mixtral-8x7b"]),
       st.sampled_from([2, 4, 8]))
def test_models_without_mla_or_dsa_split_every_other_op(model, tp):
    m = load_model(model)
    if m.num_heads % tp:
        return
    ops1 = {o.name: float(o.cost.weight_bytes) for o in
            rank_ops(m, BF16, 4.0, 1.0, 512.0, Deployment(tp=1), attention="flash")}
    opsn = {o.name: float(o.cost.weight_bytes) for o in
            rank_ops(m, BF16, 4.0, 1.0, 512.0, Deployment(tp=tp), attention="flash")}
    assert not {"q_a_proj", "kv_a_proj", "indexer"} & set(opsn)
    for name, w in opsn.items():
        assert w == pytest.approx(ops1[name] if name in TP_REPLICATED else ops1[name] / tp)


@given(st.sampled_from([1, 2, 4, 8]), st.sampled_from([1, 2, 4, 8]))
def test_more_tp_never_grows_a_ranks_mla_weights(a, b):
    small, large = sorted((a, b))
    ws, wl = _weights("deepseek-v3", small), _weights("deepseek-v3", large)
    assert sum(wl.values()) <= sum(ws.values()) + 1e-6
