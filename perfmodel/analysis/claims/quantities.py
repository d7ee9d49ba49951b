"""Quantities other than request metrics that claims quote (bytes per token, GB per billion
parameters, KV bytes, FLOPs saved by the KV cache, communication time), each read from the
one op list, memory model or step model; nothing here has a formula of its own.
"""

from __future__ import annotations

import numpy as np

from perfmodel.core import predict
from perfmodel.analysis.claims.metrics import resolve
from perfmodel.analysis.claims.scenario import Scenario, fill, model_spec
from perfmodel.core.memory import kv_cache_bytes, weight_bytes_by_group
from perfmodel.core.ops import ops, total
from perfmodel.core.params import count_params
from perfmodel.core.specs import Deployment, ModelSpec, Precision


def _filled(sc: Scenario) -> Scenario:
    return fill(sc)[0]


def weight_bytes(sc: Scenario) -> float:
    """All weights of the served model, summed over its GPUs."""
    f = _filled(sc)
    prec = Precision.of(f.weights, f.kv, f.activations)
    return sum(weight_bytes_by_group(model_spec(f.model), prec, Deployment()).values())


def weight_bytes_per_param(model: str | ModelSpec, weights: str) -> float:
    """Bytes of the whole checkpoint per parameter (embeddings and norms stay 16-bit)."""
    m = model_spec(model)
    prec = Precision.of(weights)
    return sum(weight_bytes_by_group(m, prec, Deployment()).values()) / count_params(m).total


def kv_bytes(model: str | ModelSpec, kv: str, tokens: int, batch: int = 1) -> float:
    """KV cache of `batch` sequences of `tokens` tokens (no block rounding, one GPU)."""
    return float(kv_cache_bytes(model_spec(model), Precision.of("bf16", kv), batch=batch,
                                context=tokens))


def bytes_per_decode_step(model: str | ModelSpec, weights: str, kv: str, context: int,
                          batch: int = 1) -> float:
    """Bytes one decode step moves through memory (weights touched, KV, activations)."""
    return float(total(ops(model_spec(model), Precision.of(weights, kv), batch, 1, context)).bytes)


def required_bandwidth(model: str | ModelSpec, weights: str, kv: str, tok_s: float,
                       context: int) -> float:
    """Bytes/s a batch-1 decode at tok_s needs: tok_s x bytes per step."""
    return tok_s * bytes_per_decode_step(model, weights, kv, context)


def decode_flops(sc: Scenario, *, kv_cache: bool) -> float:
    """FLOPs of the O-1 decode steps of one request, summed exactly over the contexts
    S = P+1 .. P+O-1: step(B, 1, S) with a KV cache, step(B, S+1, 0) without."""
    f = _filled(sc)
    sim, _ = resolve(f)
    S = np.arange(f.prompt_tokens + 1, f.prompt_tokens + f.output_tokens, dtype=float)
    if S.size == 0:
        return 0.0
    est = (predict.step(sim, f.width, 1.0, S) if kv_cache
           else predict.step(sim, f.width, S + 1.0, 0.0))
    return float(np.sum(np.broadcast_to(np.asarray(est.flops, dtype=float), S.shape)))


def comm_s(sc: Scenario) -> float:
    """Seconds of collectives (TP all-reduce, EP all-to-all) in one decode step at the
    mid-decode context."""
    f = _filled(sc)
    sim, _ = resolve(f)
    est = predict.step(sim, f.width, 1.0, f.prompt_tokens + f.output_tokens // 2)
    return float(sum(float(o.time_s) for o in est.ops if o.kind == "comm"))
