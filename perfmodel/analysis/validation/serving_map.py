"""A measured serving point -> a configuration to predict (ServingTarget), or the reason it
cannot be expressed yet (ServingUnmapped).

General rules only (nothing here names a row, a model or a measured value):
- engine: the backend through names.engine_id (trtllm, vllm, sglang -> their presets);
- GPU: the system id with '_' -> '-' looked up exactly in hardware_db ('h100_sxm' -> h100-sxm);
  failing that, the id without its form-factor suffix when hardware_db has that card and no
  other variant of it ('b200_sxm' -> b200). New hardware_db cards map with no code change;
- model: the Hugging Face repo id; a checkpoint-format suffix (-FP8, -NVFP4, ...) is dropped,
  then the repo, and failing that its name part, go through names.model_id (exact catalog
  look-up after lower-casing and dropping fine-tune suffixes). New catalog models map by
  their hf_repo or id with no code change;
- weights: the MoE quant mode for MoE models (experts hold most of the bytes), the GEMM quant
  mode otherwise; with both empty the precision column, then the checkpoint suffix, else bf16.
  QUANT_MODES gives the formats; KV precision is not in the file: fp8 for fp8/fp4 weights,
  else bf16, unless the engine picks its own for the model and GPU (serving_kv.py), stated
  in each row's assumptions (data/serving/README.md);
- parallelism: tp, pp, and for MoE models ep = moe_ep_size; attention data parallelism is the
  stated attention_dp_size, or when unstated moe_tp x moe_ep / tp (the GPUs the experts span
  beyond the attention TP group). MoE columns of dense models are ignored;
  Two import encodings are read back to the run's layout (_parallel's docstring);
- load: concurrency = batch_size (x attention_dp where stated: batch per DP rank);
  prompt = isl; output = osl;
- recipe: how the row's harness ran the benchmark, from its source column (serving_recipe.py),
  stated in its assumptions.
Rows the model cannot express yet are unmapped with the reason: attention DP until the
predictor supports it (its Capabilities, read from its signature, so the rows map once it
does), and disaggregated rows unless the predictor has a disaggregated model (their rules:
serving_map_disagg.py).
"""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field

from perfmodel.core.errors import PerfModelError
from perfmodel.core.hardware import list_gpus, load_gpu
from perfmodel.core.hardware_spec import HardwareSpec
from perfmodel.core.specs import ModelSpec, Precision, parse_format
from perfmodel.analysis.validation.names import engine_id, model_id
from perfmodel.analysis.validation.serving_kv import engine_kv
from perfmodel.analysis.validation.serving_map_disagg import (ROLES, RoleView, concurrency,
                                                               expert_span, max_batch, workers)
from perfmodel.analysis.validation.serving_recipe import Recipe, inferencemax_twins, recipe_for
from perfmodel.analysis.validation.serving_table import ServingMeasurement

# quant mode cell -> (weights, activations): the formats parse_format reads
QUANT_MODES: dict[str, tuple[str, str]] = {
    "bf16": ("bf16", "bf16"),
    "fp16": ("fp16", "fp16"),
    "fp8": ("fp8", "fp8"),               # per-tensor scaled W8A8
    "fp8_block": ("fp8-b128", "fp8"),    # one fp32 scale per 128x128 weight block: 0.002 bits;
                                         # priced by the block-scaled GEMM curve (core/roofline.py)
    "nvfp4": ("fp4-g16", "fp4"),         # NVFP4: e2m1 with an fp8 scale per 16 values
    "int4_wo": ("int4-g128", "bf16"),    # weight-only int4; group not stated: 128 (GPTQ/AWQ)
}
MODE_NOTES = {
    "fp8_block": "fp8_block: weights fp8-b128 (one fp32 scale per 128x128 weights, 0.002 bits "
                 "per weight); GEMMs take the block-scaled fp8 curve",
    "int4_wo": "int4_wo: weight-only int4 with bf16 activations; group size not stated, 128 "
               "assumed",
}
# checkpoint-name suffix -> the quant mode it names
CHECKPOINT_SUFFIXES: dict[str, str] = {"fp8": "fp8", "nvfp4": "nvfp4", "fp4": "nvfp4"}
_SUFFIX = re.compile(r"[-_](" + "|".join(CHECKPOINT_SUFFIXES) + r")$", re.IGNORECASE)
_FORM_SUFFIX = re.compile(r"[-_](sxm\d?|pcie|nvl)$")


