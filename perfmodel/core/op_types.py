"""The types of the one op list (core/ops.py): an op's work (OpCost: FLOPs and bytes, which add
and scale) and the op itself (Op: its kind, the matmul rows that set GEMM efficiency, where
its weights belong), and their sum."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import numpy as np

FloatArray = float | np.ndarray
"""A float, or a numpy array of floats broadcast over B, T and S given as arrays."""

OpKind = Literal["gemm", "attention", "elementwise", "embedding", "sampling", "comm"]

@dataclass(frozen=True)
class OpCost:
    """Work of one op: FLOPs and bytes moved through device memory. Adds and scales."""

    flops: FloatArray = 0.0
    weight_bytes: FloatArray = 0.0
    act_bytes: FloatArray = 0.0
    kv_read_bytes: FloatArray = 0.0
    kv_write_bytes: FloatArray = 0.0
    kernels: FloatArray = 0.0

    def __add__(self, other: "OpCost") -> "OpCost":
        return OpCost(*(getattr(self, f) + getattr(other, f) for f in _FIELDS))

    def __mul__(self, k) -> "OpCost":
        return OpCost(*(getattr(self, f) * k for f in _FIELDS))

    __rmul__ = __mul__

    @property
    def bytes(self):
        return self.weight_bytes + self.act_bytes + self.kv_read_bytes + self.kv_write_bytes


_FIELDS = ("flops", "weight_bytes", "act_bytes", "kv_read_bytes", "kv_write_bytes", "kernels")


@dataclass(frozen=True)
class Op:
    """One op of a step, summed over the layers it occurs in."""

    name: str
    kind: OpKind
    cost: OpCost
    rows: FloatArray = 1.0            # M: token rows of the matmul (sets GEMM efficiency)
    quantized: bool = False       # weights stored below 16 bits (weight-only kernels)
    weight_elements: FloatArray = 0.0  # elements read (for dequantization cost)
    per_layer: bool = True        # occurs in every layer (TP/PP shard it)
    window: int | None = field(default=None)
    group: str = ""               # weight group (core/params.py): selects a module's format
    quant_elements: FloatArray = 0.0  # M x K input elements a W8A8 kernel quantizes (core/act_quant.py)
    reduce_k: float = 0.0         # K: the layer's reduction length (gemm ops; 0: not a linear)
    k_split: float = 1.0          # ranks K is split over (row-parallel TP shards: core/parallel.py)


def total(op_list: list[Op]) -> OpCost:
    """Sum of all op costs."""
    acc = OpCost()
    for op in op_list:
        acc = acc + op.cost
    return acc
