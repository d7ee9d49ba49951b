"""Model specs from files: the Hugging Face config.json importer reproduces the catalog, YAML
spec files load or name the bad field, and random or mutated inputs give a spec or a clean error."""

import copy
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from perfmodel.core.catalog import catalog_dir, list_models, load_model, load_spec_file
from perfmodel.core.catalog.hf_config import load_hf_config
from perfmodel.core.errors import PerfModelError, SpecFileError
from perfmodel.core.params import count_params
from perfmodel.core.specs import ModelSpec

from test_catalog import ARCH_FIELDS

MODELS = list_models()


# --------------------------------------------------------------------------- config.json import
# Hand-written from the real config.json of each repo (huggingface.co/<repo>/blob/main/config.json).

LLAMA_31_8B = {
    "architectures": ["LlamaForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
    "bos_token_id": 128000, "eos_token_id": 128001, "hidden_act": "silu", "hidden_size": 4096,
    "initializer_range": 0.02, "intermediate_size": 14336, "max_position_embeddings": 131072,
    "mlp_bias": False, "model_type": "llama", "num_attention_heads": 32, "num_hidden_layers": 32,
    "num_key_value_heads": 8, "pretraining_tp": 1, "rms_norm_eps": 1e-05,
    "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                     "original_max_position_embeddings": 8192, "rope_type": "llama3"},
    "rope_theta": 500000.0, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
    "transformers_version": "4.43.0.dev0", "use_cache": True, "vocab_size": 128256,
}
QWEN25_7B = {
    "architectures": ["Qwen2ForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 151643,
    "eos_token_id": 151643, "hidden_act": "silu", "hidden_size": 3584, "initializer_range": 0.02,
    "intermediate_size": 18944, "max_position_embeddings": 131072, "max_window_layers": 28,
    "model_type": "qwen2", "num_attention_heads": 28, "num_hidden_layers": 28,
    "num_key_value_heads": 4, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0,
    "sliding_window": 131072, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
    "transformers_version": "4.43.1", "use_cache": True, "use_sliding_window": False,
    "vocab_size": 152064,
}
MIXTRAL_8X7B = {
    "architectures": ["MixtralForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 1,
    "eos_token_id": 2, "hidden_act": "silu", "hidden_size": 4096, "initializer_range": 0.02,
    "intermediate_size": 14336, "max_position_embeddings": 32768, "model_type": "mixtral",
    "num_attention_heads": 32, "num_experts_per_tok": 2, "num_hidden_layers": 32,
    "num_key_value_heads": 8, "num_local_experts": 8, "output_router_logits": False,
    "rms_norm_eps": 1e-05, "rope_theta": 1000000.0, "router_aux_loss_coef": 0.02,
    "sliding_window": None, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
    "transformers_version": "4.36.0.dev0", "use_cache": True, "vocab_size": 32000,
}
DEEPSEEK_V3 = {
    "architectures": ["DeepseekV3ForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
    "auto_map": {"AutoConfig": "configuration_deepseek.DeepseekV3Config",
                 "AutoModel": "modeling_deepseek.DeepseekV3Model",
                 "AutoModelForCausalLM": "modeling_deepseek.DeepseekV3ForCausalLM"},
    "aux_loss_alpha": 0.001, "bos_token_id": 0, "eos_token_id": 1, "ep_size": 1,
    "first_k_dense_replace": 3, "hidden_act": "silu", "hidden_size": 7168,
    "initializer_range": 0.02, "intermediate_size": 18432, "kv_lora_rank": 512,
    "max_position_embeddings": 163840, "model_type": "deepseek_v3", "moe_intermediate_size": 2048,
    "moe_layer_freq": 1, "n_group": 8, "n_routed_experts": 256, "n_shared_experts": 1,
    "norm_topk_prob": True, "num_attention_heads": 128, "num_experts_per_tok": 8,
    "num_hidden_layers": 61, "num_key_value_heads": 128, "num_nextn_predict_layers": 1,
    "q_lora_rank": 1536, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64,
    "quantization_config": {"activation_scheme": "dynamic", "fmt": "e4m3",
                            "quant_method": "fp8", "weight_block_size": [128, 128]},
    "rms_norm_eps": 1e-06,
    "rope_scaling": {"beta_fast": 32, "beta_slow": 1, "factor": 40, "mscale": 1.0,
                     "mscale_all_dim": 1.0, "original_max_position_embeddings": 4096, "type": "yarn"},
    "rope_theta": 10000, "routed_scaling_factor": 2.5, "scoring_func": "sigmoid",
    "tie_word_embeddings": False, "topk_group": 4, "topk_method": "noaux_tc",
    "torch_dtype": "bfloat16", "transformers_version": "4.33.1", "use_cache": True,
    "v_head_dim": 128, "vocab_size": 129280,
}
GEMMA2_9B = {  # no tie_word_embeddings key: Gemma2Config defaults to tied
    "architectures": ["Gemma2ForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
    "attn_logit_softcapping": 50.0, "bos_token_id": 2, "cache_implementation": "hybrid",
    "eos_token_id": 1, "final_logit_softcapping": 30.0, "head_dim": 256,
    "hidden_act": "gelu_pytorch_tanh", "hidden_activation": "gelu_pytorch_tanh",
    "hidden_size": 3584, "initializer_range": 0.02, "intermediate_size": 14336,
    "max_position_embeddings": 8192, "model_type": "gemma2", "num_attention_heads": 16,
    "num_hidden_layers": 42, "num_key_value_heads": 8, "pad_token_id": 0,
    "query_pre_attn_scalar": 256, "rms_norm_eps": 1e-06, "rope_theta": 10000.0,
    "sliding_window": 4096, "sliding_window_size": 4096, "torch_dtype": "float32",
    "transformers_version": "4.42.0.dev0", "use_cache": True, "vocab_size": 256000,
}
PHI3_MINI = {
    "_name_or_path": "Phi-3-mini-4k-instruct", "architectures": ["Phi3ForCausalLM"],
    "attention_dropout": 0.0,
    "auto_map": {"AutoConfig": "configuration_phi3.Phi3Config",
                 "AutoModelForCausalLM": "modeling_phi3.Phi3ForCausalLM"},
    "bos_token_id": 1, "embd_pdrop": 0.0, "eos_token_id": 32000, "hidden_act": "silu",
    "hidden_size": 3072, "initializer_range": 0.02, "intermediate_size": 8192,
    "max_position_embeddings": 4096, "model_type": "phi3", "num_attention_heads": 32,
    "num_hidden_layers": 32, "num_key_value_heads": 32, "original_max_position_embeddings": 4096,
    "pad_token_id": 32000, "resid_pdrop": 0.0, "rms_norm_eps": 1e-05, "rope_scaling": None,
    "rope_theta": 10000.0, "sliding_window": 2047, "tie_word_embeddings": False,
    "torch_dtype": "bfloat16", "transformers_version": "4.40.2", "use_cache": True,
    "vocab_size": 32064,
}
QWEN3_30B_A3B = {
    "architectures": ["Qwen3MoeForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
    "bos_token_id": 151643, "decoder_sparse_step": 1, "eos_token_id": 151645, "head_dim": 128,
    "hidden_act": "silu", "hidden_size": 2048, "initializer_range": 0.02,
    "intermediate_size": 6144, "max_position_embeddings": 40960, "max_window_layers": 48,
    "mlp_only_layers": [], "model_type": "qwen3_moe", "moe_intermediate_size": 768,
    "norm_topk_prob": True, "num_attention_heads": 32, "num_experts": 128,
    "num_experts_per_tok": 8, "num_hidden_layers": 48, "num_key_value_heads": 4,
    "output_router_logits": False, "rms_norm_eps": 1e-06, "rope_scaling": None,
    "rope_theta": 1000000.0, "router_aux_loss_coef": 0.001, "sliding_window": None,
    "tie_word_embeddings": False, "torch_dtype": "bfloat16", "transformers_version": "4.51.0",
    "use_cache": True, "use_sliding_window": False, "vocab_size": 151936,
}
MISTRAL_7B = {
    "architectures": ["MistralForCausalLM"], "bos_token_id": 1, "eos_token_id": 2,
    "hidden_act": "silu", "hidden_size": 4096, "initializer_range": 0.02,
    "intermediate_size": 14336, "max_position_embeddings": 32768, "model_type": "mistral",
    "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
    "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "sliding_window": 4096,
    "tie_word_embeddings": False, "torch_dtype": "bfloat16", "transformers_version": "4.34.0.dev0",
    "use_cache": True, "vocab_size": 32000,
}
GPT_OSS_20B = {
    "architectures": ["GptOssForCausalLM"], "attention_bias": True, "attention_dropout": 0.0,
    "eos_token_id": 200002, "experts_per_token": 4, "head_dim": 64, "hidden_act": "silu",
    "hidden_size": 2880, "initial_context_length": 4096, "initializer_range": 0.02,
    "intermediate_size": 2880, "layer_types": ["sliding_attention", "full_attention"] * 12,
    "max_position_embeddings": 131072, "model_type": "gpt_oss", "num_attention_heads": 64,
    "num_experts_per_tok": 4, "num_hidden_layers": 24, "num_key_value_heads": 8,
    "num_local_experts": 32, "output_router_logits": False, "pad_token_id": 199999,
    "rms_norm_eps": 1e-05,
    "rope_scaling": {"beta_fast": 32.0, "beta_slow": 1.0, "factor": 32.0,
                     "original_max_position_embeddings": 4096, "rope_type": "yarn", "truncate": False},
    "rope_theta": 150000, "router_aux_loss_coef": 0.9, "sliding_window": 128,
    "swiglu_limit": 7.0, "tie_word_embeddings": False, "transformers_version": "4.55.0.dev0",
    "use_cache": True, "vocab_size": 201088,
}

ROUND_TRIP = [  # (folder name, config, catalog id)
    ("Llama-3.1-8B", LLAMA_31_8B, "llama-3.1-8b"),
    ("Qwen2.5-7B", QWEN25_7B, "qwen2.5-7b"),
    ("Mixtral-8x7B-v0.1", MIXTRAL_8X7B, "mixtral-8x7b"),
    ("DeepSeek-V3", DEEPSEEK_V3, "deepseek-v3"),
    ("gemma-2-9b", GEMMA2_9B, "gemma-2-9b"),
    ("Phi-3-mini-4k-instruct", PHI3_MINI, "phi-3-mini"),
    ("Qwen3-30B-A3B", QWEN3_30B_A3B, "qwen3-30b-a3b"),
    ("Mistral-7B-v0.1", MISTRAL_7B, "mistral-7b"),
    ("gpt-oss-20b", GPT_OSS_20B, "gpt-oss-20b"),
]


def write_config(folder: Path, cfg: dict) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "config.json"
    path.write_text(json.dumps(cfg, indent=2))
    return path


def arch(m: ModelSpec) -> dict:
    return m.model_dump(include=set(ARCH_FIELDS))


@pytest.mark.parametrize("folder, cfg, ident", ROUND_TRIP, ids=[r[2] for r in ROUND_TRIP])
def test_hf_config_round_trip(tmp_path: Path, folder: str, cfg: dict, ident: str):
    path = write_config(tmp_path / folder, cfg)
    spec = load_hf_config(path)
    assert arch(spec) == arch(load_model(ident))
    assert spec.id == folder.lower() and spec.name == folder
    assert count_params(spec).total == count_params(load_model(ident)).total
    # load_model accepts the file and the folder holding it
    assert arch(load_model(str(path))) == arch(spec)
    assert arch(load_model(str(path.parent))) == arch(spec)


def test_hf_cache_layout_gives_repo_and_id(tmp_path: Path):
    snap = tmp_path / "models--meta-llama--Llama-3.1-8B" / "snapshots" / ("0123abcd" * 5)
    spec = load_hf_config(write_config(snap, LLAMA_31_8B))
    assert (spec.id, spec.hf_repo) == ("llama-3.1-8b", "meta-llama/Llama-3.1-8B")


def test_name_or_path_gives_repo_when_it_names_the_folder(tmp_path: Path):
    cfg = {**LLAMA_31_8B, "_name_or_path": "meta-llama/Llama-3.1-8B"}
    assert load_hf_config(write_config(tmp_path / "Llama-3.1-8B", cfg)).hf_repo == "meta-llama/Llama-3.1-8B"
    # a fine-tune names its base model: that is not this folder's repo
    assert load_hf_config(write_config(tmp_path / "my-finetune", cfg)).hf_repo is None


def test_qwen_moe_layer_pattern_and_shared_expert(tmp_path: Path):
    cfg = {**QWEN3_30B_A3B, "model_type": "qwen2_moe", "mlp_only_layers": [0, 5],
           "decoder_sparse_step": 1, "shared_expert_intermediate_size": 5632}
    spec = load_hf_config(write_config(tmp_path / "q", cfg))
    assert spec.moe.num_dense_layers == 2 and spec.qkv_bias
    assert (spec.moe.num_shared_experts, spec.moe.shared_expert_ffn_dim) == (1, 5632)
    cfg = {**QWEN3_30B_A3B, "decoder_sparse_step": 2}
    assert load_hf_config(write_config(tmp_path / "s", cfg)).moe.num_dense_layers == 24


def test_qwen_sliding_window_above_max_window_layers(tmp_path: Path):
    cfg = {**QWEN25_7B, "use_sliding_window": True, "sliding_window": 4096, "max_window_layers": 20}
    spec = load_hf_config(write_config(tmp_path / "q", cfg))
    assert (spec.sliding_window, spec.sliding_window_layers) == (4096, 8)


def test_unsupported_model_type_names_fields(tmp_path: Path):
    cfg = {"model_type": "gpt2", "n_layer": 12, "n_embd": 768, "n_head": 12, "vocab_size": 50257}
    path = write_config(tmp_path / "gpt2", cfg)
    with pytest.raises(SpecFileError) as exc:
        load_hf_config(path)
    msg = str(exc.value)
    assert str(path) in msg and "'gpt2'" in msg
    for field in ("num_hidden_layers", "hidden_size", "num_attention_heads", "intermediate_size"):
        assert field in msg


@pytest.mark.parametrize("field", ["intermediate_size", "num_hidden_layers", "vocab_size",
                                   "max_position_embeddings"])
def test_missing_required_field_is_named(tmp_path: Path, field: str):
    cfg = {k: v for k, v in LLAMA_31_8B.items() if k != field}
    path = write_config(tmp_path / "m", cfg)
    with pytest.raises(SpecFileError, match=field) as exc:
        load_hf_config(path)
    assert str(path) in str(exc.value)


def test_missing_mla_field_is_named(tmp_path: Path):
    cfg = {k: v for k, v in DEEPSEEK_V3.items() if k != "kv_lora_rank"}
    with pytest.raises(SpecFileError, match="kv_lora_rank"):
        load_hf_config(write_config(tmp_path / "d", cfg))


def test_wrong_type_is_named(tmp_path: Path):
    with pytest.raises(SpecFileError, match="hidden_size"):
        load_hf_config(write_config(tmp_path / "w", {**LLAMA_31_8B, "hidden_size": "4096"}))


def test_unreadable_inputs(tmp_path: Path):
    bad = tmp_path / "bad" / "config.json"
    bad.parent.mkdir()
    bad.write_text("{not json")
    with pytest.raises(SpecFileError, match="not valid JSON"):
        load_model(str(bad))
    with pytest.raises(SpecFileError, match="config.json"):
        load_model(str(tmp_path))  # a folder without config.json
    with pytest.raises(SpecFileError):
        load_model(str(tmp_path / "nope.json"))


# --------------------------------------------------------------------------- YAML spec files


def test_yaml_spec_file_by_path(tmp_path: Path):
    src = (catalog_dir() / "llama-3.1-8b.yaml").read_text()
    path = tmp_path / "mine.yaml"
    path.write_text(src.replace("id: llama-3.1-8b", "id: my-llama"))
    spec = load_model(str(path))
    assert spec.id == "my-llama" and arch(spec) == arch(load_model("llama-3.1-8b"))


@pytest.mark.parametrize("body, field", [
    ("num_layers: -1", "num_layers"),
    ("bogus_key: 3", "bogus_key"),
    ("moe: {num_experts: 8, experts_per_token: 9, expert_ffn_dim: 10}", "moe"),
])
def test_malformed_yaml_names_file_and_field(tmp_path: Path, body: str, field: str):
    src = (catalog_dir() / "llama-3.1-8b.yaml").read_text()
    lines = [ln for ln in src.splitlines() if not ln.startswith(body.split(":")[0] + ":")]
    path = tmp_path / "bad.yaml"
    path.write_text("\n".join(lines + [body]) + "\n")
    with pytest.raises(SpecFileError) as exc:
        load_model(str(path))
    assert str(path.resolve()) in str(exc.value) and field in str(exc.value)


def test_yaml_syntax_error_names_file_and_line(tmp_path: Path):
    path = tmp_path / "broken.yaml"
    path.write_text("id: x\nnum_layers: [1, 2\n")
    with pytest.raises(SpecFileError, match="line") as exc:
        load_spec_file(path)
    assert "broken.yaml" in str(exc.value)


# --------------------------------------------------------------------------- property tests

JSON = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-2**70, max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12)
BASES = [cfg for _, cfg, _ in ROUND_TRIP]
KEYS = sorted({k for cfg in BASES for k in cfg} | {"mlp_only_layers", "decoder_sparse_step",
                                                   "shared_expert_intermediate_size", "layer_types",
                                                   "use_sliding_window", "text_config"})


def _only_spec_or_error(fn, *args):
    try:
        out = fn(*args)
    except PerfModelError:
        return
    assert isinstance(out, ModelSpec)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cfg=st.dictionaries(st.text(max_size=30), JSON, max_size=8)
       | st.dictionaries(st.sampled_from(KEYS), JSON, max_size=20))
def test_random_dicts_give_a_spec_or_a_perfmodel_error(tmp_path: Path, cfg: dict):
    path = tmp_path / "r" / "config.json"
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(cfg, allow_nan=True))
    _only_spec_or_error(load_hf_config, path)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(base=st.sampled_from(BASES), edits=st.dictionaries(st.sampled_from(KEYS), JSON | st.integers(-3, 200), max_size=4),
       drop=st.lists(st.sampled_from(KEYS), max_size=2))
def test_mutated_real_configs_give_a_spec_or_a_perfmodel_error(tmp_path: Path, base, edits, drop):
    cfg = copy.deepcopy(base)
    cfg.update(edits)
    for k in drop:
        cfg.pop(k, None)
    path = tmp_path / "m" / "config.json"
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(cfg, allow_nan=True))
    _only_spec_or_error(load_hf_config, path)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.text(max_size=200) | st.binary(max_size=200).map(lambda b: b.decode("latin-1")))
def test_random_file_contents_give_a_spec_or_a_perfmodel_error(tmp_path: Path, text: str):
    for name in ("config.json", "spec.yaml"):
        path = tmp_path / name
        path.write_text(text, encoding="utf-8", errors="surrogateescape")
        _only_spec_or_error(load_model, str(path))


@settings(max_examples=300, deadline=None)
@given(query=st.text(max_size=60) | st.sampled_from([m.id for m in MODELS] + ["/", ".", "..", "tests",
                                                                           "x.json", "x.yaml", "\x00.json"]))
def test_random_queries_give_a_spec_or_a_perfmodel_error(query: str):
    _only_spec_or_error(load_model, query)