class Capabilities(BaseModel):
    """What the predictor can express beyond plain TP/PP/EP aggregated serving."""

    model_config = ConfigDict(frozen=True)
    attention_dp: bool = Field(default=False, description="Attention data parallelism.")
    disagg: bool = Field(default=False, description="Disaggregated prefill/decode pools.")


class ServingTarget(BaseModel):
    """A mapped serving row: everything the predictor needs."""

    model_config = ConfigDict(frozen=True)
    measurement: ServingMeasurement
    model: str
    gpu: str
    engine: str
    weights: str
    activations: str
    kv: str
    tp: int = Field(gt=0)
    pp: int = Field(gt=0)
    ep: int = Field(gt=0)
    attention_dp: int = Field(gt=0)
    moe: bool
    prompt: int = Field(gt=0)
    output: int = Field(gt=0)
    concurrency: int = Field(gt=0)
    assumptions: list[str] = Field(default_factory=list)
    prefill: dict[str, int] | None = Field(
        default=None, description="disagg: the prefill pool (workers, tp, pp, ep, dp)")
    decode: dict[str, int] | None = Field(
        default=None, description="disagg: the decode pool (workers, tp, pp, ep, dp)")
    recipe: Recipe = Field(default_factory=Recipe,
                           description="How the row's harness ran it (serving_recipe.py).")

    @property
    def num_gpus(self) -> int:
        if self.prefill and self.decode:
            return sum(p["workers"] * p["tp"] * p["pp"] * p["dp"] for p in (self.prefill, self.decode))
        return self.tp * self.pp * self.attention_dp

    def config(self) -> tuple:
        """Everything but the concurrency: rows sharing it are predicted together."""
        pools = tuple(tuple(sorted(p.items())) if p else None for p in (self.prefill, self.decode))
        return (self.model, self.gpu, self.engine, self.weights, self.activations, self.kv,
                self.tp, self.pp, self.ep, self.attention_dp, self.prompt, self.output) + pools \
            + self.recipe.key()


class ServingUnmapped(BaseModel):
    """A row that cannot be predicted yet, and why."""

    model_config = ConfigDict(frozen=True)
    measurement: ServingMeasurement
    reason: str


def _count(text: str) -> int | None:
    """A positive integer cell, or None for '', '0' and anything else."""
    t = text.strip()
    return int(t) if re.fullmatch(r"\d+", t) and int(t) > 0 else None


def gpu_for_system(system: str) -> tuple[str | None, str]:
    """(hardware_db id or None, reason) for a system id such as 'h100_sxm' or 'gb200'."""
    s = system.strip().lower()
    ids = {g.id for g in list_gpus()}
    exact = s.replace("_", "-")
    if exact in ids:
        return exact, ""
    base = _FORM_SUFFIX.sub("", s).replace("_", "-")
    variants = [i for i in ids if i.startswith(base + "-")]
    if base != exact and base in ids and not variants:
        return base, ""
    return None, f"GPU {system.strip()!r} is not in hardware_db (tried {exact!r}, {base!r})"


def model_for_repo(repo: str) -> tuple[ModelSpec | None, str | None, str]:
    """(catalog model or None, quant mode named by a checkpoint suffix, reason)."""
    text = repo.strip()
    m = _SUFFIX.search(text)
    mode = CHECKPOINT_SUFFIXES[m.group(1).lower()] if m else None
    text = _SUFFIX.sub("", text)
    for key in (text, text.rsplit("/", 1)[-1]):
        if not key:
            continue
        spec, _ = model_id(key)
        if spec is not None:
            return spec, mode, ""
    return None, mode, f"model {repo.strip()!r} is not in the catalog"


