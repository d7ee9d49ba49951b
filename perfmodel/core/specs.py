"""Typed, frozen inputs of the model: what is run (ModelSpec), on what (HardwareSpec),
in which number formats (Precision), by which software (EngineProfile, Efficiency),
how it is spread (Deployment). The traffic is part of the one Query (core/query.py).

All quantities are in base units (bytes, seconds, FLOP/s, bytes/s). See DESIGN.md.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, model_validator

from perfmodel.core.gguf import GGUF_BITS_PER_WEIGHT, GGUF_FLOAT_TYPES

Dtype = Literal["fp32", "tf32", "bf16", "fp16", "fp8", "int8", "fp4", "int4"]
"""Compute dtypes a chip may have a dense peak for."""

PRECISION_NAMES = ("fp32", "bf16", "fp16", "fp8", "int8", "int4", "fp4")


class Spec(BaseModel):
    """Base: frozen, strict, unknown keys are errors, and so are NaN and infinity (a YAML
    `.inf` bandwidth or kernel time would otherwise reach every result)."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)


# --------------------------------------------------------------------------- precision


class NumberFormat(Spec):
    """One tensor's storage format: bits per element plus block-scale overhead."""

    name: Literal["fp32", "bf16", "fp16", "fp8", "int8", "int4", "fp4"] = Field(
        description="Format family.")
    bits: float = Field(gt=0, le=32, description="Bits per stored element.")
    group_size: int | None = Field(
        default=None, gt=0,
        description="Elements sharing one scale (None: per-tensor/per-channel, negligible).")
    scale_bits: float = Field(default=0.0, ge=0, description="Bits per group scale (and zero point).")

    @property
    def bytes_per_element(self) -> float:
        """(bits + scale_bits / group_size) / 8 — a float, never an integer division."""
        scale = self.scale_bits / self.group_size if self.group_size else 0.0
        return (self.bits + scale) / 8.0

    @property
    def is_float(self) -> bool:
        return self.name in ("fp32", "bf16", "fp16", "fp8", "fp4")

    @property
    def label(self) -> str:
        if self.group_size and self.name in ("int4",):
            return f"{self.name}-g{self.group_size}"
        if self.group_size and self.name == "fp8":
            return f"fp8-b{round(self.group_size ** 0.5)}"
        if self.bits != _BITS[self.name]:   # a GGUF type: its average bits per weight
            return f"{self.name}@{self.bits:g}bpw"
        return self.name


_BITS = {"fp32": 32, "bf16": 16, "fp16": 16, "fp8": 8, "int8": 8, "int4": 4, "fp4": 4}
# Default block scaling: int4 as GPTQ/AWQ (group 128, fp16 scale + 4-bit zero point ~ 20 bits),
# fp4 as MXFP4 (OCP MX spec: 32 elements share an 8-bit E8M0 scale).
_DEFAULT_GROUP = {"int4": (128, 20.0), "fp4": (32, 8.0)}


def parse_gguf(text: str) -> NumberFormat | None:
    """A GGUF type name ('q4_k_m', 'Q8_0', 'f16') as a NumberFormat carrying its real bits per
    weight (scales included, so no separate group scale), or None if it is not one. Below 6
    bits the family is int4, else int8 (weight-only: matmuls run in 16 bits)."""
    s = str(text).strip().lower().replace("-", "_")
    if s in GGUF_FLOAT_TYPES:
        return parse_format(GGUF_FLOAT_TYPES[s])
    bpw = GGUF_BITS_PER_WEIGHT.get(s)
    if bpw is None:
        return None
    return NumberFormat(name="int4" if bpw < 6.0 else "int8", bits=bpw)


