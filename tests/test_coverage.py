"""Coverage added for issues 14/15: new accelerators and their topology, new attention kinds
(Gated DeltaNet linear attention, DSA sparse attention, gated q), GGUF formats, fine-tune
aliases, and prices on one basis with user overrides. Worked numbers are computed by hand
from the cited configs and block layouts, never copied from the code's output."""

from __future__ import annotations

import numpy as np
import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from perfmodel.cli import main
from perfmodel.core import units
from perfmodel.core.catalog import ALIASES, list_models, load_model
from perfmodel.core.errors import PerfModelError, UnknownIdError
from perfmodel.core.hardware import (PRICE_BASIS, PRICE_DATE, PRICES_ENV_VAR, list_gpus,
                                     load_gpu)
from perfmodel.core.memory import kv_cache_bytes, linear_state_bytes
from perfmodel.core.ops import LINEAR_ATTENTION_OP, ops
from perfmodel.core.params import attention_matrices
from perfmodel.core.specs import Deployment, NumberFormat, Precision, parse_format

BF16 = Precision.of("bf16")


@pytest.fixture(autouse=True)
def _no_price_file(monkeypatch):
    monkeypatch.delenv(PRICES_ENV_VAR, raising=False)


# --------------------------------------------------------------------------- accelerators

NEW_GPUS = ["b300", "gb300", "h20", "h800", "gb10", "gh200", "mi300a", "rx-7900-xtx", "rtx-5080",
            "rtx-5070-ti", "jetson-agx-orin-64gb", "apple-m1-pro", "apple-m1-max",
            "apple-m1-ultra", "apple-m2-pro", "apple-m2-max", "apple-m3-pro", "apple-m3-ultra",
            "apple-m4-pro"]


@pytest.mark.parametrize("gpu_id", NEW_GPUS)
def test_new_gpus_load_with_sources(gpu_id):
    g = load_gpu(gpu_id)
    for key in ("memory", "bandwidth", "flops"):
        assert g.sources.get(key, "").strip(), f"{gpu_id}: sources.{key}"


@pytest.mark.parametrize("gpu_id, memory_gib, bandwidth_gb_s, bf16_tf, cite", [
    ("b300", 288, 8000, 2250, "HGX B300 datasheet: 2.3 TB / 8 GPUs, BF16 36 PF sparse / 8 / 2"),
    ("gb300", 288, 8000, 2500, "GB300 NVL72 page: 576 TB/s / 72, BF16 360 PF sparse / 72 / 2"),
    ("h20", 96, 4000, 148, "NVIDIA H20 specification: 96 GB HBM3, 4.0 TB/s, FP16 148 TF dense"),
    ("h800", 80, 3350, 989.4, "NVIDIA H800 datasheet: the H100 SXM5 compute and memory"),
    ("gh200", 96, 4000, 989.4, "NVIDIA GH200 datasheet: 96 GB HBM3 at 4 TB/s, H100 tensor rates"),
    ("mi300a", 128, 5300, 980.6, "AMD MI300A data sheet: 128 GB HBM3, 5.3 TB/s, BF16 980.6 dense"),
])
def test_datacenter_parts_by_hand(gpu_id, memory_gib, bandwidth_gb_s, bf16_tf, cite):
    g = load_gpu(gpu_id)
    assert g.memory_bytes == pytest.approx(memory_gib * units.GiB), cite
    assert g.memory_bandwidth_bytes_per_s == pytest.approx(bandwidth_gb_s * units.GB), cite
    assert g.peak_flops_per_s["bf16"] == pytest.approx(bf16_tf * units.TERA), cite


def test_topology_of_multi_gpu_systems():
    # HGX B300: 8 GPUs on one NVSwitch board; GB300 NVL72: 4 GPUs per tray, 72 in one NVLink domain
    assert (load_gpu("b300").gpus_per_node, load_gpu("b300").scale_up_gpus) == (8, 8)
    assert (load_gpu("gb300").gpus_per_node, load_gpu("gb300").scale_up_gpus) == (4, 72)


