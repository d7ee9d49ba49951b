"""Ids -> resolved specs: the one place a model, GPU, precision, engine, profile and
parallel layout named by the user become a Scenario (perfmodel.core.predict.Scenario)."""

from __future__ import annotations

from pathlib import Path

from pydantic import ValidationError

from perfmodel.core.catalog import load_model
from perfmodel.core.efficiency import default_efficiency
from perfmodel.core.efficiency_amd import aiter_assumption
from perfmodel.core.engines import load_engine
from perfmodel.core.engines_servers import at_deployment
from perfmodel.core.errors import PerfModelError, pydantic_message
from perfmodel.core.hardware import load_gpu
from perfmodel.core.parallel import validate_deployment
from perfmodel.core.params import count_params
from perfmodel.core.precision import GROUP_MODULE
from perfmodel.core.predict import Scenario
from perfmodel.core.profile import Profile, apply_engine, load_profile
from perfmodel.core.specs import Deployment, HardwareSpec, ModelSpec, Precision
from perfmodel.core.topology import nodes_domain


NVIDIA_ONLY_ENGINES = ("trtllm", "trtllm-trt")
"""Engines built on NVIDIA's libraries only: TensorRT-LLM 'perform[s] inference efficiently on
NVIDIA GPUs' (NVIDIA/TensorRT-LLM README.md, TensorRT-LLM Overview, commit 02656e49), on CUDA
and TensorRT; a preset of theirs on another vendor's chip is warned about, not refused."""


def resolve(model: str | ModelSpec, gpu: str | HardwareSpec, *, weights: str = "bf16",
            kv: str | None = None, activations: str | None = None, engine: str = "vllm",
            tp: int = 1, pp: int = 1, ep: int = 1, dp: int = 1, attention: str | None = None,
            profile: str | Path | Profile | None = None, hardware_dir: str | None = None,
            nodes: int | None = None) -> tuple[Scenario, list[str], list[str]]:
    """Ids -> a Scenario, with the warnings and the defaults that were filled in. `nodes`:
    the servers the tp x dp x pp GPUs are laid over (core/topology.py), None: as many as
    they fill."""
    for name, v in (("weights", weights), ("kv", kv), ("activations", activations)):
        if not (isinstance(v, str) or (v is None and name != "weights")):
            raise PerfModelError(f"{name} must be a precision name such as 'fp8', "
                                 f"got {type(v).__name__}")
    m = model if isinstance(model, ModelSpec) else load_model(model)
    hw = gpu if isinstance(gpu, HardwareSpec) else load_gpu(gpu, hardware_dir)
    picked = []
    if weights == "checkpoint":   # the published checkpoint's formats (its quantization_config)
        weights = m.checkpoint_weights or "bf16"
        picked.append(f"weights {weights}: the checkpoint's formats"
                      + ("" if m.checkpoint_weights else " (unquantized: none recorded)"))
    try:
        prec = Precision.of(weights, kv, activations)
    except ValueError as exc:
        raise PerfModelError(str(exc)) from None
    absent = _absent_modules(m, prec)
    if absent:   # else the format would be ignored, the result that of the default format
        raise PerfModelError(f"weight precision {weights!r} sets a format for {', '.join(absent)}, "
                             f"a module {m.id} does not have (mlp: dense MLP and shared experts; "
                             "experts: routed experts)")
    eng = load_engine(engine)
    if attention is not None and attention not in ("naive", "flash", "paged"):
        raise PerfModelError(f"unknown attention kernel {attention!r}; use naive, flash or paged")
    prof = load_profile(profile) if isinstance(profile, (str, Path)) else profile
    warnings: list[str] = []
    assumptions: list[str] = picked
    if kv is None:
        assumptions.append("KV cache in bf16 (no --kv given)")
    if activations is None:
        assumptions.append(f"activations {prec.activations.name} (default for {prec.weights.name} weights)")
    if eng.id in NVIDIA_ONLY_ENGINES and hw.vendor != "nvidia":
        warnings.append(f"{eng.id}: TensorRT-LLM runs on NVIDIA GPUs only, not on {hw.name}: "
                        "the result prices its kernels on this chip's datasheet, a what-if")
    eff = default_efficiency(hw)
    if prof is None and (aiter := aiter_assumption(hw.id, eng.id)) is not None:
        assumptions.append(aiter)
    if prof is not None:
        eng = apply_engine(eng, prof)
        if prof.efficiency is not None and prof.gpu == hw.id:
            eff = prof.efficiency
        elif prof.efficiency is not None:
            warnings.append(f"profile was fitted on {prof.gpu}, not {hw.id}: datasheet "
                            "efficiencies used for this GPU (engine parameters still applied)")
        if prof.link_latency_s is not None and hw.intra_node_link is not None:
            if prof.gpu in (None, hw.id):
                link = hw.intra_node_link.model_copy(update={"latency_s": prof.link_latency_s})
                hw = hw.model_copy(update={"intra_node_link": link})
            else:
                warnings.append(f"profile's link latency was fitted on {prof.gpu}, not {hw.id}: "
                                "hardware_db latency used")
    try:
        dep = Deployment(tp=tp, pp=pp, ep=ep, dp=dp)
        if nodes is not None:
            dep = Deployment(tp=tp, pp=pp, ep=ep, dp=dp,
                             gpus_per_node=nodes_domain(hw, dep.num_gpus, nodes))
    except ValidationError as exc:
        raise PerfModelError(f"deployment {pydantic_message(exc)}") from None
    validate_deployment(m, dep)
    eng = at_deployment(eng, m, hw, dep.tp)   # limits an engine derives from model and card
    return Scenario(m, hw, prec, eng, eff, dep, attention), warnings, assumptions


def _absent_modules(m: ModelSpec, prec: Precision) -> list[str]:
    """Modules a per-module weight format names that hold no weights in this model (experts
    on a dense model; mlp on an MoE model without dense layers or shared experts)."""
    groups = count_params(m).by_group
    return [f.module for f in prec.modules
            if not any(groups.get(g, 0.0) > 0 for g, mod in GROUP_MODULE.items()
                       if mod == f.module)]