def parse_format(text: str) -> NumberFormat:
    """Parse 'bf16', 'fp8', 'int4', 'int4-g64', 'fp4-g16' or a GGUF type ('q4_k_m', 'q8_0',
    'f16') into a NumberFormat.

    Raises ValueError with the accepted names on anything else.
    """
    s = str(text).strip().lower()
    block = re.fullmatch(r"fp8-b(\d+)", s)
    if block and int(block.group(1)) > 0:
        # DeepSeek-V3-style block scaling: one fp32 scale per b x b weight block
        # (config.json quantization_config.weight_block_size [128, 128])
        return NumberFormat(name="fp8", bits=8, group_size=int(block.group(1)) ** 2, scale_bits=32.0)
    gguf = parse_gguf(s) if s not in PRECISION_NAMES else None
    if gguf is not None:
        return gguf
    m = re.fullmatch(r"(fp32|bf16|fp16|fp8|int8|int4|fp4)(?:-g(\d+))?", s)
    if not m:
        raise ValueError(
            f"unknown precision {text!r}; use one of {', '.join(PRECISION_NAMES)} "
            "(int4/fp4 take an optional group size, e.g. int4-g128) or a GGUF type "
            "(f16, q8_0, q6_k, q5_k_m, q4_k_m, q4_0, ...)")
    name, group = m.group(1), m.group(2)
    if group is not None and name not in ("int4", "fp4", "int8"):
        raise ValueError(f"precision {text!r}: a group size applies only to int4, int8 or fp4")
    default_group, scale_bits = _DEFAULT_GROUP.get(name, (None, 0.0))
    if group is not None:
        g = int(group)
        if g <= 0:
            raise ValueError(f"precision {text!r}: group size must be positive")
        return NumberFormat(name=name, bits=_BITS[name], group_size=g,
                            scale_bits=scale_bits or 16.0)
    return NumberFormat(name=name, bits=_BITS[name], group_size=default_group,
                        scale_bits=scale_bits)


WeightModule = Literal["attention", "mlp", "experts", "embedding"]
WEIGHT_MODULES: tuple[str, ...] = ("attention", "mlp", "experts", "embedding")
# weight groups of core/params.py -> the module whose format they take
_GROUP_MODULE = {"attention": "attention", "mlp": "mlp", "shared_experts": "mlp",
                 "experts": "experts", "embedding": "embedding", "lm_head": "embedding"}


def _default_activations(w: NumberFormat) -> str:
    """W8A8 for fp8 weights, W4A4 for fp4, 16-bit activations otherwise (weight-only)."""
    return {"fp8": "fp8", "fp4": "fp4", "fp32": "fp32", "fp16": "fp16"}.get(w.name, "bf16")


def parse_weights(text: str) -> tuple[str | None, dict[str, str]]:
    """'fp8' -> ('fp8', {}); 'bf16,experts=fp4' or 'attention=bf16+experts=fp4' ->
    (default or None, {module: format}). Modules: attention, mlp (dense MLP and shared
    experts), experts (routed), embedding (embedding and lm_head). ValueError otherwise."""
    if "=" not in str(text):
        return str(text), {}          # one format for every module (parse_format checks it)
    default, modules = None, {}
    for part in re.split(r"[,+]", str(text)):
        part = part.strip()
        if "=" not in part:
            if default is not None or not part:
                raise ValueError(f"weight precision {text!r}: give one default format and module=format "
                                 f"pairs for {', '.join(WEIGHT_MODULES)}")
            default = part
            continue
        key, fmt = (x.strip().lower() for x in part.split("=", 1))
        if key not in WEIGHT_MODULES:
            raise ValueError(f"weight precision {text!r}: unknown module {key!r}; use one of "
                             f"{', '.join(WEIGHT_MODULES)}")
        if key in modules:
            raise ValueError(f"weight precision {text!r}: module {key!r} given twice")
        modules[key] = fmt
    return default, modules


class ModuleFormat(Spec):
    """One module's weight format and the matmul-input format its kernels run with."""

    module: WeightModule = Field(description="attention, mlp, experts or embedding.")
    weights: NumberFormat = Field(description="Weight storage format of this module.")
    activations: NumberFormat = Field(description="Matmul-input format of this module's kernels.")