def test_h800_is_an_h100_with_a_narrower_nvlink():
    h100, h800 = load_gpu("h100-sxm"), load_gpu("h800")
    assert h800.peak_flops_per_s == h100.peak_flops_per_s
    # 400 vs 900 GB/s bidirectional (H800 / H100 datasheets)
    assert h800.intra_node_link.bandwidth_bytes_per_s == pytest.approx(200 * units.GB)
    assert h100.intra_node_link.bandwidth_bytes_per_s == pytest.approx(450 * units.GB)


@pytest.mark.parametrize("gpu_id, gib, gb_per_s", [
    ("apple-m1-pro", 32, 200), ("apple-m1-max", 64, 400), ("apple-m1-ultra", 128, 800),
    ("apple-m2-pro", 32, 200), ("apple-m2-max", 96, 400), ("apple-m3-pro", 36, 150),
    ("apple-m3-ultra", 512, 819), ("apple-m4-pro", 64, 273),
])   # Apple newsroom launch pages (memory up to, bandwidth)
def test_apple_variants(gpu_id, gib, gb_per_s):
    g = load_gpu(gpu_id)
    assert g.vendor == "apple" and g.memory_type == "unified"
    assert g.memory_bytes == pytest.approx(gib * units.GiB)
    assert g.memory_bandwidth_bytes_per_s == pytest.approx(gb_per_s * units.GB)
    assert g.peak_flops_per_s["fp16"] == g.peak_flops_per_s["fp32"]


def test_apple_derived_rates_follow_core_counts():
    # same GPU core and clock within a generation: TF per core of the Pro equals the Max's
    for pro, top in (("apple-m3-pro", "apple-m3-max"), ("apple-m4-pro", "apple-m4-max"),
                     ("apple-m2-max", "apple-m2-ultra")):
        a, b = load_gpu(pro), load_gpu(top)
        assert a.peak_flops_per_s["fp32"] / a.sm_count == pytest.approx(
            b.peak_flops_per_s["fp32"] / b.sm_count, rel=0.02)


# --------------------------------------------------------------------------- linear attention

def test_qwen35_layer_split_and_gated_q():
    m = load_model("qwen3.5-397b-a17b")
    assert (m.num_linear_attention_layers, m.num_full_attention_layers) == (45, 15)
    q = next(x for x in attention_matrices(m) if x.name == "q_proj")
    # attn_output_gate: q_proj emits q and a gate, 2 * 32 heads * 256 (Qwen3-Next modeling code)
    assert (q.d_in, q.d_out, q.count) == (4096, 2 * 32 * 256, 15)


# Qwen3.5-397B-A17B config.json: 64 value heads x (128 x 128) state, conv_dim 2*16*128 + 64*128
STATE_ELEMENTS = 64 * 128 * 128 + (4 - 1) * (2 * 16 * 128 + 64 * 128)   # 1,085,440
FULL_KV_BYTES_PER_TOKEN = 15 * 2 * 2 * 256 * 2     # 15 layers x K,V x 2 heads x 256 x bf16


def test_linear_attention_state_is_constant_per_sequence():
    m = load_model("qwen3.5-397b-a17b")
    for S in (1, 4096, 131072):
        want = S * FULL_KV_BYTES_PER_TOKEN + 45 * STATE_ELEMENTS * 2
        assert kv_cache_bytes(m, BF16, batch=1, context=S) == pytest.approx(want)


def test_linear_state_splits_over_tp_while_two_kv_heads_replicate():
    m = load_model("qwen3.5-397b-a17b")
    dep = Deployment(tp=8)
    # K = 2 kv heads over 8 GPUs: each GPU keeps a whole head (x4 of an even split)
    want = 4096 * FULL_KV_BYTES_PER_TOKEN * 4 / 8 + 45 * STATE_ELEMENTS * 2 / 8
    assert kv_cache_bytes(m, BF16, batch=1, context=4096, dep=dep) == pytest.approx(want)
    assert linear_state_bytes(m, BF16, batch=3, dep=dep) == pytest.approx(3 * 45 * STATE_ELEMENTS * 2 / 8)


