"""Number formats: one tensor's bits and block scales (NumberFormat), their parsing from
names (fp8, fp8-b128, nvfp4, mxfp4, GGUF q4_k_m ...), per-module weight formats and the
Precision of a run (weights, activations, KV cache). Bytes per element are derived as floats:
(bits + scale_bits / group_size) / 8 (CONVENTIONS.md 2).
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field

from perfmodel.core.gguf import GGUF_BITS_PER_WEIGHT, GGUF_FLOAT_TYPES
from perfmodel.core.spec_base import Spec

PRECISION_NAMES = ("fp32", "bf16", "fp16", "fp8", "int8", "int4", "fp4")



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
GROUP_MODULE = {"attention": "attention", "mlp": "mlp", "shared_experts": "mlp",
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
        mod = self.module(GROUP_MODULE.get(group, ""))
        if mod is None:
            return self if not self.modules else self.model_copy(update={"modules": ()})
        return Precision(weights=mod.weights, activations=mod.activations, kv=self.kv)

    @property
    def label(self) -> str:
        mods = "".join(f",{x.module}={x.weights.label}" for x in self.modules)
        return f"W:{self.weights.label}{mods} A:{self.activations.label} KV:{self.kv.label}"
