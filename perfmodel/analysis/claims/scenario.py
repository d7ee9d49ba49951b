"""A claim scenario: one full configuration (model, GPU and count, precisions, engine,
batching, lengths, speculative settings, routing), stored as YAML or JSON so it can be shared.

Every field may be left out; `fill()` returns the scenario with each default written in,
plus one sentence per default it filled (nothing is silently assumed). The levers of
levers.py move these fields; metrics.py evaluates a filled scenario with the time model.

    name: vllm-int8
    model: llama-3.1-8b          # catalog id, HF repo, config.json path, or an inline ModelSpec
    gpu: rtx-4090
    tp: 1                        # layout as the Query takes it: tp, pp, ep, dp, nodes
    weights: int8                # kv, activations likewise
    engine: vllm
    batch: 1                     # or concurrency: 8 (requests in flight under the engine)
    prompt_tokens: 500
    output_tokens: 200
    speculative: {method: draft, draft_model: llama-3.2-1b, draft_tokens: 4, acceptance: 0.7}
    routing: {small_model: llama-3.2-1b, share: 0.8}
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Literal

import yaml
from pydantic import Field, ValidationError, model_validator

from perfmodel.core.catalog import list_models, load_model
from perfmodel.core.efficiency import default_efficiency
from perfmodel.core.engines import load_engine
from perfmodel.core.files import load_spec
from perfmodel.core.errors import PerfModelError, pydantic_message
from perfmodel.core.hardware import load_gpu
from perfmodel.core.params import count_params
from perfmodel.core.profile import load_profile
from perfmodel.core.query import Query, make_query
from perfmodel.core.specs import HardwareSpec, ModelSpec, Precision, Spec
from perfmodel.core.units import MILLION

MetricName = Literal["decode_tok_s_per_user", "tpot_s", "ttft_s", "e2e_s", "output_tok_s_total",
                     "usd_per_mtok"]

# name -> (unit, higher is better, definition)
METRICS: dict[str, tuple[str, bool, str]] = {
    "decode_tok_s_per_user": ("tok/s", True, "per-user decode rate, 1 / TPOT"),
    "tpot_s": ("s", False, "time per output token after the first, (E2E - TTFT) / (O - 1)"),
    "ttft_s": ("s", False, "request arrival to first token"),
    "e2e_s": ("s", False, "request arrival to last token"),
    "output_tok_s_total": ("tok/s", True,
                           "aggregate output tokens per second of all users over whole requests "
                           "(prefill included): B x O / E2E for a batch, C x O / mean E2E of the "
                           "simulated closed loop under a concurrency (Little's law)"),
    "usd_per_mtok": ("USD/Mtok", False,
                     "GPU price per hour x GPUs / (3600 x aggregate output tok/s) x 1e6"),
}

# Defaults (each one is listed in the result when it is used)
DEFAULT_WEIGHTS = "bf16"
DEFAULT_KV = "bf16"
DEFAULT_ENGINE = "vllm"
DEFAULT_PROMPT = 512           # api.predict_request's default request shape
DEFAULT_OUTPUT = 128
DEFAULT_ACCEPTANCE = 0.7       # per-token acceptance alpha: mid-range of 0.5-0.9 reported for
#                                draft models (Leviathan et al. 2023, Table 3; Chen et al. 2023)
MIN_MEM_BW_UTILIZATION = 0.01  # 1% of peak: below it a step time is not a memory roofline
MAX_USD_PER_GPU_HOUR = MILLION  # a price beyond it is a typo, and would overflow $/Mtok
VOCAB_TOLERANCE = 0.01         # vocabularies within 1%: the same tokenizer, padded


def metric_info(metric: str) -> tuple[str, bool, str]:
    """(unit, higher is better, definition); unknown names raise with the list."""
    if metric not in METRICS:
        raise PerfModelError(f"unknown metric {metric!r}; use one of {', '.join(METRICS)}")
    return METRICS[metric]


def direction_note(metric: str) -> str:
    unit, higher, definition = metric_info(metric)
    how = ("factor = improved / baseline" if higher
           else "lower is better: factor = baseline / improved")
    return f"{metric} ({definition}, {unit}); {how}, so a factor > 1 is an improvement"


def oriented(metric: str, improved: float, baseline: float) -> float:
    """Factor > 1 when `improved` is better than `baseline` on `metric`."""
    return improved / baseline if metric_info(metric)[1] else baseline / improved


def check_definitions(metric: str, *scenarios: Scenario) -> None:
    """Refuse a comparison whose scenarios state different metrics (e.g. TTFT vs throughput)."""
    metric_info(metric)
    stated = [(sc.label, sc.metric) for sc in scenarios if sc.metric is not None]
    if len({m for _, m in stated}) > 1:
        raise PerfModelError("the scenarios were measured on different metrics ("
                             + ", ".join(f"{k}: {v}" for k, v in stated)
                             + "): their ratio is not a speed-up")
    for label, m in stated:
        if m != metric:
            raise PerfModelError(f"scenario {label!r} states metric {m}, not {metric}: "
                                 "compare it on its own metric")


class Speculative(Spec):
    """Speculative decoding settings (perfmodel.analysis.speculative prices them)."""

    method: Literal["draft", "eagle", "eagle2", "eagle3", "medusa", "ngram", "mtp"] = Field(
        default="draft", description="Who proposes the tokens.")
    draft_model: str | ModelSpec | None = Field(
        default=None, description="Draft model for method 'draft' (default: the smallest "
        "catalog model with the target's tokenizer).")
    draft_tokens: int | None = Field(default=None, ge=1, le=64,
                                     description="gamma: draft tokens per target step.")
    acceptance: float | None = Field(default=None, ge=0.0, lt=1.0,
                                     description="alpha: per-token acceptance rate.")


class Routing(Spec):
    """A share of requests answered by a small model on the same GPUs (both resident)."""

    small_model: str | ModelSpec = Field(description="The model that takes the easy requests.")
    share: float = Field(ge=0.0, le=1.0, description="r: share of requests routed to it.")


class Scenario(Spec):
    """One configuration whose metrics a claim compares. See the module docstring."""

    name: str = Field(default="", description="Label shown in results.")
    model: str | ModelSpec = Field(description="Catalog id, HF repo, config path, or a ModelSpec.")
    gpu: str = Field(min_length=1, description="hardware_db id or a YAML path.")
    tp: int | None = Field(default=None, ge=1, description="Tensor-parallel GPUs.")
    pp: int | None = Field(default=None, ge=1, description="Pipeline stages.")
    ep: int | None = Field(default=None, ge=1, description="Expert-parallel degree, over the "
                           "tp x dp GPUs of a stage.")
    dp: int | None = Field(default=None, ge=1, description="Attention data-parallel groups of tp "
                           "GPUs each (SGLang --enable-dp-attention); batch and concurrency are "
                           "the whole deployment's.")
    nodes: int | None = Field(default=None, ge=1, description="Servers the tp x dp x pp GPUs "
                              "are laid over (default: as many as they fill).")
    weights: str | None = Field(default=None, description="Weight precision (bf16, fp8, int4, ...).")
    activations: str | None = Field(default=None, description="Matmul input precision.")
    kv: str | None = Field(default=None, description="KV-cache precision.")
    engine: str | None = Field(default=None, description="Engine preset id.")
    batching: Literal["static", "continuous"] | None = Field(
        default=None, description="Batching policy (default: the engine's).")
    paged_kv: bool | None = Field(default=None, description="Paged KV cache (default: the engine's).")
    kv_cache: bool | None = Field(
        default=None, description="False: every decode step recomputes the whole prefix.")
    batch: int | None = Field(default=None, ge=1, description="Sequences decoded together.")
    concurrency: int | None = Field(default=None, ge=1,
                                    description="Requests in flight under the engine's batching.")
    requests: int | None = Field(default=None, ge=1, description="Requests in the test run: "
                                 "the closed loop simulated at the concurrency (default 10 x "
                                 "concurrency; informational for a batch).")
    prompt_tokens: int | None = Field(default=None, ge=1, description="Input tokens per request.")
    output_tokens: int | None = Field(default=None, ge=1, description="Output tokens per request.")
    longest_prompt_tokens: int | None = Field(
        default=None, ge=1, description="Mixed load: the longest prompt (static batching pads to it).")
    longest_output_tokens: int | None = Field(
        default=None, ge=1, description="Mixed load: the longest output (a static batch runs "
        "until it ends).")
    speculative: Speculative | None = Field(default=None, description="Speculative decoding.")
    routing: Routing | None = Field(default=None, description="Route a share to a small model.")
    mem_bw_utilization: float | None = Field(
        default=None, ge=MIN_MEM_BW_UTILIZATION, le=1.0,
        description="Achieved / peak memory bandwidth (default: efficiency defaults for the GPU).")
    usd_per_gpu_hour: float | None = Field(default=None, gt=0.0, le=MAX_USD_PER_GPU_HOUR,
                                           allow_inf_nan=False,
                                           description="Price (default: hardware_db).")
    profile: str | None = Field(default=None, description="Calibrated profile YAML.")
    metric: MetricName | None = Field(default=None,
                                      description="The metric this scenario was measured on.")
    notes: str = Field(default="", description="Free text (sources, caveats).")

    @model_validator(mode="after")
    def _check(self) -> "Scenario":
        if self.batch is not None and self.concurrency is not None:
            raise ValueError("give batch (sequences decoded together) or concurrency "
                             "(requests in flight), not both")
        for mean, longest in (("prompt_tokens", "longest_prompt_tokens"),
                              ("output_tokens", "longest_output_tokens")):
            a, b = getattr(self, mean), getattr(self, longest)
            if a is not None and b is not None and b < a:
                raise ValueError(f"{longest}={b} is below {mean}={a}")
        if (self.longest_prompt_tokens or self.longest_output_tokens) and self.concurrency is None:
            raise ValueError("longest_prompt_tokens/longest_output_tokens describe a mixed load "
                             "under a concurrency; give concurrency")
        return self

    @property
    def label(self) -> str:
        return self.name or f"{model_id(self.model)} on {self.gpu}"

    @property
    def width(self) -> int:
        """B: sequences decoded together (the batch or the concurrency)."""
        return self.concurrency or self.batch or 1

    def query(self, **override) -> Query:
        """The filled scenario's ids and workload as the one Query (claims add batching,
        paged KV, KV cache, speculation, routing and bandwidth levers on top of it)."""
        fields = dict(model=model_spec(self.model), gpu=hardware(self.gpu), weights=self.weights,
                      kv=self.kv, activations=self.activations, engine=self.engine, tp=self.tp,
                      pp=self.pp, ep=self.ep, dp=self.dp, nodes=self.nodes, profile=self.profile,
                      batch=self.batch or 1,
                      concurrency=self.concurrency, prompt_tokens=self.prompt_tokens,
                      output_tokens=self.output_tokens,
                      longest_prompt_tokens=self.longest_prompt_tokens,
                      longest_output_tokens=self.longest_output_tokens)
        return make_query(**{**{k: v for k, v in fields.items() if v is not None}, **override})


def revise(sc: Scenario, **changes) -> Scenario:
    """A validated copy with some fields changed (nested settings may be dicts)."""
    data = {k: getattr(sc, k) for k in Scenario.model_fields}
    data.update(changes)
    try:
        return Scenario.model_validate(
            {k: (v.model_dump() if hasattr(v, "model_dump") else v) for k, v in data.items()})
    except ValidationError as exc:
        raise PerfModelError(f"{sc.label}: {pydantic_message(exc)}") from None


def model_id(m: str | ModelSpec) -> str:
    return m.id if isinstance(m, ModelSpec) else str(m)


def model_spec(m: str | ModelSpec) -> ModelSpec:
    return m if isinstance(m, ModelSpec) else load_model(m)


@lru_cache(maxsize=64)
def hardware(gpu: str) -> HardwareSpec:
    """load_gpu, cached for the many evaluations of one attribution or search."""
    return load_gpu(gpu)


@lru_cache(maxsize=64)
def _smallest_same_tokenizer(model_key: str, vocab: int, active: float) -> str | None:
    """The catalog model with the fewest active parameters that shares the tokenizer."""
    best: tuple[float, str] | None = None
    for m in list_models():
        if m.id == model_key or abs(m.vocab_size - vocab) / max(vocab, m.vocab_size) > VOCAB_TOLERANCE:
            continue
        a = count_params(m).active
        if a < active and (best is None or a < best[0]):
            best = (a, m.id)
    return None if best is None else best[1]


def small_model_for(m: ModelSpec) -> str | None:
    """Smallest catalog model with m's tokenizer (draft or routing target), or None."""
    return _smallest_same_tokenizer(m.id, m.vocab_size, count_params(m).active)