def test_linear_attention_decode_op_by_hand():
    m = load_model("qwen3.5-397b-a17b")
    B = 4
    for S in (1000, 100000):
        op = next(o for o in ops(m, BF16, B, 1, S) if o.name == LINEAR_ATTENTION_OP)
        assert op.cost.kv_read_bytes == pytest.approx(B * 45 * STATE_ELEMENTS * 2)   # no S
        assert op.cost.flops == pytest.approx(B * 64 * 6 * 128 * 128 * 45)


@given(S=st.integers(0, 1 << 20), B=st.integers(1, 512))
def test_linear_layers_never_grow_with_context(S, B):
    m = load_model("qwen3.5-397b-a17b")
    a = next(o for o in ops(m, BF16, B, 1, S) if o.name == LINEAR_ATTENTION_OP)
    b = next(o for o in ops(m, BF16, B, 1, S + 1000) if o.name == LINEAR_ATTENTION_OP)
    assert a.cost.kv_read_bytes == b.cost.kv_read_bytes and a.cost.flops == b.cost.flops


# --------------------------------------------------------------------------- sparse attention

def test_dsa_kv_bytes_per_token_by_hand():
    m = load_model("glm-5")
    # GLM-5 config: latent 512 + rope 64 in bf16, 78 layers, plus the indexer key of 128 in fp8
    # with one fp32 scale (DeepSeek-V3.2-Exp inference/model.py: k_cache float8_e4m3fn,
    # k_scale_cache float32 per 128)
    assert kv_cache_bytes(m, BF16, batch=1, context=1000) == pytest.approx(
        1000 * 78 * ((512 + 64) * 2 + 128 + 4))


def test_dsa_attention_is_capped_at_topk_while_the_indexer_reads_everything():
    m = load_model("deepseek-v3.2")
    att = {S: next(o for o in ops(m, BF16, 1, 1, S) if o.name == "attention") for S in (10_000, 100_000)}
    idx = {S: next(o for o in ops(m, BF16, 1, 1, S) if o.name == "indexer") for S in (10_000, 100_000)}
    assert att[10_000].cost.flops == att[100_000].cost.flops   # both attend to 2048 tokens
    # per pair: absorbed MLA 2 * 128 heads * (2 * 512 + 64), in all 61 layers
    assert att[10_000].cost.flops == pytest.approx(2048 * 2 * 128 * (2 * 512 + 64) * 61)
    # indexer: 2 * 64 heads * 128 dims per visible token, S + 1 tokens
    assert idx[100_000].cost.flops == pytest.approx(100_001 * 2 * 64 * 128 * 61)
    # every cached index key read once: 128 fp8 values + one fp32 scale, whatever the KV format
    assert idx[100_000].cost.kv_read_bytes == pytest.approx(100_001 * (128 + 4) * 61)


@given(S=st.integers(0, 1 << 20))
def test_dsa_attention_never_exceeds_dense_and_is_monotone(S):
    sparse, dense = load_model("deepseek-v3.2"), load_model("deepseek-v3.1")
    f = lambda m, s: next(o for o in ops(m, BF16, 1, 1, s) if o.name == "attention").cost.flops  # noqa: E731
    assert f(sparse, S) <= f(dense, S) * (1 + 1e-12)
    assert f(sparse, S) <= f(sparse, S + 1)


# --------------------------------------------------------------------------- GGUF

