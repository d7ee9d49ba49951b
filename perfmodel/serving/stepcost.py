"""The cost of one scheduler step, as a surface precomputed from the one op list.

A serving step carries d decode rows (one new token each, contexts s_i) and prompt chunks
(c_j new tokens over s0_j cached tokens). Its ops split by what they depend on:
- body: embedding, norms, q/k/v/o, rotary, MLP or experts, residuals, collectives: the
  token rows M = d + sum c_j only (weights read once per step);
- attention: per sequence group, decode (B=d, T=1, S = mean s_i) and each chunk
  (B=1, T=c_j, S=s0_j); one varlen kernel per layer runs them all (vLLM V1 unified
  attention, FlashInfer), so the per-kernel fixed time is paid once;
- head: final norm, lm_head and sampling over the n logit rows (decodes + finishing chunks).
Step time = max(body + attention + head [+ stage hand-offs], CPU issue time + host work of the
step's sequences) + the engine's CPU overhead per step, exactly the per-step rule of
core/roofline.step_time (host_step_s; in series for an engine without overlap scheduling).
The issue time is a graph replay for decode-only steps; a step with prompt chunks whose token
rows exceed the engine's prefill_graph_max_tokens runs eagerly, and so does a decode step
above the engine's largest captured batch (core/roofline.issue_s); an engine without
eager_issue_overlap pays an eager prompt step's issue in series with its GPU work
(host_step_s).
All pieces come from ONE batched core.roofline.step_time call on grids; a step is then
priced by linear interpolation. For a plain decode or prefill step the split is an identity
(tested against core.predict.step).

Pipeline parallelism (pp > 1): as in core.predict.step, m = min(sequences, pp) micro-batches
keep the stages busy; the step runs at the heaviest micro-batch's rows, 1/m of the decode
rows plus max(prompt rows / m, largest chunk) (a chunk runs inside one micro-batch:
batching.heavy_prompt_rows), plus (pp - 1) hand-offs.

Attention data parallelism (dp > 1): the table's body and chunk attention are one rank's
share of rows spread evenly over the dp ranks (core/parallel.rank_ops), but a request lives
on one DP rank, so a prompt chunk's attention, projections, norms and collectives run on that
rank alone while the routed experts see every rank's rows (vLLM: the DP coordinator hands each
request to one engine core, vllm/v1/engine/core_client.py DPLBAsyncMPClient, and the ranks step
together through the MoE layers' collectives, running dummy batches when idle; SGLang's
DP-attention controller and TensorRT-LLM's attention DP likewise assign a request to one rank).
The step runs at the busiest rank: its rows are the decode rows' share plus max(prompt rows /
dp, largest chunk), its chunk attention max(all chunks' / dp, the largest chunk's), as for the
pp micro-batches; the routed experts stay at all M rows. With one equal chunk per rank (e.g.
TensorRT-LLM's attention-DP balance) nothing changes.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from dataclasses import dataclass

import numpy as np

from perfmodel.core.host_cost import piecewise_step, prompt_issue_s
from perfmodel.core.parallel import p2p_s
from perfmodel.core.predict import Scenario
from perfmodel.core.roofline import host_step_s, issue_s, piecewise_prompt_s, step_time

HEAD_OPS = ("final_norm", "lm_head", "sampling")
ROUTED_OPS = ("experts",)   # ops that see every DP rank's rows (core/parallel.rank_ops)
ROW_POINTS = 72          # geometric grid of token rows (interpolation error well under 1%)
CONTEXT_POINTS = 24      # linear grid of contexts
CHUNK_POINTS = 40        # chunk sizes (attention is quadratic in c: denser)


def _rows_grid(top: float, n: int) -> np.ndarray:
    top = max(float(top), 2.0)
    return np.unique(np.concatenate([np.arange(1.0, min(top, 16.0) + 1.0),
                                     np.round(np.geomspace(1.0, top, n))]))


@dataclass(frozen=True)
class StepCost:
    """Interpolation tables; all times in seconds."""

    rows: np.ndarray            # M grid
    body_s: np.ndarray          # body(M)
    head_s: np.ndarray          # head(n), n on the same grid
    dec_rows: np.ndarray        # d grid
    dec_ctx: np.ndarray         # mean context grid
    dec_attn_s: np.ndarray      # attention work (d, mean context), kernel fixed time removed
    chunk: np.ndarray           # c grid
    chunk_ctx: np.ndarray       # s0 grid
    chunk_attn_s: np.ndarray    # attention work (c, s0), kernel fixed time removed
    attn_fixed_s: float         # per-kernel fixed time of one attention pass
    cpu_s: float                # CPU issue time of a graphed step (kernels x launch + graph launch)
    eager_cpu_s: float          # CPU issue time of a step run eagerly (kernels x eager launch)
    graphed_prompt_rows: float  # a step with prompt chunks is graphed up to this many token rows
    graphed_decode_rows: float | None  # a decode-only step is graphed up to this many rows
                                       # over all dp ranks (None: all)
    overhead_s: float           # engine CPU overhead per step
    pp: int
    engine: object              # EngineProfile: overlap rule of the host work (host_step_s)
    host_seq_s: float           # host work per running sequence (per dp rank's scheduler)
    hop: tuple                  # (pp - 1) hand-off: (seconds per row, fixed seconds)
    prompt_issue_s: float = 0.0  # eager prompt steps' host time beyond the kernel count
                                 # (core/host_cost.prompt_issue_s)
    piecewise_s: float = 0.0     # a graphed prompt step's eager attention, paid in series
                                 # (core/host_cost.piecewise_prompt_s)
    dp: int = 1                  # attention data-parallel ranks (module docstring)
    routed_s: np.ndarray | None = None  # the routed experts' part of body_s (dp > 1), on rows

    def body(self, M):
        return np.interp(M, self.rows, self.body_s)

    def head(self, n):
        return np.interp(n, self.rows, self.head_s)

    def dec_attn(self, d, mean_ctx):
        return _bilinear(self.dec_rows, self.dec_ctx, self.dec_attn_s, d, mean_ctx)

    def chunk_attn(self, c, s0):
        return _bilinear(self.chunk, self.chunk_ctx, self.chunk_attn_s, c, s0)

    def step_s(self, d, sum_ctx, chunks=(), chunk_ctx=(), finishing: int = 0) -> float:
        """One step: d decode rows over sum_ctx cached tokens, prompt chunks of sizes
        `chunks` over `chunk_ctx` cached tokens, `finishing` chunks ending a prompt."""
        seqs = d + len(chunks)
        m = float(min(max(seqs, 1), self.pp))
        if chunks:
            tot, big = float(sum(chunks)), float(max(chunks))
        # the heaviest micro-batch sets the pace: a chunk is never cut across micro-batches
        M = d / m + (max(tot / m, big) if chunks else 0.0)
        gpu = _interp1(self._rows, self._body, M) + _interp1(self._rows, self._head, (d + finishing) / m)
        if chunks and self.dp > 1:   # the busiest DP rank's own ops (module docstring)
            busy = d / m + max(tot / m, self.dp * big)
            gpu += (_interp1(self._rows, self._local, busy)
                    - _interp1(self._rows, self._local, M))
        gpu += self.attn_fixed_s
        if d:
            gpu += _bilinear1(self._drows, self._dctx, self._dattn, d / m, sum_ctx / d)
        if len(chunks) > 8:   # chunk_attn's operations, one chunk at a time on floats
            each = [_bilinear_pt(self._chunk, self._cctx, self._cattn, float(c), float(s0))
                    for c, s0 in zip(chunks, chunk_ctx)]
        else:
            each = [_bilinear1(self._chunk, self._cctx, self._cattn, float(c), float(s0))
                    for c, s0 in zip(chunks, chunk_ctx)]
        if each:   # the heaviest micro-batch (as for M) on the busiest DP rank
            gpu += max(sum(each) / m, self.dp * max(each))
        gpu += self.hop[0] * M + self.hop[1]
        eager = (d + sum(chunks) > self.graphed_prompt_rows if chunks
                 else self.graphed_decode_rows is not None and d > self.graphed_decode_rows)
        cpu = (self.eager_cpu_s + (self.prompt_issue_s if chunks else 0.0)) if eager else self.cpu_s
        series = bool(eager and chunks)
        if chunks and self.piecewise_s and not eager and piecewise_step(True, max(chunks)):
            cpu, series = cpu + self.piecewise_s, True
        return host_step_s(self.engine, float(gpu), cpu, seqs * self.host_seq_s, eager=series)

    def __post_init__(self):
        # python-list copies for the scalar path (bisect on lists beats numpy on scalars)
        for name, arr in (("_rows", self.rows), ("_body", self.body_s), ("_head", self.head_s),
                          ("_drows", self.dec_rows), ("_dctx", self.dec_ctx),
                          ("_chunk", self.chunk), ("_cctx", self.chunk_ctx)):
            object.__setattr__(self, name, [float(x) for x in arr])
        object.__setattr__(self, "_dattn", self.dec_attn_s.tolist())
        routed = self.routed_s if self.routed_s is not None else np.zeros_like(self.body_s)
        object.__setattr__(self, "_local", (self.body_s - routed).tolist())
        object.__setattr__(self, "_cattn", self.chunk_attn_s.tolist())

    def decode_run_s(self, d: int, mean_ctx0: float, k: int) -> np.ndarray:
        """Durations of k decode-only steps of d rows whose contexts grow by one per step."""
        m = float(min(d, self.pp))
        i, fx = _cell(self._drows, d / m)       # fixed d: interpolate along the context only
        if k == 1:   # most runs under KV thrash: the same operations below, on floats
            one = self._decode_step_s(d, m, i, fx, float(mean_ctx0))
            if math.isfinite(one):
                return np.array([one])
        ctx = mean_ctx0 + np.arange(k, dtype=float)
        row = (1 - fx) * self.dec_attn_s[i] + fx * self.dec_attn_s[i + 1]
        gpu = self._decode_const_s(d, m) + np.interp(ctx, self.dec_ctx, row)
        return host_step_s(self.engine, gpu, self._decode_cpu_s(d), d * self.host_seq_s)

    def _decode_const_s(self, d: int, m: float) -> float:
        """A decode step's GPU time apart from its context-dependent attention: weights,
        head, fixed attention cost and the pipeline hops (both decode paths use it)."""
        return (_interp1(self._rows, self._body, d / m) + _interp1(self._rows, self._head, d / m)
                + self.attn_fixed_s + self.hop[0] * d / m + self.hop[1])

    def _decode_cpu_s(self, d: int) -> float:
        """Host time of a decode step of d rows: eager above the largest graphed batch."""
        eager = self.graphed_decode_rows is not None and d > self.graphed_decode_rows
        return self.eager_cpu_s if eager else self.cpu_s

    def _decode_step_s(self, d: int, m: float, i: int, fx: float, x: float) -> float:
        """decode_run_s for one step: np.interp's branches and arithmetic at one point
        (numpy _core/src/multiarray/compiled_base.c, arr_interp) on the row it would build,
        so the same float to the bit (tests/test_decode_epoch.py)."""
        xp, a, b = self._dctx, self._dattn[i], self._dattn[i + 1]
        if x > xp[-1] or x < xp[0]:
            j = len(xp) - 1 if x > xp[-1] else 0
            attn = (1 - fx) * a[j] + fx * b[j]
        else:
            j = bisect_right(xp, x) - 1
            y0 = (1 - fx) * a[j] + fx * b[j]
            if j == len(xp) - 1 or xp[j] == x:
                attn = y0
            else:
                y1 = (1 - fx) * a[j + 1] + fx * b[j + 1]
                attn = (y1 - y0) / (xp[j + 1] - xp[j]) * (x - xp[j]) + y0
        return float(host_step_s(self.engine, float(self._decode_const_s(d, m) + attn),
                                 self._decode_cpu_s(d), d * self.host_seq_s))


def _cell(grid: list, x: float) -> tuple[int, float]:
    """Index i and fraction f of x in [grid[i], grid[i+1]], clamped at the edges."""
    if x <= grid[0]:
        return 0, 0.0
    if x >= grid[-1]:
        return len(grid) - 2, 1.0
    i = bisect_right(grid, x) - 1
    return i, (x - grid[i]) / (grid[i + 1] - grid[i])


def _interp1(xg: list, yg: list, x: float) -> float:
    i, f = _cell(xg, x)
    return yg[i] + f * (yg[i + 1] - yg[i])


def _bilinear1(xg: list, yg: list, z: list, x: float, y: float) -> float:
    """_bilinear for one point on python lists."""
    i, fx = _cell(xg, x)
    j, fy = _cell(yg, y)
    a, b = z[i], z[i + 1]
    return ((1 - fx) * ((1 - fy) * a[j] + fy * a[j + 1])
            + fx * ((1 - fy) * b[j] + fy * b[j + 1]))


def _bilinear_pt(xg: list, yg: list, z: list, x: float, y: float) -> float:
    """_bilinear for one point on python lists: its operations in its order, so the same
    float to the bit (numpy's elementwise ops round as python's; tests/test_decode_epoch.py)."""
    x = min(max(x, xg[0]), xg[-1])
    y = min(max(y, yg[0]), yg[-1])
    i = min(max(bisect_right(xg, x) - 1, 0), len(xg) - 2)
    j = min(max(bisect_right(yg, y) - 1, 0), len(yg) - 2)
    fx = (x - xg[i]) / (xg[i + 1] - xg[i])
    fy = (y - yg[j]) / (yg[j + 1] - yg[j])
    a, b = z[i], z[i + 1]
    return ((1 - fx) * (1 - fy) * a[j] + fx * (1 - fy) * b[j]
            + (1 - fx) * fy * a[j + 1] + fx * fy * b[j + 1])


def _bilinear(xg, yg, z, x, y):
    """Bilinear interpolation on a rectangular grid, clamped at its edges."""
    x = np.clip(np.asarray(x, dtype=float), xg[0], xg[-1])
    y = np.clip(np.asarray(y, dtype=float), yg[0], yg[-1])
    i = np.clip(np.searchsorted(xg, x, side="right") - 1, 0, len(xg) - 2)
    j = np.clip(np.searchsorted(yg, y, side="right") - 1, 0, len(yg) - 2)
    fx = (x - xg[i]) / (xg[i + 1] - xg[i])
    fy = (y - yg[j]) / (yg[j + 1] - yg[j])
    return ((1 - fx) * (1 - fy) * z[i, j] + fx * (1 - fy) * z[i + 1, j]
            + (1 - fx) * fy * z[i, j + 1] + fx * fy * z[i + 1, j + 1])


def _graphed_decode_rows(sc: Scenario) -> float | None:
    """The largest graphed decode step in the table's rows (d counts all dp ranks' rows)."""
    bs = sc.engine.graph_max_batch(sc.hw.memory_bytes, sc.dep.tp)
    return None if bs is None or not sc.engine.eager_launch_s else float(bs * sc.dep.dp)


def build(sc: Scenario, *, max_rows: int, max_seqs: int, max_chunk: int,
          max_context: int) -> StepCost:
    """Tables for steps of up to max_rows token rows, max_seqs decode rows, prompt chunks of
    up to max_chunk tokens and contexts up to max_context, from ONE step_time call."""
    rows = _rows_grid(max_rows, ROW_POINTS)
    d = _rows_grid(max_seqs, ROW_POINTS // 2)
    dctx = np.linspace(0.0, max(max_context, 1), CONTEXT_POINTS)
    c = _rows_grid(max_chunk, CHUNK_POINTS)
    cctx = np.linspace(0.0, max(max_context, 1), CONTEXT_POINTS)
    D, DC = np.meshgrid(d, dctx, indexing="ij")
    C, CC = np.meshgrid(c, cctx, indexing="ij")
    parts = [  # (B, T, S) per segment: body at (1, M, 0), head at (n, 1, 0), attention grids
        (np.ones_like(rows), rows, np.zeros_like(rows)),
        (rows, np.ones_like(rows), np.zeros_like(rows)),
        (D.ravel(), np.ones(D.size), DC.ravel()),
        (np.ones(C.size), C.ravel(), CC.ravel()),
    ]
    B = np.concatenate([p[0] for p in parts])
    T = np.concatenate([p[1] for p in parts])
    S = np.concatenate([p[2] for p in parts])
    prompt = np.arange(B.size) >= B.size - C.size     # the chunk grid: prompt attention
    est = step_time(sc.model, sc.hw, sc.precision, sc.engine, sc.eff, B, T, S, dep=sc.dep,
                    attention=sc.attention, prefill=prompt)
    n = B.size
    body = np.zeros(n)
    routed = np.zeros(n)
    head = np.zeros(n)
    attn = np.zeros(n)
    fixed = 0.0
    for op in est.ops:
        t = np.broadcast_to(np.asarray(op.time_s, dtype=float), (n,))
        if op.kind == "attention":
            work = np.broadcast_to(np.maximum(np.asarray(op.compute_s, dtype=float),
                                              np.asarray(op.memory_s, dtype=float)), (n,))
            attn = attn + work
            fixed += float(np.max(t - work))
        elif op.name in HEAD_OPS:
            head = head + t
        else:
            body = body + t
            if op.name in ROUTED_OPS:
                routed = routed + t
    a, b = rows.size, 2 * rows.size
    kernels = float(np.max(est.kernels))
    cpu = float(issue_s(sc.engine, kernels))            # a graphed step (the grid's decode
    eager_cpu = issue_s(sc.engine, kernels, np.inf)     # rows may pass the graph size)
    if sc.dep.pp > 1:
        per_row = float(p2p_s(sc.hw, sc.eff, sc.dep, 1.0, sc.model) - p2p_s(sc.hw, sc.eff, sc.dep, 0.0, sc.model))
        hop = (per_row, float(p2p_s(sc.hw, sc.eff, sc.dep, 0.0, sc.model)))
    else:
        hop = (0.0, 0.0)
    return StepCost(
        rows=rows, body_s=body[:a], head_s=head[a:b], dec_rows=d, dec_ctx=dctx,
        dec_attn_s=attn[b:b + D.size].reshape(D.shape), chunk=c, chunk_ctx=cctx,
        chunk_attn_s=attn[b + D.size:].reshape(C.shape), attn_fixed_s=fixed, cpu_s=cpu, eager_cpu_s=float(eager_cpu),
        graphed_prompt_rows=float(sc.engine.prefill_graph_max_tokens),
        graphed_decode_rows=_graphed_decode_rows(sc),
        overhead_s=sc.engine.cpu_overhead_per_step_s, pp=sc.dep.pp, hop=hop, engine=sc.engine,
        host_seq_s=sc.engine.host_per_seq_s / sc.dep.dp,
        prompt_issue_s=prompt_issue_s(sc.model, sc.engine, sc.attention or sc.engine.attention),
        piecewise_s=piecewise_prompt_s(sc.model, sc.engine),
        dp=sc.dep.dp, routed_s=routed[:a] if sc.dep.dp > 1 else None)