class Precision(Spec):
    """Number formats of weights, activations (matmul inputs) and the KV cache; modules may
    override the weight format (gpt-oss: MXFP4 experts, bf16 attention)."""

    weights: NumberFormat = Field(description="Weight storage format (every module not overridden).")
    activations: NumberFormat = Field(description="Activation / matmul-input format.")
    kv: NumberFormat = Field(description="KV-cache storage format.")
    modules: tuple[ModuleFormat, ...] = Field(
        default=(), description="Per-module weight formats overriding `weights`.")

    @classmethod
    def of(cls, weights: str = "bf16", kv: str | None = None,
           activations: str | None = None) -> "Precision":
        """Build from names. Defaults: KV in bf16; activations fp8 for fp8 weights (W8A8),
        fp4 for fp4 weights, otherwise bf16 (weight-only quantization). `weights` may name
        modules (parse_weights); an overridden module runs with the given activations when
        they are at least as wide as its weights, else with its weights' default."""
        default, modules = parse_weights(weights)
        w = parse_format(default or "bf16")
        act = parse_format(activations if activations is not None else _default_activations(w))
        mods = []
        for name, text in modules.items():
            mw = parse_format(text)
            ma = act if activations is not None and act.bits >= mw.bits else \
                parse_format(_default_activations(mw))
            mods.append(ModuleFormat(module=name, weights=mw, activations=ma))
        return cls(weights=w, activations=act, kv=parse_format(kv if kv is not None else "bf16"),
                   modules=tuple(mods))

    def module(self, name: str) -> ModuleFormat | None:
        """The override of one module, if any."""
        return next((x for x in self.modules if x.module == name), None)

    def for_group(self, group: str) -> "Precision":
        """The precision one weight group's kernels run in (core/params.py groups)."""
        mod = self.module(_GROUP_MODULE.get(group, ""))
        if mod is None:
            return self if not self.modules else self.model_copy(update={"modules": ()})
        return Precision(weights=mod.weights, activations=mod.activations, kv=self.kv)

    @property
    def label(self) -> str:
        mods = "".join(f",{x.module}={x.weights.label}" for x in self.modules)
        return f"W:{self.weights.label}{mods} A:{self.activations.label} KV:{self.kv.label}"


# --------------------------------------------------------------------------- model


class MoESpec(Spec):
    """Mixture-of-experts feed-forward."""

    num_experts: int = Field(gt=0, description="E: routed experts per MoE layer.")
    experts_per_token: int = Field(gt=0, description="k: routed experts each token uses.")
    expert_ffn_dim: int = Field(gt=0, description="Hidden size of one routed expert.")
    num_shared_experts: int = Field(default=0, ge=0, description="Experts every token uses.")
    shared_expert_ffn_dim: int | None = Field(
        default=None, gt=0, description="Hidden size of one shared expert (default: expert_ffn_dim).")
    num_dense_layers: int = Field(
        default=0, ge=0, description="Leading layers with a dense FFN of ffn_dim instead of MoE.")

    @model_validator(mode="after")
    def _check(self) -> "MoESpec":
        if self.experts_per_token > self.num_experts:
            raise ValueError(f"experts_per_token={self.experts_per_token} exceeds "
                             f"num_experts={self.num_experts}")
        return self


class MLASpec(Spec):
    """Multi-head latent attention (DeepSeek-V2/V3): a compressed KV latent is cached."""

    kv_lora_rank: int = Field(gt=0, description="Latent KV dimension cached per token per layer.")
    q_lora_rank: int | None = Field(default=None, gt=0, description="Query low-rank dim (None: full).")
    qk_nope_head_dim: int = Field(gt=0, description="Per-head non-rotary query/key dim.")
    qk_rope_head_dim: int = Field(gt=0, description="Decoupled rotary key dim, cached per token per layer.")
    v_head_dim: int = Field(gt=0, description="Per-head value dim.")


