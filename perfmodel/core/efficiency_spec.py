"""Achievable fractions of the datasheet (Efficiency) and per-kind GEMM curves (GemmCurve):
the efficiency side of the specs, re-exported by core/specs.py."""

from __future__ import annotations

from pydantic import AliasChoices, Field

from perfmodel.core.spec_base import Spec


_OLD_EFFICIENCY_NAMES = {"mem_bw": "mem_bw_fraction", "link": "link_fraction"}


HOPPER_GROUPED_KERNEL_FRACTION = 0.465
"""Fraction of the dense gemm_max that the fused MoE GEMM reaches on Hopper, once its tile
padding and reduction depth are priced: fit to one H200 (core/grouped_gemm.py,
calibrate/MOE_PREFILL_NOTES.md). The default of Efficiency.grouped_kernel_fraction."""


GEMM_KIND_FALLBACK = {"fp8_block": "fp8"}
"""A GEMM kind without its own curve takes this kind's curve before the default one."""


class GemmCurve(Spec):
    """One kind of GEMM's compute efficiency e(M) = gemm_max * M / (M + gemm_half_m)."""

    gemm_max: float = Field(gt=0, le=1, description="Efficiency at large M (fraction of the "
                            "dtype's dense peak).")
    gemm_half_m: float = Field(gt=0, description="Token rows M at which efficiency is half of "
                               "gemm_max.")
    source: str = Field(default="", description="The measurement the curve was fitted to.")


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
    grouped_kernel_fraction: float = Field(
        default=HOPPER_GROUPED_KERNEL_FRACTION, gt=0, le=1,
        description="Fraction of gemm_max the fused MoE (grouped expert) GEMM reaches at full "
                    "tiles and deep K (core/grouped_gemm.py): a property of the GPU "
                    "generation's MoE kernels (core/efficiency.py).")
    attn_compute_fa2: float | None = Field(
        default=None, gt=0, le=1,
        description="Compute efficiency of FlashAttention-2-class prefill kernels (warp-level "
                    "MMA) on a chip whose native attention kernels use other tensor-core "
                    "instructions (datacenter Blackwell: tcgen05), for engines that run them "
                    "(EngineProfile.prefill_attention 'fa2'); None: attn_compute.")
    linear_attn_chunk_max: float | None = Field(
        default=None, gt=0, le=1,
        description="Ceiling of the chunked Gated DeltaNet prompt kernels' efficiency on the "
                    "half-precision peak (flash-linear-attention's Triton chunk_gated_delta_rule, "
                    "core/ops_linear.py) where it differs from the H200 fit (datacenter "
                    "Blackwell: the same time as on the H200, core/efficiency.py); None: "
                    "ops_linear.GDN_CHUNK_EFF_MAX.")
    grouped_gemm_max: float | None = Field(
        default=None, gt=0, le=1,
        description="The gemm_max that grouped_kernel_fraction multiplies (core/grouped_gemm.py) "
                    "where the fraction was measured against a fixed dense rate rather than the "
                    "dtype's own GEMM curve (datacenter Blackwell: core/efficiency.py); None: "
                    "the GEMM curve's gemm_max.")
    gemm_by_dtype: dict[str, GemmCurve] = Field(
        default_factory=dict, description="GEMM curves per matmul kind that differ from "
        "gemm_max/gemm_half_m: a compute dtype (fp8, int8, ...) or fp8_block (fp8 with 1x128 "
        "activation and 128x128 weight scales); kinds not listed use gemm_max/gemm_half_m.")
    shard_depth_half_k: tuple[tuple[str, float], ...] = Field(
        default=(), description="(GEMM kind, K_half) pairs: a row-parallel tensor-parallel "
        "shard (o_proj, mlp_down) reduces over K/tp of its layer's K, and its time grows by "
        "(1 + K_half tp / K) / (1 + K_half / K) (core/grouped_gemm.py shard_depth_factor); "
        "kinds not listed (and every kind on chips without a measurement) keep their rate.")
    sustained_clock_fraction: float | None = Field(
        default=None, gt=0, le=1,
        description="SM-bound (compute) throughput under sustained load over that of a burst, "
                    "the rate at which the efficiencies above were measured: a power cap lowers "
                    "the SM clock once compute-bound work runs for more than ~0.1 s (memory "
                    "clock unchanged). 1.0 prices bursts (microbenchmarks); None: the chip's "
                    "measured value (core/efficiency.py sustained_clock_fraction).")
    source: str = Field(default="", description="Defaults' sources, or the calibration record.")

    def __hash__(self) -> int:
        return hash((type(self), tuple((k, v) for k, v in self.__dict__.items()
                                       if k != "gemm_by_dtype"),
                     tuple(sorted(self.gemm_by_dtype.items()))))

    def for_gemm(self, kind: str) -> Efficiency:
        """This efficiency with the GEMM curve of `kind` (gemm_by_dtype, else its
        GEMM_KIND_FALLBACK kind's) in gemm_max/gemm_half_m; itself when none is listed."""
        curve = self.gemm_by_dtype.get(kind) or self.gemm_by_dtype.get(GEMM_KIND_FALLBACK.get(kind, ""))
        if curve is None:
            return self
        return self.model_copy(update={"gemm_max": curve.gemm_max,
                                       "gemm_half_m": curve.gemm_half_m})

    def shard_half_k(self, kind: str) -> float:
        """K_half of `kind`'s row-parallel TP shards (shard_depth_half_k); 0: none measured."""
        return dict(self.shard_depth_half_k).get(kind, 0.0)

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