def _weights(r: ServingMeasurement, spec: ModelSpec, suffix_mode: str | None):
    """(weights, activations, notes) or a reason string. A MoE checkpoint that quantizes only
    its routed experts (catalog checkpoint_weights 'bf16,experts=...') keeps that layout when
    the row's expert format is the checkpoint's (_checkpoint_layout)."""
    moe = spec.is_moe
    gemm, expert = r.get("gemm_quant_mode").lower(), r.get("moe_quant_mode").lower()
    bulk, other = (expert, gemm) if moe else (gemm, expert)
    mode = bulk or other or r.get("precision").lower() or suffix_mode or "bf16"
    if mode not in QUANT_MODES:
        return f"quant mode {mode!r} has no format rule (known: {', '.join(QUANT_MODES)})"
    notes = [MODE_NOTES[mode]] if mode in MODE_NOTES else []
    if moe and gemm and expert and QUANT_MODES.get(gemm) != QUANT_MODES[mode]:
        notes.append(f"GEMM quant mode {gemm!r} differs from the experts' {expert!r}: "
                     "the experts' format is used for every matrix")
    w, a = QUANT_MODES[mode]
    layout = _checkpoint_layout(spec, w)
    if layout is not None:
        notes = [f"{spec.id}'s checkpoint quantizes only its routed experts: weights "
                 f"{layout} (catalog checkpoint_weights)"]
        w = layout
    return w, a, notes


def _checkpoint_layout(spec: ModelSpec, weights: str) -> str | None:
    """The published checkpoint's module formats when they name the routed experts' format
    and the row's weights are of that format's kind (int4 rows of Kimi-K2.5, whose
    compressed-tensors config quantizes the routed experts to int4 in groups of 32 and
    ignores self_attn, shared_experts, the dense MLP and lm_head); else None."""
    layout = spec.checkpoint_weights
    if not spec.is_moe or not layout or "experts=" not in layout:
        return None
    experts = Precision.of(layout).for_group("experts").weights
    return layout if experts.name == parse_format(weights).name else None


def _parallel(r: ServingMeasurement, moe: bool, caps: Capabilities, server_gpus: int = 8):
    """(tp, pp, ep, attention_dp, concurrency factor, notes) or a reason string.

    Two encodings of AIConfigurator's import of InferenceX runs (an InferenceX aggregated run
    is one server and its `tp` is the server's GPU count) are read back to the layout that
    was run; both are recognised from the columns' arithmetic, never from a row:
    - the GPU count squared: moe_tp = moe_ep = N and tp x attention_dp = N*N more GPUs than
      one server holds (server_gpus): the run was N GPUs, experts spread over all N
      (EP N), attention data-parallel over N when attention_dp > 1, else TP N;
    - vLLM data-parallel attention written as tp = the GPUs, attention_dp = d and
      moe_ep = tp x d: the run was tp GPUs in d attention groups with EP over the tp GPUs.
    With attention_dp stated > 1, batch_size is per attention-DP rank (AIC's convention),
    so the concurrency is batch_size x attention_dp as written: the evidence is the file's
    own twin rows: the same run, listed once with dp and once without, has identical TTFT
    and TPOT at batch_size x attention_dp (e.g. MiniMax-M2.5 fp8 on B200, 'tp2 ep2' at
    c128 appears as tp2/dp2/ep4 at batch 64 and as tp2/ep2 at batch 128)."""
    tp, pp = _count(r.get("tp_size")) or 1, _count(r.get("pp_size")) or 1
    if not moe:
        dp = _count(r.get("attention_dp_size")) or 1
        if dp > 1:
            return f"attention data parallelism (attention_dp {dp}) of a dense model is not modelled"
        return tp, pp, 1, 1, 1, []
    ep = _count(r.get("moe_ep_size")) or 1
    moe_tp = _count(r.get("moe_tp_size")) or 1
    dp = _count(r.get("attention_dp_size"))
    notes: list[str] = []
    factor = dp if dp and dp > 1 else 1
    n = moe_tp
    if moe_tp == ep > 1 and tp * (dp or 1) == n * n and n * n * pp > server_gpus:
        notes.append(f"layout read as {n} GPUs with EP {n}: tp {tp} x attention_dp {dp or 1} "
                     f"= moe_tp {moe_tp} x moe_ep {ep} = {n}^2 exceeds the {server_gpus}-GPU "
                     "server of an aggregated run (the GPU count written squared)")
        tp, ep, dp = (1, n, n) if dp and dp > 1 else (n, n, 1)
    elif dp and dp > 1 and moe_tp == 1 and ep == tp * dp and tp % dp == 0:
        notes.append(f"layout read as {tp} GPUs in {dp} attention-DP groups with EP {tp} "
                     f"(moe_ep {ep} = tp {tp} x attention_dp {dp}: vLLM's data-parallel "
                     "attention as imported)")
        tp, ep = tp // dp, tp
    elif dp is None:
        span = moe_tp * ep
        dp = span // tp if span > tp and span % tp == 0 else 1
        if dp > 1:
            notes.append(f"attention DP {dp} implied by moe_tp {moe_tp} x moe_ep {ep} over tp {tp}")
    if factor > 1:
        notes.append(f"concurrency = batch_size x attention_dp {factor} (batch per DP rank)")
    if dp > 1 and not caps.attention_dp:
        return f"attention data parallelism (attention_dp {dp}) is not modelled yet"
    return tp, pp, ep, dp, factor, notes