class LinearAttentionSpec(Spec):
    """Linear-attention layers with a constant-size recurrent state instead of a KV cache
    (Gated DeltaNet: Qwen3-Next, Qwen3.5; Yang et al. 2024, arXiv:2412.06464). HF config keys
    linear_num_key_heads, linear_num_value_heads, linear_key_head_dim, linear_value_head_dim,
    linear_conv_kernel_dim; the other layers are full attention."""

    num_layers: int = Field(gt=0, description="How many layers are linear attention.")
    num_key_heads: int = Field(gt=0, description="Query/key heads of the linear layers.")
    num_value_heads: int = Field(gt=0, description="Value heads; each keeps a key_dim x value_dim state.")
    key_head_dim: int = Field(gt=0, description="Per-head query/key dim.")
    value_head_dim: int = Field(gt=0, description="Per-head value dim.")
    conv_kernel: int = Field(default=4, gt=0, description="Causal depthwise conv width on q/k/v.")


class SparseAttentionSpec(Spec):
    """Top-k token selection by a lightweight indexer (DeepSeek Sparse Attention, DeepSeek-V3.2
    tech report; GLM-5): every query attends to at most index_topk cached tokens, while the
    indexer scores all of them with index_n_heads small heads and caches one index key per token."""

    index_topk: int = Field(gt=0, description="Tokens each query attends to (at most).")
    index_n_heads: int = Field(gt=0, description="Indexer heads.")
    index_head_dim: int = Field(gt=0, description="Indexer head dim (one cached key per token per layer).")


class ModelSpec(Spec):
    """A decoder-only transformer's architecture (Hugging Face config values)."""

    id: str = Field(min_length=1, description="Short stable id, e.g. 'llama-3.1-8b'.")
    name: str = Field(min_length=1, description="Display name.")
    hf_repo: str | None = Field(default=None, description="Hugging Face repo id.")
    family: str = Field(default="llama", description="Architecture family (llama, qwen2, mixtral, ...).")
    num_layers: int = Field(gt=0, description="L: transformer blocks.")
    d_model: int = Field(gt=0, description="D: hidden size.")
    num_heads: int = Field(gt=0, description="N: query heads.")
    num_kv_heads: int = Field(gt=0, description="K: key/value heads (N: MHA, 1: MQA, else GQA).")
    head_dim: int = Field(gt=0, description="H: per-head dim of q/k/v.")
    ffn_dim: int = Field(gt=0, description="F: dense MLP hidden size (also dense layers of an MoE).")
    vocab_size: int = Field(gt=0, description="V: vocabulary size.")
    tied_embeddings: bool = Field(default=False, description="lm_head shares the embedding matrix.")
    gated_mlp: bool = Field(default=True, description="SwiGLU/GeGLU (3 matrices) vs plain MLP (2).")
    qkv_bias: bool = Field(default=False, description="q/k/v projections have biases (Qwen2).")
    max_context: int = Field(gt=0, description="Longest supported context in tokens.")
    sliding_window: int | None = Field(default=None, gt=0, description="Window of sliding-window layers.")
    sliding_window_layers: int = Field(default=0, ge=0, description="How many layers use the window.")
    moe: MoESpec | None = Field(default=None, description="MoE FFN, if any.")
    mla: MLASpec | None = Field(default=None, description="Latent attention, if any.")
    checkpoint_weights: str | None = Field(
        default=None, description="Weight formats of the published checkpoint in --weights "
        "syntax (e.g. 'bf16,experts=fp4' for gpt-oss), from its quantization_config.")
    attention_output_gate: bool = Field(
        default=False, description="q_proj also emits a sigmoid gate on the attention output "
        "(Qwen3-Next/Qwen3.5 attn_output_gate): N*H more outputs.")
    linear_attention: LinearAttentionSpec | None = Field(
        default=None, description="Linear-attention (recurrent-state) layers, if any.")
    sparse_attention: SparseAttentionSpec | None = Field(
        default=None, description="Indexer-selected top-k attention (DSA), if any.")
    published_params: float | None = Field(default=None, gt=0, description="Published total parameters.")
    published_active_params: float | None = Field(
        default=None, gt=0, description="Published active parameters per token (MoE).")
    source: str = Field(default="", description="Where the config values come from.")

    @model_validator(mode="after")
    def _check(self) -> "ModelSpec":
        if self.mla is None and self.num_heads % self.num_kv_heads:
            raise ValueError(f"num_heads={self.num_heads} is not divisible by "
                             f"num_kv_heads={self.num_kv_heads}")
        if self.sliding_window_layers > self.num_layers:
            raise ValueError(f"sliding_window_layers={self.sliding_window_layers} exceeds "
                             f"num_layers={self.num_layers}")
        if self.sliding_window_layers and self.sliding_window is None:
            raise ValueError("sliding_window_layers > 0 needs sliding_window")
        if self.moe and self.moe.num_dense_layers > self.num_layers:
            raise ValueError("moe.num_dense_layers exceeds num_layers")
        if self.checkpoint_weights is not None:
            Precision.of(self.checkpoint_weights)   # ValueError names what is wrong
        if self.num_full_attention_layers < 0:
            raise ValueError(f"linear_attention.num_layers + sliding_window_layers exceed "
                             f"num_layers={self.num_layers}")
        return self

    @property
    def num_linear_attention_layers(self) -> int:
        return 0 if self.linear_attention is None else self.linear_attention.num_layers

    @property
    def num_full_attention_layers(self) -> int:
        """Layers with a KV cache of every token (not windowed, not linear)."""
        return self.num_layers - self.sliding_window_layers - self.num_linear_attention_layers

    @property
    def attention_kind(self) -> Literal["mha", "gqa", "mqa", "mla"]:
        if self.mla is not None:
            return "mla"
        if self.num_kv_heads == self.num_heads:
            return "mha"
        return "mqa" if self.num_kv_heads == 1 else "gqa"

    @property
    def is_moe(self) -> bool:
        return self.moe is not None

    @property
    def num_moe_layers(self) -> int:
        return 0 if self.moe is None else self.num_layers - self.moe.num_dense_layers

    @property
    def num_dense_ffn_layers(self) -> int:
        return self.num_layers - self.num_moe_layers


