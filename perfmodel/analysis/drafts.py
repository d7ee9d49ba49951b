"""What drafts the tokens in speculative decoding, as ModelSpecs the one op list can price.

Every drafter is expressed as a ModelSpec (usually one layer) so that `ops()`/`step()`
price it exactly as they price the target; nothing here computes a time.

- draft  : a separate, smaller model from the catalog (Leviathan et al. 2023; Chen et al.
           2023), at its own precision.
- eagle  : EAGLE-1/2 head (Li et al. 2024, arXiv:2401.15077): ONE decoder layer of the
           target's shape whose input is fc([feature ; token embedding]), a 2D->D linear;
           it reuses the target's embedding and lm_head (shared weights, but the lm_head
           GEMM is still run for every draft token).
- eagle3 : EAGLE-3 (Li et al. 2025, arXiv:2503.01840): fc fuses three target features
           (3D->D); q/k/v read [embedding ; feature] (2D input); its lm_head covers a
           reduced draft vocabulary (EAGLE3_DRAFT_VOCAB, the released Llama-3.1 heads use
           32k with a d2t map) and is the head's own weight.
- medusa : Medusa-1 heads (Cai et al. 2024, arXiv:2401.10774): n heads, each a D x D
           residual SiLU block and its own D x V lm_head, all evaluated in ONE pass on the
           last hidden state (no attention, no KV cache).
- mtp    : DeepSeek-V3 multi-token prediction module (DeepSeek-V3 report sec. 2.2): one
           transformer block shaped like the target's MoE layer (MLA + MoE), a 2D->D
           projection, shared embedding and output head; reused autoregressively for
           gamma > 1 (as TensorRT-LLM does).
- ngram  : prompt lookup / n-gram (Saxena 2023; TRT-LLM): no draft model at all.
- eagle2 : EAGLE-2 (Li et al. 2024, arXiv:2406.16858): the EAGLE-1 head with a dynamic tree.

Research implementations (engine.speculative_impl == "research": the methods' reference
code on Hugging Face models, as Spec-Bench runs them) verify the methods' default trees,
RESEARCH_TREES (depth gamma, tokens verified per sequence), and pay per target step the
Python ops that build the tree, evaluate the posterior and compact the accepted tokens' KV:
RESEARCH_STEP_OPS kernels issued one by one at the engine's launch cost. Serving engines
(vLLM, SGLang, TRT-LLM) run chains (gamma+1 tokens) and do that work in fused kernels.

Weights that are folded: a projection of E elements that has no place in ModelSpec
(EAGLE's fc, EAGLE-3's wider q/k/v input, the MTP projection) is added to an always-on
MLP of the head, widening it by E / ((up+1) * D) columns, which keeps both its weight
bytes and its FLOPs (2 * rows * E) exact.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from perfmodel.core.errors import PerfModelError
from perfmodel.core.memory import kv_cache_bytes, weight_bytes_by_group
from perfmodel.core.params import count_params
from perfmodel.core.predict import Scenario
from perfmodel.core.specs import Deployment, ModelSpec, Precision
from perfmodel.core.units import GIGA, US

METHODS = ("draft", "eagle", "eagle2", "eagle3", "medusa", "ngram", "mtp")
# Default trees of the reference implementations: method -> (depth gamma, tokens verified)
RESEARCH_TREES = {
    "eagle": (5, 26),    # EAGLE-1 eagle/model/choices.py mc_sim_7b_63: 25 nodes + root, depth 5
    "eagle2": (5, 60),   # EAGLE-2 EaModel.from_pretrained(total_token=60, depth=5, top_k=10)
    "eagle3": (7, 60),   # EAGLE-3 EaModel.from_pretrained(total_token=60, depth=7, top_k=10)
    "medusa": (4, 64),   # Medusa-1 medusa_choices mc_sim_7b_63: 63 nodes + root, 4 heads deep
    "ngram": (10, 11),   # prompt lookup decoding: prompt_lookup_num_tokens=10, a chain
    "draft": (5, 6),     # HF assisted generation: num_assistant_tokens=5, a chain
    "mtp": (1, 2),       # DeepSeek-V3: one MTP module
}
# Python-side ops per target step of the reference code, issued one by one (assumption,
# one figure per method, set so that the Spec-Bench RTX 3090 and A100 Vicuna-7B rows of
# its own method come out right on average; the 13B/33B rows are held out, tests/
# test_speculative.py): tree construction (top-k, gathers, masks and position ids per
# depth), posterior evaluation (candidate comparison, argmax, .tolist()) and KV compaction
# (index_select + copy of the accepted positions). Chains need only the last two.
# Vicuna-7B rows at hf-eager's 18 us per launch: EAGLE 700 (3090) / 620 (A100) -> 660;
# Medusa 840 / 410 -> 630; PLD 190 / 135 -> 160; EAGLE-2 1130 (3090 only). EAGLE-3 shares
# EAGLE-2's dynamic-tree code; SpS and MTP run the chain bookkeeping PLD runs (HF assisted
# generation's loop).
CHAIN_STEP_OPS = 160
RESEARCH_STEP_OPS = {"eagle": 660, "eagle2": 1130, "eagle3": 1130, "medusa": 630,
                     "ngram": CHAIN_STEP_OPS, "draft": CHAIN_STEP_OPS, "mtp": CHAIN_STEP_OPS}
NGRAM_LOOKUP_S = 20 * US          # proposer call per step (assumption: hash/suffix lookup, no GPU)
NGRAM_LOOKUP_S_PER_SEQ = 5 * US   # per sequence per step (assumption)
VOCAB_PAD_TOLERANCE = 0.01       # vocab sizes within 1%: same tokenizer, padded embeddings
EAGLE3_DRAFT_VOCAB = 32_000   # EAGLE-3 heads for Llama-3.1: draft_vocab_size 32000 (d2t map)
SHARED_GROUPS = {             # weight groups a drafter reuses from the target (no new memory)
    "draft": set(),
    "eagle": {"embedding", "lm_head"},
    "eagle2": {"embedding", "lm_head"},
    "eagle3": {"embedding"},
    "medusa": {"embedding"},
    "mtp": {"embedding", "lm_head"},
    "ngram": set(),
}


def _fold_width(m: ModelSpec, extra_elements: float) -> int:
    """Extra MLP columns that hold `extra_elements` weights: E / ((up+1) * D), rounded up."""
    up = 2 if m.gated_mlp else 1
    return int(math.ceil(extra_elements / ((up + 1) * m.d_model)))


def _one_layer(t: ModelSpec, suffix: str, name: str, **changes) -> ModelSpec:
    """The target's layer shape as a one-layer model (no sliding window)."""
    base = t.model_dump()
    base.update(id=f"{t.id}+{suffix}", name=f"{t.name} {name}", hf_repo=None, num_layers=1,
                sliding_window=None, sliding_window_layers=0, tied_embeddings=False,
                published_params=None, published_active_params=None,
                source=f"derived from {t.id} by perfmodel.analysis.drafts ({name})")
    base.update(changes)
    return ModelSpec.model_validate(base)