def fill(sc: Scenario) -> tuple[Scenario, list[str]]:
    """The scenario with every default written in, and one line per default filled.
    Raises PerfModelError on unknown ids or impossible combinations."""
    notes: list[str] = []
    up: dict = {}

    def put(field: str, value, why: str) -> None:
        if getattr(sc, field) is None:
            up[field] = value
            notes.append(f"{sc.label}: {field} = {value} ({why})")

    m = model_spec(sc.model)
    hw = hardware(sc.gpu)
    for f in ("tp", "pp", "ep", "dp"):
        put(f, 1, "default")
    put("weights", DEFAULT_WEIGHTS, "default")
    put("kv", DEFAULT_KV, "default")
    weights = up.get("weights", sc.weights)
    if sc.activations is None:
        try:   # the one default rule (Precision.of): W8A8 for fp8, W4A4 for fp4, else 16-bit
            act = Precision.of(str(weights)).activations.name
        except ValueError as exc:
            raise PerfModelError(f"{sc.label}: {exc}") from None
        put("activations", act, f"default for {weights} weights")
    eng = load_engine(up.get("engine", sc.engine) or DEFAULT_ENGINE)
    put("engine", eng.id, "default")
    put("batching", eng.batching, f"{eng.id}'s batching")
    put("paged_kv", eng.attention == "paged", f"{eng.id}'s KV layout")
    put("kv_cache", True, "every engine keeps a KV cache")
    if sc.batch is None and sc.concurrency is None:
        up["batch"] = 1
        notes.append(f"{sc.label}: batch = 1 (neither batch nor concurrency given)")
    put("prompt_tokens", DEFAULT_PROMPT, "default")
    put("output_tokens", DEFAULT_OUTPUT, "default")
    prof = load_profile(sc.profile) if sc.profile else None
    if prof is not None and prof.efficiency is not None and prof.gpu == hw.id:
        put("mem_bw_utilization", prof.efficiency.mem_bw_fraction, f"calibrated profile {sc.profile}")
    else:
        put("mem_bw_utilization", default_efficiency(hw).mem_bw_fraction,
            f"default efficiency for {hw.vendor} {hw.memory_type}")
    if hw.price is not None:
        put("usd_per_gpu_hour", hw.price.usd_per_hour, f"hardware_db, {hw.price.source}")
    if sc.speculative is not None:
        up["speculative"] = _fill_speculative(sc, m, notes)
    out = sc.model_copy(update=up)
    prompt = out.longest_prompt_tokens or out.prompt_tokens
    output = out.longest_output_tokens or out.output_tokens
    if prompt + output > m.max_context:
        raise PerfModelError(f"{sc.label}: prompt {prompt} + output {output} tokens exceed the "
                             f"{m.max_context}-token context of {m.id}")
    return out, notes