# --------------------------------------------------------------------------- hardware

Vendor = Literal["nvidia", "amd", "intel", "google", "apple"]
MemoryType = Literal["hbm2", "hbm2e", "hbm3", "hbm3e", "gddr6", "gddr6x", "gddr7",
                     "lpddr5", "lpddr5x", "unified"]


class LinkSpec(Spec):
    """A GPU-to-GPU link, per GPU, one direction."""

    name: str = Field(description="NVLink 4, PCIe 5.0 x16, Infinity Fabric, ICI, ...")
    bandwidth_bytes_per_s: float = Field(gt=0, description="Unidirectional bandwidth per GPU.")
    latency_s: float = Field(gt=0, description="One-hop latency of a small message.")
    source: str = Field(default="", description="Where the figures come from.")


class PriceSpec(Spec):
    """On-demand cloud price of one accelerator-hour."""

    usd_per_hour: float = Field(gt=0, description="USD per accelerator-hour, on demand.")
    date: str = Field(description="When the price was read (YYYY-MM).")
    source: str = Field(description="Where the price was read.")


class HardwareSpec(Spec):
    """One accelerator's datasheet: dense peaks only, base units, with sources."""

    id: str = Field(pattern=r"^[a-z0-9][a-z0-9.\-]*$", description="Lowercase stable id.")
    name: str = Field(description="Display name.")
    vendor: Vendor = Field(description="Vendor (selects default efficiencies).")
    memory_type: MemoryType = Field(description="Memory technology (selects default efficiencies).")
    memory_bytes: float = Field(gt=0, description="Device memory capacity in bytes.")
    memory_bandwidth_bytes_per_s: float = Field(gt=0, description="Peak memory bandwidth.")
    peak_flops_per_s: dict[Dtype, float] = Field(
        description="Dense (not sparse) peak per compute dtype the chip supports.")
    l2_bytes: float | None = Field(default=None, gt=0, description="Last-level on-chip cache.")
    sm_count: int | None = Field(default=None, gt=0, description="SMs / CUs / cores.")
    tdp_w: float | None = Field(default=None, gt=0, description="Board power in watts.")
    intra_node_link: LinkSpec | None = Field(default=None, description="Scale-up link.")
    inter_node_link: LinkSpec | None = Field(default=None, description="Scale-out link.")
    gpus_per_node: int | None = Field(
        default=None, gt=0, description="Accelerators in one server (8 on an HGX board); "
        "None: not stated.")
    scale_up_gpus: int | None = Field(
        default=None, gt=0, description="Accelerators sharing one scale-up domain over "
        "intra_node_link (8 on HGX, 72 on GB200 NVL72); None: gpus_per_node.")
    price: PriceSpec | None = Field(default=None, description="On-demand price.")
    year: int | None = Field(default=None, description="Launch year.")
    sources: dict[str, str] = Field(default_factory=dict, description="Field -> source.")
    notes: str = Field(default="", description="Caveats and explained disagreements.")

    @model_validator(mode="after")
    def _check(self) -> "HardwareSpec":
        if not self.peak_flops_per_s:
            raise ValueError(f"{self.id}: peak_flops_per_s needs at least one dtype")
        for k, v in self.peak_flops_per_s.items():
            if not v > 0:
                raise ValueError(f"{self.id}: peak_flops_per_s.{k} must be > 0")
        return self

    def has(self, dtype: str) -> bool:
        return dtype in self.peak_flops_per_s