def eagle_head(t: ModelSpec, *, version: int = 1) -> ModelSpec:
    """EAGLE (version 1/2) or EAGLE-3 (version 3) draft head of target t (see module doc).

    One decoder layer: the target's attention shape and a dense MLP of width F (an MoE
    target's head is dense, as the released EAGLE Mixtral head is), widened to hold
    fc (2D x D, or 3D x D for EAGLE-3) and, for EAGLE-3, the D extra input rows of q/k/v.
    """
    D = t.d_model
    fc = (3 if version == 3 else 2) * D * D
    if version == 3:
        if t.mla is None:
            fc += D * (t.num_heads + 2 * t.num_kv_heads) * t.head_dim
        vocab = min(EAGLE3_DRAFT_VOCAB, t.vocab_size)
    else:
        vocab = t.vocab_size
    ffn = t.ffn_dim if t.moe is None or t.num_dense_ffn_layers else t.moe.expert_ffn_dim
    label = "eagle3" if version == 3 else "eagle"
    return _one_layer(t, label, "EAGLE-3 head" if version == 3 else "EAGLE head", moe=None,
                      vocab_size=vocab, ffn_dim=ffn + _fold_width(t, fc))


def medusa_heads(t: ModelSpec, n: int) -> ModelSpec:
    """n Medusa-1 heads as one pass: a plain (ungated) MLP of width n*D/2 holds the n D x D
    residual blocks (n*D^2 weights, 2*rows*n*D^2 FLOPs) and a vocabulary of n*V holds the n
    lm_heads. Attention is reduced to head_dim 1 (4*D*N weights, <1% of one D x D block)
    and priced at context 0: the heads read no KV cache."""
    D = t.d_model
    return ModelSpec(
        id=f"{t.id}+medusa{n}", name=f"{t.name} Medusa x{n}", family="medusa",
        num_layers=1, d_model=D, num_heads=t.num_heads, num_kv_heads=t.num_heads, head_dim=1,
        ffn_dim=max(1, (n * D + 1) // 2), vocab_size=n * t.vocab_size, gated_mlp=False,
        tied_embeddings=False, max_context=t.max_context,
        source=f"derived from {t.id} by perfmodel.analysis.drafts (Medusa-1 heads)")


def mtp_module(t: ModelSpec) -> ModelSpec:
    """One DeepSeek-V3 MTP module: the target's (last) layer shape, MLA and MoE included,
    plus the 2D x D projection, folded into the shared expert (or the dense MLP)."""
    proj = 2 * t.d_model * t.d_model
    if t.moe is None:
        return _one_layer(t, "mtp", "MTP module", ffn_dim=t.ffn_dim + _fold_width(t, proj))
    e = t.moe
    shared_width = e.shared_expert_ffn_dim or e.expert_ffn_dim
    n_shared = max(1, e.num_shared_experts)
    base = shared_width if e.num_shared_experts else 0
    width = base + int(math.ceil(_fold_width(t, proj) / n_shared))
    moe = e.model_copy(update=dict(num_dense_layers=0, num_shared_experts=n_shared,
                                   shared_expert_ffn_dim=width))
    return _one_layer(t, "mtp", "MTP module", moe=moe)


def has_published_mtp(t: ModelSpec) -> bool:
    """DeepSeek-V3 and R1 ship one MTP module (num_nextn_predict_layers = 1)."""
    return t.family.lower().replace("-", "_") == "deepseek_v3"


@dataclass(frozen=True)
class Drafter:
    """What proposes the tokens, resolved to a priceable scenario (None: no GPU work)."""

    method: str
    label: str
    sc: Scenario | None
    weight_bytes: float           # per GPU, shared target weights excluded
    kv_bytes_per_token: float     # per GPU
    assumptions: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def _check_draft_model(target: ModelSpec, draft: ModelSpec, context: int) -> list[str]:
    """A separate draft must be smaller and share the tokenizer; returns warnings."""
    tv, dv = target.vocab_size, draft.vocab_size
    warnings = []
    if tv != dv:
        if abs(tv - dv) / max(tv, dv) > VOCAB_PAD_TOLERANCE:
            raise PerfModelError(f"draft {draft.id} has vocabulary {dv}, target {target.id} has "
                                 f"{tv}: speculative decoding needs the target's tokenizer")
        warnings.append(f"draft vocabulary {dv} differs from the target's {tv} (padding of "
                        "the same tokenizer assumed)")
    t_act, d_act = count_params(target).active, count_params(draft).active
    if d_act >= t_act:
        raise PerfModelError(f"draft {draft.id} ({d_act / GIGA:.2f}B active parameters) is not "
                             f"smaller than the target {target.id} ({t_act / GIGA:.2f}B)")
    if context + 1 > draft.max_context:
        raise PerfModelError(f"context {context} exceeds the {draft.max_context}-token context "
                             f"of the draft {draft.id}")
    return warnings


def build_drafter(target: Scenario, method: str, gamma: int, *, draft: ModelSpec | None = None,
                  draft_precision: Precision | None = None, context: int = 0) -> Drafter:
    """Resolve a method to a drafter priced on the target's GPU and engine (see module doc)."""
    if method not in METHODS:
        raise PerfModelError(f"unknown speculative method {method!r}; use one of {', '.join(METHODS)}")
    if (draft is not None) != (method == "draft"):
        raise PerfModelError("a draft model is needed by method 'draft' and only by it")
    t = target.model
    prec = draft_precision or target.precision
    assumptions: list[str] = []
    warnings: list[str] = []
    if method == "ngram":
        return Drafter(method, "n-gram / prompt lookup (no draft model)", None, 0.0, 0.0,
                       [f"n-gram proposer costs {NGRAM_LOOKUP_S / US:.0f} us + "
                        f"{NGRAM_LOOKUP_S_PER_SEQ / US:.0f} us per sequence of CPU per step "
                        "(assumed)"])
    if method == "draft":
        warnings += _check_draft_model(t, draft, context)
        spec = draft
    elif method in ("eagle", "eagle2", "eagle3"):
        spec = eagle_head(t, version=3 if method == "eagle3" else 1)
        if method == "eagle3":
            assumptions.append(f"EAGLE-3 head drafts over a reduced vocabulary of "
                               f"{spec.vocab_size} tokens with its own lm_head")
    elif method == "medusa":
        spec = medusa_heads(t, gamma)
    else:
        spec = mtp_module(t)
        if not has_published_mtp(t):
            assumptions.append(f"{t.id} ships no MTP module: priced as a DeepSeek-V3-style "
                               "module of its own layer shape")
    dep = _draft_deployment(spec, target.dep)
    if dep.tp != target.dep.tp:
        assumptions.append(f"drafter runs on one GPU (tp={target.dep.tp} does not divide "
                           f"its {spec.num_heads} heads)")
    engine = target.engine.model_copy(update={"cpu_overhead_per_step_s": 0.0})
    sc = Scenario(spec, target.hw, prec, engine, target.eff, dep, target.attention)
    shared = SHARED_GROUPS[method]
    weights = sum(v for k, v in weight_bytes_by_group(spec, prec, dep).items() if k not in shared)
    kv = 0.0 if method == "medusa" else float(kv_cache_bytes(spec, prec, batch=1, context=1, dep=dep))
    return Drafter(method, spec.name, sc, float(weights), kv, assumptions, warnings)


def _draft_deployment(spec: ModelSpec, dep: Deployment) -> Deployment:
    """The target's TP (and EP) when the drafter's heads (experts) divide; no PP."""
    tp = dep.tp if spec.num_heads % dep.tp == 0 else 1
    ep = 1
    if spec.moe is not None and dep.ep <= tp and spec.moe.num_experts % dep.ep == 0:
        ep = dep.ep
    return Deployment(tp=tp, pp=1, ep=ep, gpus_per_node=dep.gpus_per_node)