class Lookups:
    """Name look-ups memoized for one pass over a table (the same few names repeat)."""

    def __init__(self) -> None:
        self._gpu: dict[str, tuple[str | None, str]] = {}
        self._model: dict[str, tuple[ModelSpec | None, str | None, str]] = {}
        self._hw: dict[str, HardwareSpec] = {}

    def gpu(self, system: str) -> tuple[str | None, str]:
        if system not in self._gpu:
            self._gpu[system] = gpu_for_system(system)
        return self._gpu[system]

    def hardware(self, gpu: str) -> HardwareSpec:
        """The hardware_db card of a mapped GPU id."""
        if gpu not in self._hw:
            self._hw[gpu] = load_gpu(gpu)
        return self._hw[gpu]

    def server_gpus(self, gpu: str) -> int:
        """GPUs in one server of this card (hardware_db gpus_per_node; 8, an HGX board)."""
        return self.hardware(gpu).gpus_per_node or 8

    def model(self, repo: str) -> tuple[ModelSpec | None, str | None, str]:
        if repo not in self._model:
            self._model[repo] = model_for_repo(repo)
        return self._model[repo]


def map_serving_row(r: ServingMeasurement, caps: Capabilities = Capabilities(),
                    lookups: Lookups | None = None, inferencemax_twin: bool = False):
    """One row -> ServingTarget or ServingUnmapped(reason). `inferencemax_twin`: the row
    repeats an InferenceMAX measurement (serving_recipe.inferencemax_twins)."""
    look = lookups or Lookups()

    def no(reason: str) -> ServingUnmapped:
        return ServingUnmapped(measurement=r, reason=reason)

    if r.ttft_s is None or r.tpot_s is None:
        return no("measured TTFT or TPOT is not a positive number")
    mode = r.get("mode").lower()
    if mode == "disagg" and not caps.disagg:
        return no("disaggregated prefill/decode workers are not modelled by this predictor")
    if mode not in ("agg", "disagg"):
        return no(f"mode {r.get('mode')!r} is not agg or disagg")
    engine, why, eng_notes = engine_id(r.get("backend"))
    if engine is None:
        return no(why)
    gpu, why = look.gpu(r.get("system"))
    if gpu is None:
        return no(why)
    spec, suffix_mode, why = look.model(r.get("model_path"))
    if spec is None:
        return no(why)
    w = _weights(r, spec, suffix_mode)
    if isinstance(w, str):
        return no(w)
    if mode == "disagg":
        par = _disagg(r, spec.is_moe)
        if isinstance(par, str):
            return no(par)
        pools, conc, d_notes = par
        dl = pools["decode"]
        par = (dl["tp"], dl["pp"], dl["ep"], dl["dp"], 1, d_notes)
    else:
        pools, par = {}, _parallel(r, spec.is_moe, caps, look.server_gpus(gpu))
        if isinstance(par, str):
            return no(par)
        conc = _count(r.get("batch_size"))
    prompt, output = (_count(r.get(k)) for k in ("isl", "osl"))
    if not (prompt and output and conc):
        return no("isl, osl and batch_size must be positive integers")
    weights, acts, w_notes = w
    bulk = Precision.of(weights).for_group("experts" if spec.is_moe else "mlp").weights
    low_bits = bulk.name in ("fp8", "fp4")
    kv = "fp8" if low_bits else "bf16"
    kv_note = (f"KV cache {kv} assumed ({'fp8/fp4' if low_bits else '16-bit'} weights; "
               "KV precision is not stated per row)")
    own = engine_kv(engine, spec, look.hardware(gpu))   # the engine's own default, if it has one
    if own is not None:
        kv, kv_note = own
    tp, pp, ep, dp, factor, p_notes = par
    conc *= factor
    recipe = recipe_for(r.get("source"), engine, prompt, concurrency=conc, gpu=gpu,
                        disagg=mode == "disagg", output=output, version=r.get("backend_version"),
                        tp=tp, inferencemax_twin=inferencemax_twin, dp=dp, model=spec.id,
                        weights=bulk.name)
    return ServingTarget(
        measurement=r, model=spec.id, gpu=gpu, engine=engine, weights=weights,
        activations=acts, kv=kv, tp=tp, pp=pp, ep=ep, attention_dp=dp, moe=spec.is_moe,
        prompt=prompt, output=output, concurrency=conc,
        assumptions=eng_notes + w_notes + [kv_note] + p_notes + list(recipe.notes),
        prefill=pools.get("prefill"), decode=pools.get("decode"), recipe=recipe)


