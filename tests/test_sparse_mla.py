"""DSA prompt attention as SGLang runs it (core/sparse_mla.py): above index_topk the sparse MQA
kernel over index_topk keys per query, heads padded to FlashMLA's head block (64 on Hopper,
128 on Blackwell); at or below it plain MHA (the cheaper decompressed form)."""
import dataclasses

from perfmodel import api
from perfmodel.core import predict
from perfmodel.core.sparse_mla import sparse_prefill_heads

# GLM-5 (zai-org/GLM-5 config.json): 64 heads, kv_lora_rank 512, qk_rope_head_dim 64,
# 78 layers, index_topk 2048.
GLM5_LAYERS, GLM5_HEADS, TOPK = 78, 64, 2048
ABSORBED_PER_PAIR_HEAD = 2 * (512 + 64) + 2 * 512   # QK^T over d_c + d_R, PV over d_c


def _scenario(gpu="h200-sxm", engine="sglang", tp=8, model="glm-5", kv="bf16"):
    sc, _, _ = api.resolve(api.make_query(model=model, gpu=gpu, weights="fp8", kv=kv,
                                          engine=engine, tp=tp))
    return sc


def _attention_flops(sc, T, S=0, B=1):
    est = predict.step(sc, B, T, S, prefill=T > 1)
    return sum(float(o.flops) for o in est.ops if o.name == "attention")


def test_8k_prompt_on_h200_pays_index_topk_keys_for_64_padded_heads():
    # tp8: 8 heads per GPU, zero-padded to 64 (nsa_backend.py _forward_flashmla_sparse)
    sc = _scenario()
    expected = 8192 * TOPK * 64 * ABSORBED_PER_PAIR_HEAD * GLM5_LAYERS
    assert abs(_attention_flops(sc, 8192) / expected - 1) < 1e-9


def test_blackwell_pads_to_128_heads():
    h200 = _attention_flops(_scenario(), 8192)
    b200 = _attention_flops(_scenario(gpu="b200", kv="fp8"), 8192)
    assert abs(b200 / h200 - 128 / 64) < 1e-9


def test_full_head_blocks_are_not_padded():
    # tp1: all 64 heads on one H200, one whole head block
    sc = _scenario(tp=1)
    expected = 8192 * TOPK * GLM5_HEADS * ABSORBED_PER_PAIR_HEAD * GLM5_LAYERS
    assert abs(_attention_flops(sc, 8192) / expected - 1) < 1e-9
    assert sparse_prefill_heads(sc.model, sc.hw, sc.engine, sc.dep) == GLM5_HEADS


def test_short_prompts_and_decode_keep_the_dense_forms():
    # max_kv_len <= index_topk: MHA_ONE_SHOT (PR #11892); decode: the decode kernels
    sg, plain = _scenario(), _scenario()
    plain = dataclasses.replace(plain, engine=plain.engine.model_copy(
        update={"dsa_sparse_prefill": False}))
    for T, S in ((1024, 0), (2048, 0), (1, 8000), (1, 2047)):
        assert _attention_flops(sg, T, S) == _attention_flops(plain, T, S)
    # one token past index_topk switches: a prompt chunk over a cached prefix counts too
    assert _attention_flops(sg, 1024, 1025) > 3 * _attention_flops(plain, 1024, 1025)


def test_only_sglang_on_nvidia_dsa_models():
    assert sparse_prefill_heads(*_parts(_scenario(engine="vllm"))) is None
    assert sparse_prefill_heads(*_parts(_scenario(model="deepseek-v3", kv="fp8"))) is None
    assert sparse_prefill_heads(*_parts(_scenario(gpu="mi300x", kv="fp8"))) is None


def _parts(sc):
    return sc.model, sc.hw, sc.engine, sc.dep