# --------------------------------------------------------------------------- software


class SchedulerSpec(Spec):
    """An engine's request scheduler: how many sequences run at once, how many tokens one
    step may carry, and how prompts share steps with decodes. Sources in core/engines.py."""

    max_num_seqs: int | None = Field(
        default=None, gt=0, description="Most sequences running at once (None: KV memory decides).")
    max_num_batched_tokens: int | None = Field(
        default=None, gt=0, description="Token budget of one step: decode rows + prompt tokens "
        "(None: unlimited, a whole prompt per step).")
    chunked_prefill: bool = Field(
        default=False, description="A prompt longer than the token budget is split over steps.")
    mixed_prefill: bool = Field(
        default=False, description="Prompt chunks ride in the same step as running decodes "
        "(vLLM V1, TRT-LLM in-flight batching); False: separate prefill steps (SGLang default).")
    prefill_first: bool = Field(
        default=False, description="Waiting prompts are prefilled before the running decodes "
        "step again (SGLang); False: decodes first, prompts fill the rest of the budget (vLLM).")
    kv_reserve_output: bool = Field(
        default=False, description="A request is admitted only if the KV blocks of its whole "
        "prompt + output fit (TensorRT-LLM GUARANTEED_NO_EVICT); False: blocks on demand, "
        "preempting when they run out (vLLM, SGLang).")
    seqs_divided_by_pp: bool = Field(
        default=False, description="max_num_seqs is shared by the pipeline stages (trtllm-bench).")
    small_gpu_bytes: float | None = Field(
        default=None, gt=0, description="Below this device memory the small-GPU limits apply.")
    small_gpu_excludes: tuple[str, ...] = Field(
        default=(), description="Device-name substrings that count as small whatever their "
        "memory (vLLM's own rule for the A100, arg_utils.get_batch_defaults).")
    small_gpu_max_num_seqs: int | None = Field(default=None, gt=0)
    small_gpu_max_num_batched_tokens: int | None = Field(default=None, gt=0)
    source: str = Field(default="", description="Where the limits come from.")

    def limits(self, hw: "HardwareSpec", pp: int = 1) -> tuple[int | None, int | None]:
        """(max running sequences, token budget) on this GPU at this pipeline depth."""
        seqs, tokens = self.max_num_seqs, self.max_num_batched_tokens
        if self.small_gpu_bytes is not None:
            name = f"{hw.id} {hw.name}".lower()
            if hw.memory_bytes < self.small_gpu_bytes or any(s in name for s in self.small_gpu_excludes):
                seqs, tokens = self.small_gpu_max_num_seqs, self.small_gpu_max_num_batched_tokens
        if seqs is not None and self.seqs_divided_by_pp:
            seqs = max(1, seqs // pp)
        return seqs, tokens


class EngineProfile(Spec):
    """How an inference engine runs the model (documented presets in engines.py)."""

    id: str = Field(description="Engine id, e.g. 'vllm'.")
    name: str = Field(description="Display name.")
    kernels_per_layer: float = Field(gt=0, description="GPU kernels launched per transformer layer.")
    launch_s: float = Field(ge=0, description="CPU time to issue one kernel (0 inside a CUDA graph).")
    graph_launch_s: float = Field(ge=0, description="CPU time to replay one captured graph per step.")
    cpu_overhead_per_step_s: float = Field(
        ge=0, description="Scheduler/sampling/Python time per decode step not hidden behind the GPU.")
    per_request_overhead_s: float = Field(
        ge=0, description="Added to TTFT: tokenization, scheduling, first-step set-up.")
    attention: Literal["naive", "flash", "paged"] = Field(description="Attention kernel kind.")
    batching: Literal["static", "continuous"] = Field(description="Batching policy.")
    kv_memory_fraction: float = Field(
        gt=0, le=1, description="Share of device memory the engine lets weights+KV+activations use.")
    kv_fraction_of: Literal["total", "free"] = Field(
        default="total", description="kv_memory_fraction applies to all device memory (vLLM, "
        "SGLang) or to what is free after weights and activations (TensorRT-LLM).")
    kv_block_tokens: int = Field(ge=1, description="KV page size in tokens (1: contiguous per token).")
    kv_prealloc: Literal["none", "max_context", "request", "pool"] = Field(
        default="request", description="What KV memory a sequence holds: 'request' its own "
        "context; 'max_context' a static cache of kv_prealloc_tokens per sequence whatever the "
        "request; 'pool' one pool of kv_prealloc_tokens split among the running sequences "
        "(llama.cpp n_ctx over its slots). See memory.held_context.")
    kv_prealloc_tokens: int | None = Field(
        default=None, ge=1, description="Tokens reserved by 'max_context' (per sequence) or "
        "'pool' (in all), capped at the model's max context; None: the model's max context.")
    quant_kernel_efficiency: float = Field(
        gt=0, le=1, description="Bandwidth efficiency of low-bit weight kernels relative to 16-bit.")
    dequant_flops_per_weight: float = Field(
        ge=0, description="Extra FLOPs per weight element per token row for weight-only dequant.")
    dequant_overlap: bool = Field(
        default=True, description="Low-bit weights are dequantized inside the matmul, overlapped "
        "with it (Marlin/Machete-class kernels); False: dequantized first, multiplied after.")
    fused_elementwise: bool = Field(description="Norm/rotary/activation fused into neighbours.")
    elementwise_traffic: float | None = Field(
        default=None, gt=0,
        description="Bytes moved by norm/rotary/activation/residual kernels relative to one read "
                    "and one write per tensor (fp32 upcasts and unfused chains move more); "
                    "None: 0.5 if fused_elementwise else 1. Set by calibration.")
    supports_fp8: bool = Field(default=True, description="Engine has fp8 kernels.")
    speculative_impl: Literal["research", "serving"] = Field(
        default="serving", description="How speculative decoding runs on it: 'research' (the "
        "methods' reference code on Hugging Face models: default trees, tree construction, "
        "posterior evaluation and KV compaction as Python ops every step) or 'serving' "
        "(vLLM/SGLang/TRT-LLM: chains, fused sampling kernels). analysis/drafts.py.")
    moe_comm_overlap: float = Field(
        default=0.0, ge=0, le=1, description="Share of the EP dispatch/combine all-to-all hidden "
        "behind the expert GEMMs by running two micro-batches in turn (SGLang "
        "--enable-two-batch-overlap with DeepEP; LMSYS blog 'Deploying DeepSeek with PD "
        "disaggregation and large-scale EP', 2025). 0 in the presets: it is opt-in.")
    scheduler: SchedulerSpec = Field(
        default_factory=SchedulerSpec, description="Request scheduler limits and policy.")
    server_scheduler: SchedulerSpec | None = Field(
        default=None, description="The scheduler of the engine's online server where its defaults "
        "differ from `scheduler` (TensorRT-LLM: trtllm-serve vs the tuned trtllm-bench limits); "
        "the serving simulator (a benchmark against a server) uses it. None: `scheduler`.")
    source: str = Field(default="", description="Where the parameters come from.")


_OLD_EFFICIENCY_NAMES = {"mem_bw": "mem_bw_fraction", "link": "link_fraction"}


class Efficiency(Spec):
    """Achievable fractions of the datasheet, per vendor/memory type or calibrated."""

    mem_bw_fraction: float = Field(
        gt=0, le=1, validation_alias=AliasChoices("mem_bw_fraction", "mem_bw"),
        description="Achieved / peak memory bandwidth for streaming reads (YAML key mem_bw "
                    "accepted for one release).")
    gemm_max: float = Field(gt=0, le=1, description="GEMM efficiency at large M (fraction of peak).")
    gemm_half_m: float = Field(gt=0, description="Token rows M at which GEMM efficiency is half of gemm_max.")
    attn_compute: float = Field(gt=0, le=1, description="Attention-kernel compute efficiency (flash/paged).")
    attn_mem: float = Field(gt=0, le=1, description="Decode attention KV-read efficiency vs mem_bw.")
    kernel_s: float = Field(ge=0, description="GPU-side fixed time per kernel (launch latency, tail).")
    link_fraction: float = Field(
        gt=0, le=1, validation_alias=AliasChoices("link_fraction", "link"),
        description="Achieved / peak link bandwidth for collectives (YAML key link accepted "
                    "for one release).")
    source: str = Field(default="", description="Defaults' sources, or the calibration record.")

    def model_copy(self, *, update=None, deep: bool = False):
        """model_copy that also takes the old names mem_bw and link (for one release)."""
        if update:
            update = {_OLD_EFFICIENCY_NAMES.get(k, k): v for k, v in update.items()}
        return super().model_copy(update=update, deep=deep)

    @property
    def mem_bw(self) -> float:
        """Old name of mem_bw_fraction (kept for one release)."""
        return self.mem_bw_fraction

    @property
    def link(self) -> float:
        """Old name of link_fraction (kept for one release)."""
        return self.link_fraction

    def gemm(self, m: float) -> float:
        """e_gemm(M) = gemm_max * M / (M + gemm_half_m)."""
        return self.gemm_max * m / (m + self.gemm_half_m)


# --------------------------------------------------------------------------- deployment


class Deployment(Spec):
    """How many GPUs and how the model is split over them."""

    tp: int = Field(default=1, gt=0, description="Tensor-parallel degree.")
    pp: int = Field(default=1, gt=0, description="Pipeline-parallel degree.")
    ep: int = Field(default=1, gt=0, description="Expert-parallel degree, over the tp x dp GPUs "
                    "of a stage.")
    dp: int = Field(default=1, gt=0, description="Attention data-parallel degree (SGLang "
                    "--enable-dp-attention, TRT-LLM attention_dp): dp groups of tp GPUs each run "
                    "attention for 1/dp of the batch; routed experts span all tp x dp GPUs.")
    gpus_per_node: int | None = Field(
        default=None, gt=0, description="GPUs sharing the scale-up link (None: the hardware's "
        "scale_up_gpus, else its gpus_per_node, else 8).")

    @property
    def num_gpus(self) -> int:
        return self.tp * self.dp * self.pp
