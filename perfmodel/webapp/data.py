"""Cached calls into perfmodel. Every wrapper takes plain hashable ids (the scenario's
canonical JSON key and tuples of integers) and returns perfmodel's typed results or plain
arrays of them; nothing is computed here that perfmodel does not compute.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np
import streamlit as st

from perfmodel import api
from perfmodel.api import OpBreakdown, RequestEstimate
from perfmodel.analysis.endpoint.stats import Knee, find_knee
from perfmodel.core.catalog import load_model
from perfmodel.core.errors import PerfModelError
from perfmodel.core.hardware import load_gpu
from perfmodel.core.memory import MemoryEstimate
from perfmodel.core.predict import request_times
from perfmodel.core.specs import HardwareSpec, ModelSpec
from perfmodel.webapp.state import UIScenario, profile_target, target

CACHE = dict(max_entries=512, show_spinner=False)


def api_kwargs(scn: UIScenario) -> dict:
    """The scenario as keyword arguments of perfmodel.api (upload refs -> file paths)."""
    return dict(model=target(scn.model, "model"), gpu=target(scn.gpu, "gpu"),
                weights=scn.weights, kv=scn.kv,
                activations=None if scn.activations == "auto" else scn.activations,
                engine=scn.engine, tp=scn.tp, pp=scn.pp, ep=scn.ep,
                profile=profile_target(scn.profile))


@st.cache_data(**CACHE)
def predict(key: str) -> RequestEstimate:
    """perfmodel.api.predict_request for the scenario."""
    scn = UIScenario.from_key(key)
    return api.predict_request(**api_kwargs(scn), batch=scn.batch, prompt=scn.prompt,
                               output=scn.output)


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
    scn = UIScenario.from_key(key)
    kw = api_kwargs(scn)
    sc, _, _ = api.resolve(kw.pop("model"), kw.pop("gpu"), **kw)
    predict(key)                                    # validates the scenario first
    return api.op_breakdown(request_times(sc, scn.batch, scn.prompt, scn.output).prefill.ops)


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


def _curve(scn: UIScenario, batch, prompt, output, x) -> tuple:
    kw = api_kwargs(scn)
    sc, _, _ = api.resolve(kw.pop("model"), kw.pop("gpu"), **kw)
    rt = request_times(sc, batch, prompt, output)
    shape = np.shape(x)
    out = {k: np.broadcast_to(np.asarray(getattr(rt, k), dtype=float), shape).copy()
           for k in ("ttft_s", "tpot_s", "e2e_s", "decode_tok_s_per_user", "output_tok_s_total")}
    out["bound"] = np.broadcast_to(np.asarray(rt.step.bound, dtype=object), shape).copy()
    return sc, out


@st.cache_data(**CACHE)
def batch_curve(key: str, batches: tuple[int, ...]) -> Curve:
    """Metrics vs batch at the scenario's prompt/output (one vectorized perfmodel call),
    whether each batch fits (perfmodel's max batch at this context), and the knee by the
    same rule perfmodel.analysis.endpoint uses on measurements."""
    scn = UIScenario.from_key(key)
    predict(key)                                    # validates the scenario first
    b = np.asarray(batches, dtype=float)
    _, m = _curve(scn, b, scn.prompt, scn.output, b)
    mem = memory_at(key, 1, scn.prompt + scn.output)
    fits = b <= mem.max_batch
    levels = [(int(bi), SimpleNamespace(output_tok_s=float(t), e2e_p50_s=float(e), ok=1))
              for bi, t, e, f in zip(b, m["output_tok_s_total"], m["e2e_s"], fits) if f]
    knee = find_knee(levels) if len(levels) >= 2 else None
    return Curve(x=b, fits=fits, knee=knee, **m)


@st.cache_data(**CACHE)
def context_curve(key: str, prompts: tuple[int, ...]) -> Curve:
    """Metrics vs prompt length at the scenario's batch and output length."""
    scn = UIScenario.from_key(key)
    predict(key)                                    # validates the scenario first
    limit = model_spec(key).max_context - scn.output
    p = np.asarray([x for x in prompts if 0 < x <= limit], dtype=float)
    if not p.size:
        raise PerfModelError(f"no prompt length fits the model's context with {scn.output} output tokens")
    _, m = _curve(scn, scn.batch, p, scn.output, p)
    mem = memory_at(key, scn.batch, scn.output + 1)
    fits = (p + scn.output) <= mem.max_context
    return Curve(x=p, fits=fits, **m)


@st.cache_data(**CACHE)
def memory_at(key: str, batch: int, context: int) -> MemoryEstimate:
    """perfmodel.api.memory at this batch and context (per GPU)."""
    scn = UIScenario.from_key(key)
    kw = api_kwargs(scn)
    for k in ("activations", "ep", "profile"):
        kw.pop(k)
    return api.memory(**kw, batch=batch, context=context)


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
