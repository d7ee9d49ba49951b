"""Vectorized sweeps: the cross product of lists, evaluated with numpy.

Configurations that share (model, GPU, precision, engine, parallelism) form one group;
within a group batch, prompt and output are numpy arrays evaluated in one vectorized
api.evaluate call, so a sweep and a single prediction agree exactly.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from perfmodel.api import evaluate, make_query, resolve
from perfmodel.core.errors import PerfModelError

METRICS = ("ttft_s", "tpot_s", "e2e_s", "decode_tok_s_per_user", "output_tok_s_total",
           "decode_tok_s_total", "prefill_s", "mbu", "mfu")


@dataclass(frozen=True)
class SweepSpec:
    """Lists whose cross product is evaluated."""

    models: list[str]
    gpus: list[str]
    weights: list[str]
    kvs: list[str]
    engines: list[str]
    batches: list[int]
    prompts: list[int]
    outputs: list[int]
    tps: tuple[int, ...] = (1,)

    @property
    def size(self) -> int:
        return int(np.prod([len(x) for x in (self.models, self.gpus, self.weights, self.kvs,
                                             self.engines, self.batches, self.prompts,
                                             self.outputs, self.tps)]))


def sweep_arrays(spec: SweepSpec, *, profile=None, hardware_dir: str | None = None,
                 skip_invalid: bool = True) -> dict[str, np.ndarray]:
    """Column arrays (one entry per configuration) of inputs and metrics, plus `fits`."""
    for name in ("batches", "prompts", "outputs", "tps"):
        vals = list(getattr(spec, name))
        if not vals or not all(isinstance(v, (int, np.integer)) and not isinstance(v, bool)
                               and v > 0 for v in vals):
            raise PerfModelError(f"sweep {name} must be a non-empty list of positive integers")
    b, pr, out = np.meshgrid(np.array(spec.batches, float), np.array(spec.prompts, float),
                             np.array(spec.outputs, float), indexing="ij")
    b, pr, out = b.ravel(), pr.ravel(), out.ravel()
    cols: dict[str, list] = {k: [] for k in ("model", "gpu", "weights", "kv", "engine", "tp",
                                             "batch", "prompt", "output", "fits", *METRICS)}
    for model, gpu, w, kv, eng, tp in itertools.product(spec.models, spec.gpus, spec.weights,
                                                        spec.kvs, spec.engines, spec.tps):
        try:
            q = make_query(model=model, gpu=gpu, weights=w, kv=kv, engine=eng, tp=tp,
                           profile=profile, hardware_dir=hardware_dir)
            if not skip_invalid:   # as a single prediction: beyond the context is an error
                _within_context(q, pr, out)
            ev = evaluate(q, batch=b, prompt_tokens=pr, output_tokens=out)
        except PerfModelError:
            if not skip_invalid:
                raise
            continue
        n = b.size
        for key, val in (("model", ev.model), ("gpu", ev.gpu), ("weights", w), ("kv", kv),
                         ("engine", eng), ("tp", tp)):
            cols[key].append(np.full(n, val, dtype=object))
        cols["batch"].append(b)
        cols["prompt"].append(pr)
        cols["output"].append(out)
        cols["fits"].append(np.asarray(ev.fits, dtype=bool))
        for k in METRICS:
            cols[k].append(getattr(ev, k))
    if not cols["batch"]:
        raise PerfModelError("no valid configuration in the sweep")
    return {k: np.concatenate(v) for k, v in cols.items()}


def _within_context(q, prompt: np.ndarray, output: np.ndarray) -> None:
    """Raise, as a single prediction does, for a prompt + output beyond the model's context
    (evaluate reports such entries of an array as fits=False)."""
    limit = resolve(q)[0].model.max_context
    over = prompt + output > limit
    if np.any(over):
        i = int(np.argmax(over))
        raise PerfModelError(f"prompt {int(prompt[i])} + output {int(output[i])} tokens exceed "
                             f"the {limit}-token context of {q.model}")


def sweep_rows(spec: SweepSpec, **kw) -> list[dict]:
    """The sweep as a list of plain dicts (for CSV/JSON)."""
    arrays = sweep_arrays(spec, **kw)
    keys = list(arrays)
    n = len(arrays["batch"])
    rows = []
    for i in range(n):
        row = {}
        for k in keys:
            v = arrays[k][i]
            row[k] = v.item() if hasattr(v, "item") else v
            if k in ("batch", "prompt", "output", "tp"):
                row[k] = int(row[k])
        rows.append(row)
    return rows