@pytest.mark.parametrize("name, bits, family", [
    ("q4_0", (32 * 4 + 16) / 32, "int4"),          # 32 x 4-bit + one fp16 scale (ggml block_q4_0)
    ("q8_0", (32 * 8 + 16) / 32, "int8"),          # 32 x 8-bit + one fp16 scale (block_q8_0)
    ("q4_1", (32 * 4 + 16 + 16) / 32, "int4"),     # + an fp16 minimum (block_q4_1)
    ("q4_k", (256 * 4 + 2 * 16 + 12 * 8) / 256, "int4"),   # block_q4_K: d, dmin, 12 scale bytes
    ("q3_k", (256 * 3 + 16 + 12 * 8) / 256, "int4"),       # block_q3_K: hmask + qs, 12 scales, d
    ("q4_k_m", 4.84, "int4"),    # llama.cpp tools/quantize/README.md, Llama 2 7B column
    ("q5_k_m", 5.68, "int4"),
    ("q6_k", 6.56, "int8"),
])
def test_gguf_bits_per_weight_by_hand(name, bits, family):
    f = parse_format(name)
    assert f.bits * 1.0 == pytest.approx(bits) and f.name == family
    assert f.bytes_per_element == pytest.approx(bits / 8)
    assert parse_format(name.upper()).bytes_per_element == f.bytes_per_element


def test_gguf_float_names_and_weight_only_compute():
    assert parse_format("f16").name == "fp16" and parse_format("f32").name == "fp32"
    p = Precision.of("q4_k_m")
    assert p.activations.name == "bf16"       # weight-only: matmuls run in 16 bits
    assert "4.84" in p.label


@given(st.text(max_size=12))
def test_random_format_names_parse_or_raise_value_error(text):
    try:
        f = parse_format(text)
    except ValueError:
        return
    assert isinstance(f, NumberFormat) and 0 < f.bytes_per_element <= 4


# --------------------------------------------------------------------------- aliases

def test_aliases_point_at_catalog_models_and_shadow_none():
    ids = {m.id for m in list_models()}
    assert all(target in ids for target, _ in ALIASES.values())
    assert not set(ALIASES) & ids
    assert all(why.strip() for _, why in ALIASES.values())


def test_alias_lookup():
    assert load_model("vicuna-7b").id == "llama-2-7b"          # lmsys/vicuna-7b-v1.5: Llama 2
    assert load_model("Vicuna-33B").id == "llama-1-33b"        # v1.3: LLaMA 1
    assert load_model("zhipuai/GLM-5").id == "glm-5"
    with pytest.raises(UnknownIdError) as exc:
        load_model("vicuna-8b")
    assert "vicuna-7b" in exc.value.close


# --------------------------------------------------------------------------- prices

def test_every_price_states_the_one_basis_and_date():
    priced = [g for g in list_gpus() if g.price is not None]
    assert len(priced) >= 10
    for g in priced:
        assert g.price.source.startswith(PRICE_BASIS), g.id
        assert g.price.date == PRICE_DATE, g.id


def test_h200_no_longer_priced_with_hyperscalers():
    # same neocloud basis as H100: the H200 premium is about its memory, well under 2x
    ratio = load_gpu("h200-sxm").price.usd_per_hour / load_gpu("h100-sxm").price.usd_per_hour
    assert 1.0 < ratio < 1.6


def test_price_file_overrides_every_loader(tmp_path, monkeypatch):
    f = tmp_path / "prices.yaml"
    f.write_text("h100-sxm: 1.25\nB200: 4\n")
    monkeypatch.setenv(PRICES_ENV_VAR, str(f))
    assert load_gpu("h100-sxm").price.usd_per_hour == 1.25
    assert {g.id: g.price for g in list_gpus()}["b200"].usd_per_hour == 4.0
    assert load_gpu("h100-sxm").price.source.startswith("user override")
    assert load_gpu("l40s").price.usd_per_hour == 0.87     # untouched


