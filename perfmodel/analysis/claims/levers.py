"""The levers that move a scenario, the order they are applied in, and for each the moves a
claim search may try, with how far each one stretches the lever.

A lever owns some scenario fields; applying it copies those fields from the improved
scenario (attribution) or sets them to a candidate value (search). Stretch: 0 is the
baseline, 1.0 the edge of the plausible range, above 1 beyond it. Plausible ranges:
- weights: 8-bit 0.5, 4-bit 1.0 (weight-only 4-bit keeps quality within ~1%: GPTQ,
  Frantar et al. 2023; AWQ, Lin et al. 2024; fp4 only on chips with fp4 units).
- activations: 8-bit where the chip has the units, 0.5 (SmoothQuant, Xiao et al. 2023; FP8).
- kv_precision: 8-bit 0.5, 4-bit 1.0 (KIVI, Liu et al. 2024, goes to 2 bits).
- engine: a serving runtime or compiled graph, 0.25 (vLLM, SGLang, TensorRT-LLM, torch.compile).
- batching: continuous 0.25; batch or concurrency x2^k at k/6 (x64 = 1.0), only while it fits.
  For per-user metrics, batch 1 (giving up throughput), 0.25.
- paged_kv: on, 0.25 (vLLM, Kwon et al. 2023).
- kv_cache: off -> on, 0 (every engine has one: leaving it off is a weak baseline).
- speculative: acceptance 0.6/0.7/0.8/0.9 at 0.5/0.75/1.0/1.5 (draft-model acceptance 0.5-0.9,
  Leviathan et al. 2023 Table 3; EAGLE's ~3.5-4 accepted tokens per step sits near 0.8).
- parallelism: tp x2/x4/x8 within one node at 0.25/0.5/0.75. Attention DP and EP are kept,
  so the move adds GPUs (tp x dp x pp); a given node count grows with it (GPUs per node kept).
- hardware: a GPU with more bandwidth, log(bandwidth ratio)/log(4) (4x = 1.0), at least 0.25.
- model: a smaller model with the same tokenizer (distilled or MoE), log2(active ratio)/4
  (16x fewer active parameters = 1.0), at least 0.25; it changes what is served.
- routing: share 0.3/0.5/0.8 of requests to the smallest same-tokenizer model at 0.4/0.6/1.0
  (seed 000 routes ~80% of requests to a 1-2B model).
Weak baseline settings: hf-eager or torch-eager engines, no KV cache, fp32 weights.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from perfmodel.analysis.claims.scenario import Scenario, hardware, model_id, model_spec, revise, small_model_for
from perfmodel.core.errors import PerfModelError
from perfmodel.core.hardware import list_gpus
from perfmodel.core.catalog import list_models
from perfmodel.core.params import count_params
from perfmodel.core.specs import parse_format

# Stretch of each move (0 baseline, 1.0 edge of the plausible range); sources in the module doc.
STRETCH_8BIT = 0.5               # 8-bit weights, W8A8 or KV (SmoothQuant; FP8)
STRETCH_4BIT = 1.0               # 4-bit weights (GPTQ, AWQ) or KV (KIVI); fp4 on fp4 chips
STRETCH_STANDARD = 0.25          # a standard engine feature: serving engine, continuous
                                 # batching, paged KV, batch 1 for per-user metrics, tp x2
STRETCH_ENABLE_KV_CACHE = 0.0    # every engine has a KV cache: turning it on is free
BATCH_DOUBLINGS_AT_EDGE = 6.0    # batch x2^k stretches k/6 (x64 = 1.0)
MAX_BATCH_DOUBLINGS = 9          # batch moves tried up to x2^9
SPECULATIVE_STRETCH = ((0.6, 0.5), (0.7, 0.75), (0.8, 1.0), (0.9, 1.5))   # (acceptance, stretch)
TP_STRETCH = ((2, 0.25), (4, 0.5), (8, 0.75))                           # (tp multiple, stretch)
MAX_TP_IN_NODE = 8               # tensor parallelism stays within one 8-GPU node
MIN_STRETCH = 0.25               # a different GPU or model is never free
FASTER_GPU_MIN_RATIO = 1.2       # a "faster" GPU has >= 1.2x the bandwidth
GPU_BANDWIDTH_TARGETS = (1.5, 2.5, 4.0)  # bandwidth ratios the three GPU picks aim at
BANDWIDTH_RATIO_AT_EDGE = 4.0    # 4x bandwidth = 1.0
ACTIVE_PARAM_DOUBLINGS_AT_EDGE = 4.0  # 16x fewer active parameters = 1.0
SAME_TOKENIZER_VOCAB_TOL = 0.01  # vocab sizes within 1 % count as the same tokenizer
SMALLER_MODEL_MAX_ACTIVE = 0.8   # a "smaller" model has < 80 % of the active parameters
ROUTING_STRETCH = ((0.3, 0.4), (0.5, 0.6), (0.8, 1.0))   # (share routed to the small model, stretch)
STRETCH_WEAK_ENGINE = 0.5        # weakening: the baseline ran HF eager generate
STRETCH_NO_KV_CACHE = 1.0        # weakening: the baseline recomputed the prefix every token


@dataclass(frozen=True)
class Lever:
    """A named group of scenario fields that move together."""

    name: str
    fields: tuple[str, ...]
    description: str


LEVERS: tuple[Lever, ...] = (
    Lever("hardware", ("gpu", "usd_per_gpu_hour", "mem_bw_utilization"),
          "accelerator model, its price and the share of its peak bandwidth reached"),
    Lever("model", ("model",), "model size or MoE (active vs total parameters, distillation)"),
    Lever("weights", ("weights",), "weight precision"),
    Lever("activations", ("activations",), "activation (matmul input) precision"),
    Lever("kv_precision", ("kv",), "KV-cache precision"),
    Lever("engine", ("engine",), "runtime: kernels, launches, CPU overhead (hf-eager -> vllm)"),
    Lever("batching", ("batching", "batch", "concurrency"), "batching policy and batch/concurrency"),
    Lever("paged_kv", ("paged_kv",), "paged KV cache"),
    Lever("kv_cache", ("kv_cache",), "KV cache on vs recomputing the prefix every step"),
    Lever("speculative", ("speculative",), "speculative decoding"),
    Lever("parallelism", ("tp", "pp", "ep", "dp", "nodes"),
          "tensor, pipeline, expert and attention data parallelism, and the servers they span"),
    Lever("routing", ("routing",), "a share of requests routed to a small model"),
    Lever("workload", ("prompt_tokens", "output_tokens", "longest_prompt_tokens",
                       "longest_output_tokens", "requests", "profile"),
          "the task itself (lengths): not a speed-up"),
)
LEVER_NAMES = tuple(lv.name for lv in LEVERS)
# Levers that change what the user gets (another model answers), not how fast the system
# serves the same model: reported apart from the system optimizations, with OUTPUT_CAVEAT.
OUTPUT_LEVERS = ("model", "routing")
OUTPUT_CAVEAT = ("a smaller model, or routing requests to one, changes what the user gets: "
                 "its speed-up holds only if its answers are good enough, which a performance "
                 "model cannot tell")
_BY_NAME = {lv.name: lv for lv in LEVERS}
WEAK_ENGINES = ("hf-eager", "torch-eager")
SERVING_ENGINES = ("torch-compile", "vllm", "sglang", "trtllm")


def lever(name: str) -> Lever:
    if name not in _BY_NAME:
        raise PerfModelError(f"unknown lever {name!r}; use one of {', '.join(LEVER_NAMES)}")
    return _BY_NAME[name]


def differing(a: Scenario, b: Scenario) -> list[str]:
    """Levers whose fields differ between two filled scenarios, in LEVERS order."""
    return [lv.name for lv in LEVERS if any(getattr(a, f) != getattr(b, f) for f in lv.fields)]


def apply(base: Scenario, target: Scenario, names) -> Scenario:
    """base with the fields of the named levers taken from target."""
    changes = {f: getattr(target, f) for n in names for f in lever(n).fields}
    return revise(base, **changes) if changes else base


def describe(a: Scenario, b: Scenario, name: str) -> str:
    """'engine: hf-eager -> vllm' for the fields of one lever that differ."""
    parts = [f"{f}: {_show(getattr(a, f))} -> {_show(getattr(b, f))}"
             for f in lever(name).fields if getattr(a, f) != getattr(b, f)]
    return "; ".join(parts)


def _show(v) -> str:
    if v is None:
        return "none"
    if hasattr(v, "id") and hasattr(v, "num_layers"):
        return v.id
    if isinstance(v, dict) and "id" in v and "num_layers" in v:
        return str(v["id"])
    if hasattr(v, "model_dump"):
        return ", ".join(f"{k}={_show(x)}" for k, x in v.model_dump(exclude_none=True).items())
    if isinstance(v, float):
        return f"{v:.3g}"
    return str(v)


# --------------------------------------------------------------------------- search moves


@dataclass(frozen=True)
class Move:
    """One candidate setting of one lever, and how far it stretches the lever."""

    lever: str
    changes: dict = field(hash=False)
    stretch: float
    label: str
    weak_fix: bool = False   # moves away from a weak baseline setting


def moves(f: Scenario, metric: str) -> list[Move]:
    """Candidate moves from a filled baseline for a claim on `metric` (see module doc)."""
    per_user = metric in ("decode_tok_s_per_user", "tpot_s", "ttft_s", "e2e_s")
    out: list[Move] = []
    out += _precision_moves(f)
    out += _engine_moves(f)
    out += _batching_moves(f, per_user)
    if not f.paged_kv:
        out.append(Move("paged_kv", {"paged_kv": True}, STRETCH_STANDARD, "paged KV on"))
    if not f.kv_cache:
        out.append(Move("kv_cache", {"kv_cache": True}, STRETCH_ENABLE_KV_CACHE, "KV cache on",
                        weak_fix=True))
    out += _speculative_moves(f)
    out += _tp_moves(f)
    out += _hardware_moves(f)
    out += _model_moves(f)
    out += _routing_moves(f)
    return out


def _precision_moves(f: Scenario) -> list[Move]:
    hw = hardware(f.gpu)
    w_bits = parse_format(f.weights).bits
    out = []
    for name, stretch in (("fp8" if hw.has("fp8") else "int8", STRETCH_8BIT),
                          ("int4", STRETCH_4BIT), ("fp4", STRETCH_4BIT)):
        if parse_format(name).bits < w_bits and (name != "fp4" or hw.has("fp4")):
            weak = w_bits > 16
            out.append(Move("weights", {"weights": name}, stretch,
                            f"weights {f.weights} -> {name}", weak_fix=weak))
    a8 = "fp8" if hw.has("fp8") else "int8" if hw.has("int8") else None
    if a8 and parse_format(f.activations).bits > 8:
        out.append(Move("activations", {"activations": a8, "weights": _at_most(f.weights, a8)},
                        STRETCH_8BIT, f"activations {f.activations} -> {a8} (W8A8)"))
    kv_bits = parse_format(f.kv).bits
    for name, stretch in (("fp8" if hw.has("fp8") else "int8", STRETCH_8BIT), ("int4", STRETCH_4BIT)):
        if parse_format(name).bits < kv_bits:
            out.append(Move("kv_precision", {"kv": name}, stretch, f"KV cache {f.kv} -> {name}"))
    return out


def _at_most(weights: str, fmt: str) -> str:
    """Weights at least as narrow as the activations (W8A8 needs 8-bit weights)."""
    return weights if parse_format(weights).bits <= parse_format(fmt).bits else fmt


def _engine_moves(f: Scenario) -> list[Move]:
    weak = f.engine in WEAK_ENGINES
    return [Move("engine", {"engine": e}, STRETCH_STANDARD, f"engine {f.engine} -> {e}", weak_fix=weak)
            for e in SERVING_ENGINES if e != f.engine]


def _batching_moves(f: Scenario, per_user: bool) -> list[Move]:
    out = []
    field_name = "concurrency" if f.concurrency is not None else "batch"
    width = f.width
    if f.batching != "continuous":
        out.append(Move("batching", {"batching": "continuous"}, STRETCH_STANDARD,
                        f"batching {f.batching} -> continuous"))
    if per_user:
        if width > 1:
            out.append(Move("batching", {field_name: 1}, STRETCH_STANDARD,
                            f"{field_name} {width} -> 1"))
        return out
    for k in range(1, MAX_BATCH_DOUBLINGS + 1):
        new = width * 2 ** k
        out.append(Move("batching", {field_name: new, "batching": "continuous"},
                        k / BATCH_DOUBLINGS_AT_EDGE,
                        f"{field_name} {width} -> {new}, continuous"))
    return out


def default_speculative(f: Scenario) -> dict | None:
    """The scenario's speculative settings, or a draft model sharing the tokenizer (else an
    EAGLE head); None without a KV cache."""
    if not f.kv_cache:
        return None
    if f.speculative is not None:
        return f.speculative.model_dump()
    small = small_model_for(model_spec(f.model))
    return {"method": "draft", "draft_model": small} if small else {"method": "eagle"}


def _speculative_moves(f: Scenario) -> list[Move]:
    base = default_speculative(f)
    if base is None:
        return []
    current = f.speculative.acceptance if f.speculative is not None else None
    out = []
    for alpha, stretch in SPECULATIVE_STRETCH:
        if current is None or alpha > current:
            spec = dict(base, acceptance=alpha)
            who = spec.get("draft_model") or spec["method"]
            if hasattr(who, "id"):
                who = who.id
            out.append(Move("speculative", {"speculative": spec}, stretch,
                            f"speculative decoding ({who}, acceptance {alpha})"))
    return out


def _tp_moves(f: Scenario) -> list[Move]:
    m, hw = model_spec(f.model), hardware(f.gpu)
    if hw.intra_node_link is None:
        return []
    out = []
    for mult, stretch in TP_STRETCH:
        tp = f.tp * mult
        if tp <= MAX_TP_IN_NODE and m.num_heads % tp == 0:
            changes, label = {"tp": tp}, f"tp {f.tp} -> {tp}"
            if f.nodes is not None:          # the same GPUs per server, more servers
                changes["nodes"] = f.nodes * mult
                label += f" (nodes {f.nodes} -> {f.nodes * mult})"
            out.append(Move("parallelism", changes, stretch, label))
    return out


def layout_notes(f: Scenario) -> list[str]:
    """One line per lever that cannot keep a filled baseline's layout as it is: the tp moves
    keep attention DP and EP, so they add GPUs (and servers, when a node count is given)."""
    if f.dp == 1 and f.nodes is None:
        return []
    gpus = f.tp * f.dp * f.pp
    nodes = (f", and Nodes {f.nodes} grow with them ({gpus // f.nodes} GPUs per server kept)"
             if f.nodes is not None else "")
    return [f"parallelism: the TP moves (x2, x4, x8) keep DP {f.dp} and EP {f.ep}, so they add "
            f"GPUs to the {gpus} of TP x DP x PP{nodes}; the cost metric counts them"]


def _hardware_moves(f: Scenario) -> list[Move]:
    """Up to three faster GPUs of the same vendor, spread over bandwidth ratios."""
    hw = hardware(f.gpu)
    faster = sorted((g for g in list_gpus() if g.vendor == hw.vendor and
                     g.memory_bandwidth_bytes_per_s
                     > FASTER_GPU_MIN_RATIO * hw.memory_bandwidth_bytes_per_s),
                    key=lambda g: g.memory_bandwidth_bytes_per_s)
    picks = {}
    for want in GPU_BANDWIDTH_TARGETS:
        if faster:
            g = min(faster, key=lambda g: abs(math.log(g.memory_bandwidth_bytes_per_s
                                                       / hw.memory_bandwidth_bytes_per_s / want)))
            picks[g.id] = g
    out = []
    for g in picks.values():
        ratio = g.memory_bandwidth_bytes_per_s / hw.memory_bandwidth_bytes_per_s
        changes = {"gpu": g.id, "usd_per_gpu_hour": g.price.usd_per_hour if g.price else None,
                   "mem_bw_utilization": None}
        out.append(Move("hardware", changes, max(MIN_STRETCH, math.log(ratio) / math.log(BANDWIDTH_RATIO_AT_EDGE)),
                        f"hardware {hw.id} -> {g.id} ({ratio:.1f}x bandwidth)"))
    return out


def _model_moves(f: Scenario) -> list[Move]:
    """Up to three smaller catalog models sharing the tokenizer (distilled or MoE)."""
    m = model_spec(f.model)
    active = count_params(m).active
    same = [x for x in list_models() if x.id != m.id
            and abs(x.vocab_size - m.vocab_size) / max(x.vocab_size, m.vocab_size) <= SAME_TOKENIZER_VOCAB_TOL
            and count_params(x).active < SMALLER_MODEL_MAX_ACTIVE * active]
    same = sorted(same, key=lambda x: -count_params(x).active)[:3]
    out = []
    for x in same:
        ratio = active / count_params(x).active
        out.append(Move("model", {"model": x.id}, max(MIN_STRETCH, math.log2(ratio) / ACTIVE_PARAM_DOUBLINGS_AT_EDGE),
                        f"model {model_id(f.model)} -> {x.id} ({ratio:.1f}x fewer active parameters)"))
    return out


def _routing_moves(f: Scenario) -> list[Move]:
    small = small_model_for(model_spec(f.model))
    if small is None or f.routing is not None:
        return []
    return [Move("routing", {"routing": {"small_model": small, "share": r}}, s,
                 f"route {r:.0%} of requests to {small}") for r, s in ROUTING_STRETCH]


def weakenings(f: Scenario, metric: str) -> list[Move]:
    """Ways the stated baseline could have been weaker than it reads (applied to it)."""
    out = []
    if f.engine not in WEAK_ENGINES:
        out.append(Move("engine", {"engine": "hf-eager", "batching": "static", "paged_kv": False},
                        STRETCH_WEAK_ENGINE, "baseline run with Hugging Face eager generate"))
    if f.kv_cache:
        out.append(Move("kv_cache", {"kv_cache": False, "speculative": None}, STRETCH_NO_KV_CACHE,
                        "baseline without a KV cache (recomputing the prefix)"))
    if metric in ("output_tok_s_total", "usd_per_mtok") and f.width > 1:
        key = "concurrency" if f.concurrency is not None else "batch"
        out.append(Move("batching", {key: 1}, STRETCH_STANDARD,
                        "baseline serving one request at a time"))
    return out


def apply_moves(f: Scenario, chosen) -> Scenario:
    """A filled scenario with the moves' changes; None values are refilled by the caller."""
    changes: dict = {}
    for mv in chosen:
        changes.update(mv.changes)
    return revise(f, **changes) if changes else f
