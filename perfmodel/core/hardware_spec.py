"""An accelerator's datasheet (HardwareSpec) and its links and price, in base units with
sources (hardware_db/*.yaml, one file per accelerator)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from perfmodel.core.spec_base import Dtype, Spec

Vendor = Literal["nvidia", "amd", "intel", "google", "apple"]
MemoryType = Literal["hbm2", "hbm2e", "hbm3", "hbm3e", "gddr6", "gddr6x", "gddr7",
                     "lpddr5", "lpddr5x", "unified"]


class LinkSpec(Spec):
    """A GPU-to-GPU link, per GPU, one direction."""

    name: str = Field(description="NVLink 4, PCIe 5.0 x16, Infinity Fabric, ICI, ...")
    bandwidth_bytes_per_s: float = Field(gt=0, description="Unidirectional bandwidth per GPU.")
    latency_s: float = Field(gt=0, description="One-hop latency of a small message.")
    simple_base_latency_s: float | None = Field(
        default=None, ge=0, description="Fixed latency of a bandwidth-bound all-reduce (NCCL's "
        "Simple protocol) on this link; with simple_step_latency_s per ring step, 2(p-1) "
        "steps. None: one protocol, the small-message hops at full bandwidth (allreduce_s).")
    simple_step_latency_s: float | None = Field(
        default=None, ge=0, description="Latency per ring step of the Simple protocol "
        "(see simple_base_latency_s).")
    nvls_latency_s: float = Field(
        default=0.0, ge=0, description="Fixed latency of an all-reduce reduced in the switch "
        "(nvls_allreduce_bytes_per_s).")
    nvls_allreduce_bytes_per_s: float | None = Field(
        default=None, gt=0, description="Algorithm bandwidth (message bytes / time) of a large "
        "all-reduce reduced inside the switch (NVLink SHARP: NCCL's NVLS algorithm, "
        "multimem kernels), measured over the domain's GPUs; None: the fabric has none "
        "or no measurement is recorded (core/parallel.py allreduce_s).")
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