@pytest.mark.parametrize("body, why", [
    ("- 1\n- 2\n", "expected a mapping"),
    ("h100-sxm: -2\n", "positive number"),
    ("h100-sxm: cheap\n", "positive number"),
    ("h100-sxm: .inf\n", "positive number"),
    ("no-such-gpu: 1.0\n", "unknown GPU"),
    ("h100-sxm: [1\n", "malformed YAML"),
])
def test_bad_price_file_is_one_line_and_exit_2(tmp_path, monkeypatch, capsys, body, why):
    f = tmp_path / "prices.yaml"
    f.write_text(body)
    monkeypatch.setenv(PRICES_ENV_VAR, str(f))
    with pytest.raises(PerfModelError, match=why):
        list_gpus()
    assert main(["gpus"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err


def test_missing_price_file(monkeypatch):
    monkeypatch.setenv(PRICES_ENV_VAR, "/no/such/prices.yaml")
    with pytest.raises(PerfModelError, match="cannot read"):
        load_gpu("h100-sxm")


@given(st.dictionaries(st.text(max_size=10), st.one_of(st.floats(allow_nan=True), st.text(max_size=5),
                                                       st.booleans(), st.none()), max_size=4))
def test_random_price_files_give_prices_or_a_clean_error(tmp_path_factory, data):
    f = tmp_path_factory.mktemp("p") / "prices.yaml"
    f.write_text(yaml.safe_dump(data))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(PRICES_ENV_VAR, str(f))
        try:
            gpus = list_gpus()
        except PerfModelError:
            return
    for g in gpus:
        if g.price is not None:
            assert np.isfinite(g.price.usd_per_hour) and g.price.usd_per_hour > 0


def test_size_price_for_every_gpu(capsys):
    args = ["size", "--model", "llama-3.1-8b", "--rate", "1", "--prompt", "512", "--output",
            "128", "--ttft-slo", "2", "--tpot-slo", "0.1", "--gpus", "h100-sxm,l40s",
            "--precisions", "bf16", "--price", "1.5", "--json"]
    assert main(args) == 0
    import json
    out = json.loads(capsys.readouterr().out)
    for d in out["deployments"]:
        assert d["usd_per_hour"] == pytest.approx(1.5 * d["count"])


# --------------------------------------------------------------------------- config.json import
# Hand-written from each repo's config.json (the fields the importer reads), as cited in the
# catalog YAML's `source`.

QWEN35_397B = {"model_type": "qwen3_5_moe", "architectures": ["Qwen3_5MoeForConditionalGeneration"],
               "text_config": {
    "model_type": "qwen3_5_moe_text", "hidden_size": 4096, "num_hidden_layers": 60,
    "num_attention_heads": 32, "num_key_value_heads": 2, "head_dim": 256, "vocab_size": 248320,
    "max_position_embeddings": 262144, "num_experts": 512, "num_experts_per_tok": 10,
    "moe_intermediate_size": 1024, "shared_expert_intermediate_size": 1024,
    "full_attention_interval": 4, "attn_output_gate": True, "linear_num_key_heads": 16,
    "linear_num_value_heads": 64, "linear_key_head_dim": 128, "linear_value_head_dim": 128,
    "linear_conv_kernel_dim": 4, "tie_word_embeddings": False,
    "layer_types": ["full_attention" if (i + 1) % 4 == 0 else "linear_attention" for i in range(60)]}}
GLM5 = {"model_type": "glm_moe_dsa", "hidden_size": 6144, "num_hidden_layers": 78,
        "num_attention_heads": 64, "num_key_value_heads": 64, "head_dim": 64, "vocab_size": 154880,
        "intermediate_size": 12288, "max_position_embeddings": 202752, "first_k_dense_replace": 3,
        "n_routed_experts": 256, "n_shared_experts": 1, "num_experts_per_tok": 8,
        "moe_intermediate_size": 2048, "qk_nope_head_dim": 192, "qk_rope_head_dim": 64,
        "v_head_dim": 256, "q_lora_rank": 2048, "kv_lora_rank": 512, "index_topk": 2048,
        "index_n_heads": 32, "index_head_dim": 128, "tie_word_embeddings": False}
KIMI_K2 = {"model_type": "kimi_k2", "hidden_size": 7168, "num_hidden_layers": 61,
           "num_attention_heads": 64, "num_key_value_heads": 64, "vocab_size": 163840,
           "intermediate_size": 18432, "max_position_embeddings": 131072,
           "first_k_dense_replace": 1, "n_routed_experts": 384, "n_shared_experts": 1,
           "num_experts_per_tok": 8, "moe_intermediate_size": 2048, "qk_nope_head_dim": 128,
           "qk_rope_head_dim": 64, "v_head_dim": 128, "q_lora_rank": 1536, "kv_lora_rank": 512,
           "tie_word_embeddings": False}
MINIMAX_M2 = {"model_type": "minimax_m2", "hidden_size": 3072, "num_hidden_layers": 62,
              "num_attention_heads": 48, "num_key_value_heads": 8, "head_dim": 128,
              "intermediate_size": 1536, "num_local_experts": 256, "num_experts_per_tok": 8,
              "vocab_size": 200064, "max_position_embeddings": 196608, "tie_word_embeddings": False}
GLM45 = {"model_type": "glm4_moe", "hidden_size": 5120, "num_hidden_layers": 92,
         "num_attention_heads": 96, "num_key_value_heads": 8, "head_dim": 128,
         "attention_bias": True, "intermediate_size": 12288, "moe_intermediate_size": 1536,
         "n_routed_experts": 160, "n_shared_experts": 1, "num_experts_per_tok": 8,
         "first_k_dense_replace": 3, "vocab_size": 151552, "max_position_embeddings": 131072,
         "tie_word_embeddings": False}
GEMMA3_27B = {"model_type": "gemma3", "architectures": ["Gemma3ForConditionalGeneration"],
              "text_config": {
    "model_type": "gemma3_text", "hidden_size": 5376, "num_hidden_layers": 62,
    "num_attention_heads": 32, "num_key_value_heads": 16, "head_dim": 128,
    "intermediate_size": 21504, "sliding_window": 1024, "sliding_window_pattern": 6,
    "vocab_size": 262208, "max_position_embeddings": 131072, "query_pre_attn_scalar": 168}}
ARCH = ["num_layers", "d_model", "num_heads", "num_kv_heads", "head_dim", "ffn_dim", "vocab_size",
        "tied_embeddings", "qkv_bias", "max_context", "sliding_window_layers", "moe", "mla",
        "linear_attention", "sparse_attention", "attention_output_gate"]


@pytest.mark.parametrize("cfg, ident", [(QWEN35_397B, "qwen3.5-397b-a17b"), (GLM5, "glm-5"),
                                         (KIMI_K2, "kimi-k2"), (MINIMAX_M2, "minimax-m2"),
                                         (GLM45, "glm-4.5"), (GEMMA3_27B, "gemma-3-27b")], ids=lambda x: x if isinstance(x, str) else "")
def test_hf_configs_of_new_families_reproduce_the_catalog(tmp_path, cfg, ident):
    import json
    from perfmodel.core.catalog import load_hf_config
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "config.json").write_text(json.dumps(cfg))
    spec = load_hf_config(tmp_path / "m")
    assert spec.model_dump(include=set(ARCH)) == load_model(ident).model_dump(include=set(ARCH))


@given(text=st.text(max_size=40), strict=st.booleans())
def test_random_gpu_names_give_an_id_or_a_reason(text, strict):
    from perfmodel.analysis.validation.names import gpu_id
    gid, reason, notes = gpu_id(text, strict=strict)
    assert (gid is None) == bool(reason) and isinstance(notes, list)
    if gid is not None:
        assert load_gpu(gid).id == gid


@given(st.text(max_size=30))
def test_random_model_queries_resolve_or_raise_a_perfmodel_error(text):
    try:
        m = load_model(text)
    except PerfModelError:
        return
    assert m.id in {x.id for x in list_models()} or m.source.startswith("Hugging Face config.json")
