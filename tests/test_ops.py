"""The op list: published numbers, identities and limits."""

import numpy as np
import pytest

from perfmodel.core.catalog import list_models, load_model
from perfmodel.core.memory import kv_cache_bytes
from perfmodel.core.ops import expected_experts, ops, total
from perfmodel.core.params import count_params
from perfmodel.core.specs import Precision
from perfmodel.core.units import GB, KiB

BF16 = Precision.of("bf16")


def test_kv_llama2_13b_8192_tokens_16bit_is_6_7_gb():
    # vLLM paper (Kwon et al. 2023) sec. 2.3: "the KV cache of a single token demands 800 KB"
    # for OPT-13B; for Llama-2-13B 2*40*5120*2 B = 800 KiB/token -> 8192 tokens = 6.7 GB.
    m = load_model("llama-2-13b")
    assert kv_cache_bytes(m, BF16, batch=1, context=8192) / GB == pytest.approx(6.71, rel=0.01)


def test_seed_512kb_per_token_for_32_layers_32_heads_128():
    # seed 000: "32 layers x 32 heads x 128 dims -> 512 KB of KV per token" (Llama-2-7B);
    # and "100k tokens about 50 GB".
    m = load_model("llama-2-7b")
    per_token = kv_cache_bytes(m, BF16, batch=1, context=1)
    assert per_token == 512 * KiB
    assert kv_cache_bytes(m, BF16, batch=1, context=100_000) / GB == pytest.approx(52.4, rel=0.01)


def test_decode_flops_are_two_per_non_embedding_parameter():
    # Kaplan et al. 2020, eq. 2.2: C_forward ~ 2N per token (N without embeddings), at S ~ 0.
    m = load_model("llama-3.1-8b")
    work = total(ops(m, BF16, 1, 1, 0))
    n = count_params(m)
    non_embedding = n.total - n.by_group["embedding"]
    assert work.flops == pytest.approx(2 * non_embedding, rel=0.02)


def test_decode_reads_every_weight_once():
    m = load_model("llama-3.1-8b")
    work = total(ops(m, BF16, 1, 1, 0))
    n = count_params(m)
    # all matmul weights + lm_head; the embedding table is gathered (one row), not read whole
    expected = (n.total - n.by_group["embedding"] + m.d_model) * 2
    assert work.weight_bytes == pytest.approx(expected, rel=0.01)


def test_attention_flops_grow_linearly_with_context_in_decode():
    m = load_model("llama-3.1-8b")
    a1 = [o for o in ops(m, BF16, 1, 1, 1000) if o.kind == "attention"][0].cost.flops
    a2 = [o for o in ops(m, BF16, 1, 1, 2000) if o.kind == "attention"][0].cost.flops
    # 4*B*(S+1)*N*H*L: doubling S (1000 -> 2000) scales by 2001/1001
    assert a2 / a1 == pytest.approx(2001 / 1001)
    assert a1 == pytest.approx(4 * 1001 * 32 * 128 * 32)


def test_prefill_attention_counts_causal_pairs():
    m = load_model("llama-3.1-8b")
    T = 512
    a = [o for o in ops(m, BF16, 1, T, 0) if o.kind == "attention"][0].cost.flops
    assert a == pytest.approx(4 * T * (T + 1) / 2 * 32 * 128 * 32)


def test_expected_experts_limits():
    # E*(1-(1-k/E)^n): one token touches exactly k, many tokens touch all E
    assert expected_experts(8, 2, 1) == pytest.approx(2)
    assert expected_experts(8, 2, 10_000) == pytest.approx(8)
    assert expected_experts(256, 8, 4) < 32


def test_moe_decode_reads_only_touched_experts():
    m = load_model("mixtral-8x7b")
    one = total(ops(m, BF16, 1, 1, 0)).weight_bytes
    many = total(ops(m, BF16, 256, 1, 0)).weight_bytes
    n = count_params(m)
    assert one == pytest.approx(2 * (n.active - n.by_group["embedding"]), rel=0.02)
    assert many == pytest.approx(2 * (n.total - n.by_group["embedding"]), rel=0.02)


def test_sliding_window_caps_kv_read():
    m = load_model("gemma-2-9b")
    assert m.sliding_window_layers > 0
    short = total(ops(m, BF16, 1, 1, 4096)).kv_read_bytes
    long = total(ops(m, BF16, 1, 1, 8192)).kv_read_bytes
    # only the full-attention half grows past the 4096 window
    full = m.num_layers - m.sliding_window_layers
    per_layer_tok = 2 * m.num_kv_heads * m.head_dim * 2
    assert long - short == pytest.approx(full * 4096 * per_layer_tok, rel=1e-6)


def test_mla_caches_the_latent():
    m = load_model("deepseek-v3")
    # DeepSeek-V2 paper: (d_c + d_h^R) * l elements per token = (512 + 64) * 61
    assert kv_cache_bytes(m, BF16, batch=1, context=1) == (512 + 64) * 61 * 2


def test_more_weight_bits_move_more_bytes():
    m = load_model("llama-3.1-8b")
    b4 = total(ops(m, Precision.of("int4"), 1, 1, 100)).bytes
    b8 = total(ops(m, Precision.of("int8"), 1, 1, 100)).bytes
    b16 = total(ops(m, BF16, 1, 1, 100)).bytes
    assert b4 < b8 < b16


@pytest.mark.parametrize("m", list_models(), ids=lambda m: m.id)
def test_every_model_has_finite_positive_costs(m):
    c = total(ops(m, BF16, np.array([1, 8]), 1, np.array([0, 4096])))
    assert np.all(np.isfinite(c.flops)) and np.all(c.flops > 0)
    assert np.all(c.bytes > 0)


def test_sliding_window_counts_exact_causal_window_pairs():
    # issue 15: at T = 2W from an empty cache, token j (1..2W) sees min(j, W) keys:
    # W(W+1)/2 + W*W = 1.5 W^2 + W/2 pairs, not min(T(T+1)/2, T*W) = 2 W^2 (33% more).
    # gemma-2-9b (HF config): window 4096 on half of its 42 layers, 16 heads of 256.
    m = load_model("gemma-2-9b")
    W = m.sliding_window
    att = [o for o in ops(m, BF16, 1, 2 * W, 0) if o.name == f"attention_window{W}"][0]
    pairs = 1.5 * W * W + W / 2
    assert att.cost.flops == pytest.approx(4 * pairs * m.num_heads * m.head_dim
                                           * m.sliding_window_layers)
    # decode past the window sees exactly W keys; below it, S + 1
    for S, seen in ((10 * W, W), (W // 2, W // 2 + 1)):
        dec = [o for o in ops(m, BF16, 1, 1, S) if o.name == f"attention_window{W}"][0]
        assert dec.cost.flops == pytest.approx(4 * seen * m.num_heads * m.head_dim
                                               * m.sliding_window_layers)
