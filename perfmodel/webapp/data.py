"""Cached calls into perfmodel. Every wrapper takes plain hashable ids (the scenario's
canonical JSON key and tuples of integers) and returns perfmodel's typed results or plain
arrays of them; nothing is computed here that perfmodel does not compute.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import streamlit as st

from perfmodel import api
from perfmodel.api import Evaluation, OpBreakdown, RequestEstimate
from perfmodel.core.query import Query, make_query
from perfmodel.serving.knee import Knee, KneePoint, find_knee
from perfmodel.core.catalog import load_model
from perfmodel.core.errors import PerfModelError
from perfmodel.core.hardware import load_gpu
from perfmodel.core.memory import MemoryEstimate
from perfmodel.core.specs import HardwareSpec, ModelSpec
from perfmodel.webapp.state import UIScenario, profile_target, target

CACHE = dict(max_entries=512, show_spinner=False)


def api_kwargs(scn: UIScenario) -> dict:
    """The scenario's ids as keyword arguments (upload refs -> file paths), for the entry
    points that do not take a Query yet (speculative_estimate). The layout includes attention DP
    and the node count (None: not given), so every page that takes these sees the sidebar's."""
    return dict(model=target(scn.model, "model"), gpu=target(scn.gpu, "gpu"),
                weights=scn.weights, kv=scn.kv,
                activations=None if scn.activations == "auto" else scn.activations,
                engine=scn.engine, tp=scn.tp, pp=scn.pp, ep=scn.ep, dp=scn.dp,
                nodes=scn.nodes or None, profile=profile_target(scn.profile))


def ui_query(scn: UIScenario) -> Query:
    """The scenario as the one Query perfmodel.api evaluates."""
    return make_query(**api_kwargs(scn), batch=scn.batch, prompt_tokens=scn.prompt,
                      output_tokens=scn.output)


@st.cache_data(**CACHE)
def evaluation(key: str) -> Evaluation:
    """perfmodel.api.evaluate for the scenario (both op breakdowns, memory, fits)."""
    return api.evaluate(ui_query(UIScenario.from_key(key)))


@st.cache_data(**CACHE)
def predict(key: str) -> RequestEstimate:
    """The scenario's evaluation as perfmodel.api.predict_request reports it."""
    return api.request_estimate(evaluation(key))


@st.cache_data(**CACHE)
def hardware(key: str) -> HardwareSpec:
    """The scenario's accelerator datasheet (roofs of the roofline chart)."""
    scn = UIScenario.from_key(key)
    return load_gpu(target(scn.gpu, "gpu"))


@st.cache_data(**CACHE)
def model_spec(key: str) -> ModelSpec:
    """The scenario's model architecture."""
    return load_model(target(UIScenario.from_key(key).model, "model"))


@st.cache_data(**CACHE)
def prefill_ops(key: str) -> list[OpBreakdown]:
    """Per-op breakdown of the prefill step (predict() reports the decode step)."""
    return evaluation(key).prefill_ops


@dataclass(frozen=True)
class Curve:
    """Request metrics at each point of a one-input sweep (numpy arrays, base units)."""

    x: np.ndarray
    ttft_s: np.ndarray
    tpot_s: np.ndarray
    e2e_s: np.ndarray
    decode_tok_s_per_user: np.ndarray
    output_tok_s_total: np.ndarray
    fits: np.ndarray
    bound: np.ndarray                # what bounds the decode step at the prompt's context
    knee: Knee | None = None


METRICS = ("ttft_s", "tpot_s", "e2e_s", "decode_tok_s_per_user", "output_tok_s_total")


def _curve(scn: UIScenario, **arrays) -> Curve:
    """One vectorized perfmodel.api.evaluate over the array given."""
    (name, x), = arrays.items()
    ev = api.evaluate(ui_query(scn), **{name: x})
    return Curve(x=np.asarray(x, dtype=float), fits=np.asarray(ev.fits, dtype=bool),
                 bound=ev.bound, **{k: getattr(ev, k) for k in METRICS})


@st.cache_data(**CACHE)
def batch_curve(key: str, batches: tuple[int, ...]) -> Curve:
    """Metrics vs batch at the scenario's prompt/output (one vectorized perfmodel call),
    whether each batch fits in memory, and the knee by perfmodel's one rule."""
    scn = UIScenario.from_key(key)
    evaluation(key)                                 # validates the scenario first
    cv = _curve(scn, batch=np.asarray(batches, dtype=np.int64))
    points = [KneePoint(concurrency=int(b), output_tok_s_total=float(t), e2e_s=float(e))
              for b, t, e, f in zip(cv.x, cv.output_tok_s_total, cv.e2e_s, cv.fits) if f]
    knee = find_knee(points) if len(points) >= 2 else None
    return replace(cv, knee=knee)


@st.cache_data(**CACHE)
def context_curve(key: str, prompts: tuple[int, ...]) -> Curve:
    """Metrics vs prompt length at the scenario's batch and output length."""
    scn = UIScenario.from_key(key)
    evaluation(key)                                 # validates the scenario first
    limit = model_spec(key).max_context - scn.output
    p = np.asarray([x for x in prompts if 0 < x <= limit], dtype=np.int64)
    if not p.size:
        raise PerfModelError(f"no prompt length fits the model's context with {scn.output} output tokens")
    return _curve(scn, prompt_tokens=p)


@st.cache_data(**CACHE)
def memory_at(key: str, batch: int, context: int) -> MemoryEstimate:
    """perfmodel.api.memory at this batch and context (per GPU, on the scenario's whole
    layout: tp, pp, ep, attention dp, nodes)."""
    q = ui_query(UIScenario.from_key(key))
    return api.memory_of(q.with_(activations=None, profile=None, batch=batch,
                                 context_tokens=context))


def memory_curve(key: str, contexts: tuple[int, ...]) -> list[MemoryEstimate]:
    """Memory per GPU at each context, at the scenario's batch."""
    scn = UIScenario.from_key(key)
    return [memory_at(key, scn.batch, int(c)) for c in contexts]


# --------------------------------------------------------------------------- speculative


SPEC_FIELDS = ("spec_method", "spec_draft", "spec_alpha", "spec_target")


@st.cache_data(**CACHE)
def speculative(key: str, gamma: int, with_target: bool = True):
    """perfmodel.analysis.speculative.speculative_estimate at the scenario's batch, with context =
    its prompt length, for one draft length gamma."""
    from perfmodel.analysis.speculative import speculative_estimate

    scn = UIScenario.from_key(key)
    draft = target(scn.spec_draft, "model") if scn.spec_method == "draft" else None
    return speculative_estimate(**api_kwargs(scn), method=scn.spec_method, draft=draft,
                                gamma=gamma, acceptance=scn.spec_alpha, batch=scn.batch,
                                context=scn.prompt,
                                target_speedup=scn.spec_target if with_target else None)
