"""Memory model: identities, published numbers, properties."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from perfmodel import api
from perfmodel.core.catalog import load_model
from perfmodel.core.engines import ENGINES
from perfmodel.core.errors import PerfModelError
from perfmodel.core.hardware import load_gpu
from perfmodel.core.memory import estimate_memory, kv_cache_bytes
from perfmodel.core.params import count_params
from perfmodel.core.specs import Deployment, Precision
from perfmodel.core.units import GB

PRECISIONS = ["int4", "int8", "fp8", "bf16", "fp32"]


def test_parts_sum_to_the_total():
    m = api.memory("llama-3.1-70b", "h100-sxm", weights="fp8", kv="fp8", batch=32, context=8192)
    parts = m.weight_bytes + m.kv_cache_bytes + m.activation_bytes + m.reserve_bytes
    assert m.total_bytes == pytest.approx(parts)
    assert sum(m.weight_bytes_by_group.values()) == pytest.approx(m.weight_bytes)


def test_llama_3_1_70b_fp8_h100_batch32_8k_does_not_fit_and_says_why():
    m = api.memory("llama-3.1-70b", "h100-sxm", weights="fp8", kv="fp8", batch=32, context=8192)
    # 70.6B params at 1 byte ~ 70 GB of an 80 GB card: the KV of 32 x 8192 tokens
    # (80 layers x 2 x 8 x 128 x 1 B = 160 KiB/token -> 43 GB) cannot fit beside it.
    assert not m.fits
    assert m.weight_bytes / GB == pytest.approx(70.6, rel=0.04)
    assert m.kv_cache_bytes / GB == pytest.approx(32 * 8192 * 163840 / GB, rel=0.01)
    two = api.memory("llama-3.1-70b", "h100-sxm", weights="fp8", kv="fp8", batch=32,
                     context=8192, tp=2)
    assert two.fits and two.max_batch >= 32


def test_llama2_7b_fp16_weights_13_5_gb():
    # Llama-2-7B: 6.74B parameters x 2 bytes = 13.5 GB (model card parameter count)
    m = api.memory("llama-2-7b", "rtx-4090", batch=1, context=1024)
    assert m.weight_bytes / GB == pytest.approx(13.5, rel=0.01)


def test_int4_group_scales_are_counted():
    m = load_model("llama-3.1-8b")
    hw = load_gpu("h100-sxm")
    g128 = estimate_memory(m, hw, Precision.of("int4-g128"), batch=1, context=1).weight_bytes
    g32 = estimate_memory(m, hw, Precision.of("int4-g32"), batch=1, context=1).weight_bytes
    assert g32 > g128
    n = count_params(m)
    matmul = n.total - n.by_group["embedding"] - n.by_group["lm_head"] - n.by_group["norm"]
    # 4 bits + 20-bit scale/zero per 128 elements = 4.156 bits; embeddings/lm_head stay 16-bit
    expected = matmul * (4 + 20 / 128) / 8 + (n.by_group["embedding"] + n.by_group["lm_head"]
                                             + n.by_group["norm"]) * 2
    assert g128 == pytest.approx(expected, rel=1e-6)


def test_paged_engines_round_to_blocks():
    m = load_model("llama-3.1-8b")
    p = Precision.of("bf16")
    assert kv_cache_bytes(m, p, batch=1, context=17, block_tokens=16) == \
        kv_cache_bytes(m, p, batch=1, context=32)


def test_tensor_parallel_shards_weights_and_kv():
    one = api.memory("llama-3.1-70b", "h100-sxm", batch=8, context=4096)
    four = api.memory("llama-3.1-70b", "h100-sxm", batch=8, context=4096, tp=4)
    assert four.weight_bytes == pytest.approx(one.weight_bytes / 4)
    assert four.kv_cache_bytes == pytest.approx(one.kv_cache_bytes / 4)


def test_kv_heads_replicate_beyond_their_count():
    m = load_model("llama-3.1-70b")   # 8 kv heads
    p = Precision.of("bf16")
    eight = kv_cache_bytes(m, p, batch=1, context=1000, dep=Deployment(tp=8))
    sixteen = kv_cache_bytes(m, p, batch=1, context=1000, dep=Deployment(tp=16, gpus_per_node=16))
    assert sixteen == pytest.approx(eight)   # each GPU still holds one kv head


def test_max_batch_and_context_are_consistent():
    m = api.memory("llama-3.1-8b", "rtx-4090", batch=4, context=4096, engine="vllm")
    at_max = api.memory("llama-3.1-8b", "rtx-4090", batch=m.max_batch, context=4096)
    over = api.memory("llama-3.1-8b", "rtx-4090", batch=m.max_batch + 1, context=4096)
    assert at_max.fits and not over.fits


def test_bad_sizes_are_rejected():
    for kw in ({"batch": 0}, {"context": -1}, {"tp": 0}):
        with pytest.raises(PerfModelError):
            api.memory("llama-3.1-8b", "h100-sxm", **{"batch": 1, "context": 10, **kw})
    with pytest.raises(PerfModelError, match="does not divide"):
        api.memory("llama-3.1-8b", "h100-sxm", batch=1, context=10, tp=3)


@given(st.sampled_from(["llama-3.1-8b", "mixtral-8x7b", "deepseek-v3", "gemma-2-9b", "qwen2.5-7b"]),
       st.integers(1, 256), st.integers(1, 8192), st.sampled_from(list(ENGINES)))
def test_more_bits_never_need_less_memory(model, batch, context, engine):
    totals = [api.memory(model, "h200-sxm", weights=w, kv=w if w != "int4" else "int8",
                         batch=batch, context=context, engine=engine).total_bytes
              for w in PRECISIONS]
    assert totals == sorted(totals)


@given(st.sampled_from(["llama-3.1-8b", "qwen2.5-14b", "mistral-7b"]), st.integers(1, 16000),
       st.integers(1, 16000))
def test_max_batch_never_grows_with_context(model, c1, c2):
    lo, hi = sorted((c1, c2))
    a = api.memory(model, "l40s", batch=1, context=lo).max_batch
    b = api.memory(model, "l40s", batch=1, context=hi).max_batch
    assert b <= a


def test_trtllm_kv_share_is_of_the_memory_left_after_weights():
    # TensorRT-LLM perf-overview (v0.17) runs Llama-3.1-70B FP8 on ONE H100 80GB at 128/2048
    # (912 tok/s): its kv_cache_free_gpu_mem_fraction applies to memory free after loading
    # the weights, so the ~7 GB left over still hold a KV pool.
    trt = api.memory("llama-3.1-70b", "h100-sxm", weights="fp8", kv="fp8", batch=8,
                     context=2176, engine="trtllm")
    vllm = api.memory("llama-3.1-70b", "h100-sxm", weights="fp8", kv="fp8", batch=8,
                      context=2176, engine="vllm")
    assert trt.fits and trt.max_batch >= 8
    assert not vllm.fits   # 0.9 x 80 GiB = 77 GB cannot hold 72.7 GB of weights + activations + KV
    assert trt.capacity_bytes < trt.device_bytes


def test_static_cache_engines_reserve_their_max_sequence_length():
    # issue 15 item 3: gpt6 preset (seed 000): llama-3.1-8b FP16 on a 24 GB RTX 4090 under a
    # static-cache engine. A 700-token request holds 700 x 128 KiB = 92 MB of KV, but the cache
    # reserves STATIC_CACHE_TOKENS = 32768 x 128 KiB = 4.3 GB per sequence (Llama-3.1-8B config:
    # 32 layers x 8 KV heads x 128 x 2 B x K,V), and ~4.9 GB is left beside 16 GB of weights:
    # 1 sequence fits (the source's "batch 1 only"), where request-sized KV gave 36.
    from perfmodel.core.engines import STATIC_CACHE_TOKENS
    m = api.memory("llama-3.1-8b", "rtx-4090", weights="fp16", kv="fp16", batch=1, context=700,
                   engine="torch-eager")
    assert m.kv_cache_bytes == pytest.approx(STATIC_CACHE_TOKENS * 32 * 8 * 128 * 2 * 2)
    assert m.max_batch == 1
    paged = api.memory("llama-3.1-8b", "rtx-4090", weights="fp16", kv="fp16", batch=1,
                       context=700, engine="vllm")
    assert paged.max_batch > 20


def test_llama_cpp_splits_one_n_ctx_pool_among_its_slots():
    # llama.cpp common.h n_ctx = 4096 shared by the slots: 4 slots of 512 tokens hold the
    # whole 4096-token buffer, 4 x 2048 tokens hold 8192 tokens (the pool grows no further)
    from perfmodel.core.engines import LLAMA_CPP_N_CTX
    per_token = 32 * 8 * 128 * 2 * 2          # llama-3.1-8b FP16 KV bytes per token
    short = api.memory("llama-3.1-8b", "h100-sxm", weights="fp16", kv="fp16", batch=4,
                       context=512, engine="llama-cpp")
    long = api.memory("llama-3.1-8b", "h100-sxm", weights="fp16", kv="fp16", batch=4,
                      context=2048, engine="llama-cpp")
    assert short.kv_cache_bytes == pytest.approx(LLAMA_CPP_N_CTX * per_token)
    assert long.kv_cache_bytes == pytest.approx(4 * 2048 * per_token)