def _fill_speculative(sc: Scenario, m: ModelSpec, notes: list[str]) -> Speculative:
    from perfmodel.analysis.speculative import DEFAULT_GAMMA, FALLBACK_GAMMA

    s = sc.speculative
    up: dict = {}
    if s.draft_tokens is None:
        up["draft_tokens"] = DEFAULT_GAMMA.get(s.method, FALLBACK_GAMMA)
        notes.append(f"{sc.label}: speculative draft_tokens = {up['draft_tokens']} (default for "
                     f"{s.method})")
    if s.acceptance is None:
        up["acceptance"] = DEFAULT_ACCEPTANCE
        notes.append(f"{sc.label}: speculative acceptance = {DEFAULT_ACCEPTANCE} (mid-range of "
                     "published draft-model acceptance rates)")
    if s.method == "draft" and s.draft_model is None:
        pick = small_model_for(m)
        if pick is None:
            raise PerfModelError(f"{sc.label}: no catalog model shares {m.id}'s tokenizer; "
                                 "give speculative.draft_model")
        up["draft_model"] = pick
        notes.append(f"{sc.label}: speculative draft_model = {pick} (smallest catalog model "
                     "with the target's tokenizer)")
    return s.model_copy(update=up)


def load_scenario(path: str | Path) -> Scenario:
    """Read a scenario from YAML or JSON; errors name the file and the field."""
    return load_spec(Path(path), Scenario, what="scenario", fmt="auto")


def dump_scenario(sc: Scenario) -> str:
    """YAML text of a scenario (unset fields left out)."""
    return yaml.safe_dump(sc.model_dump(mode="json", exclude_none=True, exclude_defaults=True),
                          sort_keys=False, allow_unicode=True)
