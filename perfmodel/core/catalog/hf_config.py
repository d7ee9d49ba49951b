"""Read a Hugging Face `config.json` from disk into a ModelSpec. Nothing is downloaded.

Supported `model_type`s: llama, mistral, mixtral, qwen2, qwen2_moe, qwen3, qwen3_moe,
qwen3_next, qwen3_5_moe, deepseek_v2, deepseek_v3, deepseek_v32, kimi_k2, glm4_moe,
glm_moe_dsa, minimax_m2, gemma2, gemma3_text, phi3, gpt_oss. Each maps the transformers config fields
(num_hidden_layers, hidden_size, ...) the way the matching transformers model builds its
layers; any other model_type is an error that names the fields it would have needed.

Conventions that are choices, not config values:
- MLA (DeepSeek): head_dim = qk_nope_head_dim + qk_rope_head_dim (the q/k head width).
- MoE layers that are not leading (Qwen `mlp_only_layers`, `decoder_sparse_step`, DeepSeek
  `moe_layer_freq`) are counted into `moe.num_dense_layers`: only their number matters.
- A sliding window as long as the context (or longer) is no window.
- Linear-attention layers (Qwen3-Next/Qwen3.5 Gated DeltaNet) are the `linear_attention`
  entries of layer_types, else all but every full_attention_interval-th layer.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from perfmodel.core.files import load_mapping
from perfmodel.core.errors import SpecFileError, pydantic_message
from perfmodel.core.specs import (LinearAttentionSpec, MLASpec, ModelSpec, MoESpec,
                                  SparseAttentionSpec)

# required config.json keys common to every supported family
_CORE = ["num_hidden_layers", "hidden_size", "num_attention_heads", "vocab_size",
         "max_position_embeddings"]
_MOE_QWEN = ["num_experts", "num_experts_per_tok", "moe_intermediate_size"]
_MLA = ["kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"]
_DS_MOE = ["intermediate_size", "moe_intermediate_size", "n_routed_experts", "num_experts_per_tok"]
_DSA = ["index_topk", "index_n_heads", "index_head_dim"]
_LINEAR = ["linear_num_key_heads", "linear_num_value_heads", "linear_key_head_dim",
           "linear_value_head_dim"]
# families whose MoE keys follow DeepSeek (n_routed_experts, first_k_dense_replace, ...)
# model_types whose router GEMM the engines run in fp32 (MoESpec.router_fp32; vLLM minimax_m2.py,
# glm4_moe.py)
FP32_ROUTER_TYPES = frozenset({"minimax_m2", "glm4_moe"})
_DEEPSEEK_MOE = {"deepseek_v2", "deepseek_v3", "deepseek_v32", "kimi_k2", "glm_moe_dsa", "glm4_moe"}
_MLA_TYPES = _DEEPSEEK_MOE - {"glm4_moe"}

# model_type -> (family, extra required keys, tie_word_embeddings default in transformers)
FAMILIES: dict[str, tuple[str, list[str], bool]] = {
    "llama": ("llama", ["intermediate_size"], False),
    "mistral": ("mistral", ["intermediate_size"], False),
    "mixtral": ("mixtral", ["intermediate_size", "num_local_experts", "num_experts_per_tok"], False),
    "qwen2": ("qwen2", ["intermediate_size"], False),
    "qwen2_moe": ("qwen2_moe", ["intermediate_size"] + _MOE_QWEN, False),
    "qwen3": ("qwen3", ["intermediate_size"], False),
    "qwen3_moe": ("qwen3_moe", ["intermediate_size"] + _MOE_QWEN, False),
    "deepseek_v2": ("deepseek_v2", ["intermediate_size", "moe_intermediate_size",
                                    "n_routed_experts", "num_experts_per_tok"] + _MLA, False),
    "deepseek_v3": ("deepseek_v3", ["intermediate_size", "moe_intermediate_size",
                                    "n_routed_experts", "num_experts_per_tok"] + _MLA, False),
    "deepseek_v32": ("deepseek_v32", _DS_MOE + _MLA + _DSA, False),
    "kimi_k2": ("deepseek_v3", _DS_MOE + _MLA, False),
    "glm_moe_dsa": ("glm_moe_dsa", _DS_MOE + _MLA + _DSA, False),
    "glm4_moe": ("glm4_moe", _DS_MOE, False),
    "qwen3_next": ("qwen3_next", ["intermediate_size"] + _MOE_QWEN + _LINEAR, False),
    "qwen3_5_moe": ("qwen3_5_moe", _MOE_QWEN + _LINEAR, False),
    "minimax_m2": ("minimax_m2", ["intermediate_size", "num_local_experts", "num_experts_per_tok"], False),
    "gemma2": ("gemma2", ["intermediate_size", "head_dim"], True),
    "gemma3_text": ("gemma3", ["intermediate_size", "head_dim"], True),
    "phi3": ("phi3", ["intermediate_size"], False),
    "gpt_oss": ("gpt_oss", ["intermediate_size", "num_local_experts"], False),
}

_HASH = re.compile(r"^[0-9a-f]{40}$")
_REPO = re.compile(r"^[A-Za-z0-9][\w.\-]*/[\w.\-]+$")


def load_hf_config(path: str | Path) -> ModelSpec:
    """Parse `path` (a config.json, or a folder holding one) into a ModelSpec.

    Raises SpecFileError naming the file and the field on anything it cannot map."""
    p = Path(path)
    if p.is_dir():
        p = p / "config.json"
    cfg = load_mapping(p, what="config.json", fmt="json")
    return spec_from_hf_dict(cfg, p)


def spec_from_hf_dict(cfg: Any, path: str | Path = "config.json") -> ModelSpec:
    """Map an already parsed config dict; `path` names the file in errors and gives the id."""
    p = Path(path)
    if not isinstance(cfg, dict):
        raise SpecFileError(f"{p}: expected a JSON object, got {type(cfg).__name__}")
    cfg = _flatten_text_config(cfg)
    model_type = cfg.get("model_type")
    if not _known(model_type):
        raise SpecFileError(
            f"{p}: unsupported model_type {model_type!r} (supported: {', '.join(sorted(FAMILIES))}); "
            f"it needs the fields {', '.join(_CORE + ['intermediate_size'])} and the family's "
            "attention/MoE layout, which cannot be mapped for an unknown family")
    family, extra, tie_default = FAMILIES[model_type]
    missing = [k for k in _CORE + extra if k not in cfg or cfg[k] is None]
    if missing:
        raise SpecFileError(f"{p}: model_type {model_type!r} needs {', '.join(missing)} "
                            "(missing from the file)")
    f = _Fields(cfg, p)
    layers = f.int("num_hidden_layers")
    d_model = f.int("hidden_size")
    heads = f.int("num_attention_heads")
    max_context = f.int("max_position_embeddings")
    fields: dict[str, Any] = dict(
        family=family,
        num_layers=layers,
        d_model=d_model,
        num_heads=heads,
        num_kv_heads=f.int("num_key_value_heads", default=heads),
        head_dim=f.int("head_dim", default=d_model // heads if heads else 0),
        ffn_dim=f.int("intermediate_size", default=f.int("moe_intermediate_size", default=0)),
        vocab_size=f.int("vocab_size"),
        tied_embeddings=f.bool("tie_word_embeddings", default=tie_default),
        gated_mlp=True,
        qkv_bias=model_type in ("qwen2", "qwen2_moe") or f.bool("attention_bias", default=False),
        max_context=max_context,
    )
    fields.update(_sliding(f, model_type, layers, max_context))
    if model_type in _MLA_TYPES:
        fields["mla"] = _mla(f)
        fields["head_dim"] = f.int("qk_nope_head_dim") + f.int("qk_rope_head_dim")
    if all(k in cfg for k in _DSA):
        fields["sparse_attention"] = _built(f, SparseAttentionSpec, "sparse_attention", **{
            "index_topk": f.int("index_topk"), "index_n_heads": f.int("index_n_heads"),
            "index_head_dim": f.int("index_head_dim")})
    if model_type in ("qwen3_next", "qwen3_5_moe"):
        fields["linear_attention"] = _linear(f, layers)
        fields["attention_output_gate"] = f.bool("attn_output_gate", default=True)
    if cfg.get("use_qk_norm") is True and cfg.get("qk_norm_type") == "per_layer":
        fields["qk_norm_across_heads"] = True   # MiniMax-M2: one RMSNorm over all q (k) heads
    moe = _moe(f, model_type, layers)
    if moe is not None:
        fields["moe"] = moe
    fields["checkpoint_weights"] = checkpoint_weights(cfg.get("quantization_config"))
    ident, name, repo = _identity(cfg, p)
    try:
        return ModelSpec(id=ident, name=name, hf_repo=repo,
                         source=f"Hugging Face config.json read from {p}", **fields)
    except ValidationError as exc:
        raise SpecFileError(f"{p}: {pydantic_message(exc)}") from None


def checkpoint_weights(qc: Any) -> str | None:
    """A config's quantization_config in --weights syntax, or None (unquantized/unknown).

    gpt-oss: quant_method 'mxfp4' quantizes the routed experts only (modules_to_not_convert
    lists self_attn, router, embed_tokens, lm_head) -> 'bf16,experts=fp4' (MXFP4: 32-element
    blocks sharing an E8M0 scale, OCP MX spec).
    DeepSeek-V3/R1: quant_method 'fp8', fmt e4m3, weight_block_size [128, 128] -> 'fp8-b128'
    (every linear layer; embeddings and norms stay bf16, which is weight_bpe's default).
    Kimi-K2.5: quant_method 'compressed-tensors', one group of int weights (num_bits 4,
    group_size 32) that ignores self_attn and shared_experts -> 'bf16,experts=int4-g32'."""
    if not isinstance(qc, dict):
        return None
    method = str(qc.get("quant_method", "")).lower()
    if method == "mxfp4":
        return "bf16,experts=fp4"
    if method == "compressed-tensors":
        return _experts_only_int(qc)
    if method == "fp8":
        block = qc.get("weight_block_size")
        if isinstance(block, list) and len(block) == 2 and block[0] == block[1] \
                and isinstance(block[0], int) and block[0] > 0:
            return f"fp8-b{block[0]}"
        return "fp8"
    return None


def _experts_only_int(qc: dict) -> str | None:
    """'bf16,experts=int<b>-g<n>' for a compressed-tensors config of one weight-only integer
    group whose ignore list keeps attention and shared experts unquantized; else None."""
    groups = qc.get("config_groups")
    if not isinstance(groups, dict) or len(groups) != 1:
        return None
    g = next(iter(groups.values()))
    w = g.get("weights") if isinstance(g, dict) else None
    ignore = " ".join(str(x) for x in qc.get("ignore") or [])
    if not isinstance(w, dict) or w.get("type") != "int" or g.get("input_activations"):
        return None
    bits, size = w.get("num_bits"), w.get("group_size")
    if bits not in (4, 8) or not isinstance(size, int) or size <= 0:
        return None
    if "self_attn" not in ignore or "shared_experts" not in ignore:
        return None
    return f"bf16,experts=int{bits}-g{size}"


class _Fields:
    """Typed access to config values; a wrong type names the field and the file."""

    def __init__(self, cfg: dict, path: Path):
        self.cfg, self.path = cfg, path

    def int(self, key: str, default: int | None = None) -> int:
        v = self.cfg.get(key)
        if v is None:
            if default is None:
                raise SpecFileError(f"{self.path}: {key} is missing")
            return default
        if isinstance(v, float) and math.isfinite(v) and v == int(v):
            v = int(v)
        if isinstance(v, bool) or not isinstance(v, int):
            raise SpecFileError(f"{self.path}: {key} must be an integer, got {v!r}")
        return int(v)

    def bool(self, key: str, default: bool) -> bool:
        v = self.cfg.get(key)
        if v is None:
            return default
        if not isinstance(v, bool):
            raise SpecFileError(f"{self.path}: {key} must be true or false, got {v!r}")
        return v

    def int_list(self, key: str) -> list[int]:
        v = self.cfg.get(key)
        if v is None:
            return []
        if not isinstance(v, list) or any(isinstance(x, bool) or not isinstance(x, int) for x in v):
            raise SpecFileError(f"{self.path}: {key} must be a list of layer indices, got {v!r}")
        return v

    def str_list(self, key: str) -> list[str] | None:
        v = self.cfg.get(key)
        if v is None:
            return None
        if not isinstance(v, list) or any(not isinstance(x, str) for x in v):
            raise SpecFileError(f"{self.path}: {key} must be a list of strings, got {v!r}")
        return v


def _flatten_text_config(cfg: dict) -> dict:
    """Multimodal wrappers keep the language model under `text_config` (its model_type, or
    the wrapper's when the text one is unknown, e.g. 'qwen3_5_moe_text' under 'qwen3_5_moe')."""
    text = cfg.get("text_config")
    if not isinstance(text, dict):
        return cfg
    outer, inner = cfg.get("model_type"), text.get("model_type")
    if _known(inner) and not _known(outer):
        return {**text, "_name_or_path": cfg.get("_name_or_path")}
    if _known(outer) and "num_hidden_layers" not in cfg:
        return {**text, "model_type": outer, "_name_or_path": cfg.get("_name_or_path")}
    return cfg


def _known(model_type: Any) -> bool:
    return isinstance(model_type, str) and model_type in FAMILIES


def _sliding(f: _Fields, model_type: str, layers: int, max_context: int) -> dict[str, Any]:
    """sliding_window and how many layers use it, per the family's layer pattern."""
    window = f.int("sliding_window", default=0)
    types = f.str_list("layer_types")
    if types is not None:
        if len(types) != layers:
            raise SpecFileError(f"{f.path}: layer_types has {len(types)} entries for "
                                f"num_hidden_layers={layers}")
        n = sum(t == "sliding_attention" for t in types)
    elif model_type in ("mistral", "mixtral", "phi3"):
        n = layers  # every layer uses the window when one is set
    elif model_type.startswith("qwen"):
        use = f.bool("use_sliding_window", default=False)
        n = max(0, layers - f.int("max_window_layers", default=layers)) if use else 0
    elif model_type == "gemma3_text":   # every sliding_window_pattern-th layer is global
        n = layers - layers // max(1, f.int("sliding_window_pattern", default=6))
    elif model_type == "gemma2":
        window = window or 4096  # Gemma2Config default
        n = (layers + 1) // 2  # even layers slide, odd layers are global
    else:
        n = 0
    if window <= 0 or window >= max_context or n == 0:
        return {"sliding_window": None, "sliding_window_layers": 0}
    return {"sliding_window": window, "sliding_window_layers": n}


def _built(f: _Fields, cls, name: str, **values):
    try:
        return cls(**values)
    except ValidationError as exc:
        raise SpecFileError(f"{f.path}: {name}.{pydantic_message(exc)}") from None


def _linear(f: _Fields, layers: int) -> LinearAttentionSpec:
    """Gated DeltaNet layers: layer_types' linear_attention entries, else all but every
    full_attention_interval-th layer (Qwen3NextConfig default 4)."""
    types = f.str_list("layer_types")
    if types is not None:
        n = sum(t == "linear_attention" for t in types)
    else:
        n = layers - layers // max(1, f.int("full_attention_interval", default=4))
    return _built(f, LinearAttentionSpec, "linear_attention", num_layers=n,
                  num_key_heads=f.int("linear_num_key_heads"),
                  num_value_heads=f.int("linear_num_value_heads"),
                  key_head_dim=f.int("linear_key_head_dim"),
                  value_head_dim=f.int("linear_value_head_dim"),
                  conv_kernel=f.int("linear_conv_kernel_dim", default=4))


def _mla(f: _Fields) -> MLASpec:
    q_rank = f.int("q_lora_rank", default=0)
    try:
        return MLASpec(kv_lora_rank=f.int("kv_lora_rank"), q_lora_rank=q_rank or None,
                       qk_nope_head_dim=f.int("qk_nope_head_dim"),
                       qk_rope_head_dim=f.int("qk_rope_head_dim"), v_head_dim=f.int("v_head_dim"))
    except ValidationError as exc:
        raise SpecFileError(f"{f.path}: mla.{pydantic_message(exc)}") from None


def _moe(f: _Fields, model_type: str, layers: int) -> MoESpec | None:
    """Routed and shared experts, and how many layers keep a dense MLP."""
    shared, shared_dim, gate = 0, None, False
    if model_type == "mixtral":
        e, k, fe, moe_layers = (f.int("num_local_experts"), f.int("num_experts_per_tok"),
                                f.int("intermediate_size"), layers)
    elif model_type == "gpt_oss":
        k = f.int("num_experts_per_tok", default=f.int("experts_per_token", default=4))
        e, fe, moe_layers = f.int("num_local_experts"), f.int("intermediate_size"), layers
    elif model_type == "minimax_m2":   # every layer MoE; intermediate_size is one expert's
        e, k, fe, moe_layers = (f.int("num_local_experts"), f.int("num_experts_per_tok"),
                                f.int("intermediate_size"), layers)
    elif model_type in ("qwen2_moe", "qwen3_moe", "qwen3_next", "qwen3_5_moe"):
        e, k, fe = f.int("num_experts"), f.int("num_experts_per_tok"), f.int("moe_intermediate_size")
        step = max(1, f.int("decoder_sparse_step", default=1))
        dense = {i for i in f.int_list("mlp_only_layers") if 0 <= i < layers and (i + 1) % step == 0}
        moe_layers = max(0, layers) // step - len(dense)  # layers i with (i+1) % step == 0
        shared_dim = f.int("shared_expert_intermediate_size", default=0) or None
        shared = 1 if shared_dim else 0
        gate = bool(shared)   # HF Qwen2MoeSparseMoeBlock and successors: shared_expert_gate
    elif model_type in _DEEPSEEK_MOE:
        e, k, fe = f.int("n_routed_experts"), f.int("num_experts_per_tok"), f.int("moe_intermediate_size")
        first = f.int("first_k_dense_replace", default=0)
        freq = max(1, f.int("moe_layer_freq", default=1))
        first = max(0, first)  # layers i >= first with i % freq == 0
        moe_layers = max(0, (layers - 1) // freq - (first - 1) // freq) if first < layers else 0
        shared = f.int("n_shared_experts", default=0)
        shared_dim = fe if shared else None
    else:
        return None
    if moe_layers == 0:
        return None
    try:
        return MoESpec(num_experts=e, experts_per_token=k, expert_ffn_dim=fe,
                       num_shared_experts=shared, shared_expert_ffn_dim=shared_dim,
                       shared_expert_gate=gate, router_fp32=model_type in FP32_ROUTER_TYPES,
                       num_dense_layers=layers - moe_layers)
    except ValidationError as exc:
        raise SpecFileError(f"{f.path}: moe.{pydantic_message(exc)}") from None


def _identity(cfg: dict, p: Path) -> tuple[str, str, str | None]:
    """(id, display name, hf_repo) from the file's folder, an HF cache path, or _name_or_path."""
    name_or_path = cfg.get("_name_or_path")
    name_or_path = name_or_path.strip().rstrip("/") if isinstance(name_or_path, str) else ""
    repo = None
    parts = p.parts
    if len(parts) >= 4 and parts[-3] == "snapshots" and parts[-4].startswith("models--"):
        # ~/.cache/huggingface/hub/models--org--name/snapshots/<hash>/config.json
        repo = parts[-4][len("models--"):].replace("--", "/", 1)
        name = repo.split("/")[-1]
    elif p.stem != "config":
        name = p.stem
    else:
        name = p.parent.name
        if not name or _HASH.match(name):
            name = name_or_path.split("/")[-1] if name_or_path else ""
    name = name or "hf-model"
    if repo is None and _REPO.match(name_or_path) and \
            name_or_path.split("/")[-1].lower() == name.lower():
        repo = name_or_path
    return name.lower(), name, repo
