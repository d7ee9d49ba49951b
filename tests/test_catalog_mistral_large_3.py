"""Mistral Large 3 (mistralai/Mistral-Large-3-675B-Instruct-2512) in the catalog: its shapes
from the published params.json, its parameter counts against the model card, and the
deployments the card names. Every expected value cites its source in the test."""

import pytest

from perfmodel.core.catalog import load_model
from perfmodel.core.params import count_params


def by_id(ident):
    return load_model(ident)


def test_mistral_large_3_params_json_and_published_counts():
    """Shapes from the published params.json (copied verbatim in vLLM's
    tests/transformers_utils/test_config.py and TensorRT-LLM's mistral test_config_loader.py);
    counts from the model card: 'A Granular MoE Language Model with 673B params and 39B active'
    plus 'A 2.5B Vision Encoder' = '41B active parameters and 675B total'."""
    m = by_id("mistral-large-3")
    assert (m.num_layers, m.d_model, m.num_heads, m.ffn_dim, m.vocab_size) == \
        (61, 7168, 128, 16384, 131072)
    assert (m.moe.num_experts, m.moe.experts_per_token, m.moe.expert_ffn_dim,
            m.moe.num_shared_experts, m.moe.num_dense_layers) == (128, 4, 4096, 1, 3)
    assert (m.mla.q_lora_rank, m.mla.kv_lora_rank, m.mla.qk_nope_head_dim,
            m.mla.qk_rope_head_dim, m.mla.v_head_dim) == (1536, 512, 128, 64, 128)
    c = count_params(m)
    vision_b = 2.5                                 # model card: 2.5B vision encoder, not modelled
    # 673B is given to three digits: +-0.5% holds it; 675B total with the vision tower likewise
    assert c.total / 1e9 == pytest.approx(673, rel=0.005)
    assert c.total / 1e9 + vision_b == pytest.approx(675, rel=0.005)
    # '39B active' (whole billions) counts lm_head but not the input embedding (as
    # test_catalog.ACTIVE_EXCLUDES_EMBEDDING); with the vision tower, the card's '41B'. Both
    # within +-0.5B, the rounding of a whole-billion figure
    active_b = (c.active - m.vocab_size * m.d_model) / 1e9
    assert active_b == pytest.approx(39, abs=0.5)
    assert active_b + vision_b == pytest.approx(41, abs=0.5 + 0.5)   # two rounded terms
    # MLA: 61 x (512 + 64) cached values per token; at bf16 68.6 KiB, as Raschka's LLM
    # architecture gallery lists for Mistral Large 3
    assert m.num_layers * (m.mla.kv_lora_rank + m.mla.qk_rope_head_dim) * 2 / 1024 == \
        pytest.approx(68.6, abs=0.05)
    for alias in ("mistralai/Mistral-Large-3-675B-Base-2512",
                  "mistralai/Mistral-Large-3-675B-Instruct-2512-NVFP4"):
        assert load_model(alias) is m


def test_mistral_large_3_deploys_where_its_model_card_says():
    """Model card (huggingface.co/mistralai/Mistral-Large-3-675B-Instruct-2512): 'FP8 on a
    single node of B200s or H200s', 'NVFP4 on a single node of H100s or A100s'. And the FP8
    weights alone (673B x 1 byte) exceed 8 x 80 GB, so FP8 cannot fit one H100 node."""
    from perfmodel import api
    fits = {(w, gpu): api.memory("mistral-large-3", gpu, weights=w, tp=8, context=8192).fits
            for w, gpu in [("checkpoint", "h200-sxm"), ("fp4-g16", "h100-sxm"),
                           ("fp4-g16", "a100-sxm-80gb"), ("fp8-b128", "h100-sxm")]}
    assert fits == {("checkpoint", "h200-sxm"): True, ("fp4-g16", "h100-sxm"): True,
                    ("fp4-g16", "a100-sxm-80gb"): True, ("fp8-b128", "h100-sxm"): False}