def _disagg(r: ServingMeasurement, moe: bool):
    """({role: pool}, concurrency, notes) of a disaggregated row, or a reason string
    (rules: serving_map_disagg.py)."""
    pools, notes = {}, []
    for role in ROLES:
        # the squared-GPU-count encoding is one of aggregated runs (one server): not read here
        par = _parallel(RoleView(r, role), moe, Capabilities(attention_dp=True), 1 << 30)
        if isinstance(par, str):
            return f"{role}: {par}"
        tp, pp, ep, dp, _, p_notes = par   # the concurrency is the module rule's, not a factor
        ep, e_notes = expert_span(RoleView(r, role), tp, ep, dp) if moe else (ep, [])
        p_notes = p_notes + e_notes
        n, w_notes = workers(r, role)
        pools[role] = dict(workers=n, tp=tp, pp=pp, ep=ep, dp=dp)
        cap, b_notes = max_batch(r, role, dp)
        p_notes = p_notes + b_notes
        if cap is not None:
            pools[role]["max_batch"] = cap
        notes += [f"{role}: {x}" for x in p_notes] + w_notes
    conc = concurrency(r, pools["decode"]["workers"], pools["decode"]["dp"])
    if conc is None:
        return "disaggregated row without a concurrency (batch_size, decode_batch_size or id)"
    return pools, conc, notes


def map_serving_rows(rows: list[ServingMeasurement], caps: Capabilities = Capabilities()):
    """(targets, unmapped): every row ends up in one of them."""
    mapped: list[ServingTarget] = []
    unmapped: list[ServingUnmapped] = []
    look = Lookups()
    twins = inferencemax_twins(rows)
    for i, r in enumerate(rows):
        try:
            t = map_serving_row(r, caps, look, inferencemax_twin=i in twins)
        except PerfModelError as exc:   # a name rule reached a bad catalog or hardware entry
            t = ServingUnmapped(measurement=r, reason=str(exc))
        (mapped if isinstance(t, ServingTarget) else unmapped).append(t)
    return mapped, unmapped
