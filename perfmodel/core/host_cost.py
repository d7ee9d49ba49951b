"""Host side of a step: the CPU time to issue its kernels (CUDA-graph replay, or eager issue
for prompt steps and decode batches past the captured graphs) and how it combines with the GPU
work and the per-sequence host work (host_step_s); the engine kernel count per op-list kernel
(_kernel_scale). core/roofline.step_time prices every step through these; they are re-exported
there."""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from perfmodel.core.ops import ops
from perfmodel.core.ops_linear import prefill_issue_s
from perfmodel.core.specs import Deployment, EngineProfile, HardwareSpec, ModelSpec, Precision


def _step_issue_s(engine: EngineProfile, hw: HardwareSpec, dep: Deployment, kernels, B, T,
                  prefill, prompt_extra_s: float = 0.0, piecewise_s: float = 0.0):
    """(issue_s, eager mask) of a step_time call: `prefill` (a bool, or a mask over the
    queries) marks the steps that carry prompt tokens (B x T rows); the others are decode
    steps of B/dp rows. `prompt_extra_s`: host time an eager prompt step spends beyond its
    kernels x eager_launch_s (core/ops_linear.prefill_issue_s); `piecewise_s`: the host time
    a graphed prompt step adds (piecewise_prompt_s)."""
    rows = np.asarray(B, dtype=float) * np.asarray(T, dtype=float)
    piecewise_s = np.where(piecewise_step(True, T), piecewise_s, 0.0)
    piecewise_s = float(piecewise_s) if piecewise_s.ndim == 0 else piecewise_s
    graphs = engine.graph_max_batch(hw.memory_bytes, dep.tp)
    dec_rows = np.asarray(B, dtype=float) / dep.dp
    decode = issue_s(engine, kernels, decode_rows=dec_rows, graph_max_batch=graphs)
    dec_eager = eager_step(engine, decode_rows=dec_rows, graph_max_batch=graphs)
    if isinstance(prefill, (bool, np.bool_)):
        if prefill:
            return (issue_s(engine, kernels, rows, eager_extra_s=prompt_extra_s,
                            graphed_extra_s=piecewise_s), eager_step(engine, rows))
        return decode, dec_eager
    mask = np.asarray(prefill, dtype=bool)
    prompt = issue_s(engine, kernels, rows, eager_extra_s=prompt_extra_s,
                     graphed_extra_s=piecewise_s)
    return (np.where(mask, prompt, decode),
            np.where(mask, eager_step(engine, rows), dec_eager))


def eager_step(engine: EngineProfile, prompt_rows=None, *, decode_rows=None,
               graph_max_batch: int | None = None):
    """Whether a graph engine runs the step eagerly (bool, or a mask): a step carrying
    `prompt_rows` token rows above its prefill_graph_max_tokens, or a decode step of
    `decode_rows` sequences per rank above its largest captured batch (`graph_max_batch`,
    None: all are captured). Engines without graphs for these steps (eager_launch_s 0) and
    eager engines (launch_s > 0, priced per kernel anyway) answer False."""
    if not _graph_engine(engine):
        return False
    if prompt_rows is not None:
        out = np.asarray(prompt_rows) > engine.prefill_graph_max_tokens
    elif decode_rows is not None and graph_max_batch is not None:
        out = np.asarray(decode_rows) > graph_max_batch
    else:
        return False
    return bool(out) if out.ndim == 0 else out


def issue_s(engine: EngineProfile, kernels, prompt_rows=None, *, decode_rows=None,
            graph_max_batch: int | None = None, eager_extra_s: float = 0.0,
            graphed_extra_s: float = 0.0):
    """CPU time to issue one step's kernels: kernels x launch_s plus one graph replay. A graph
    engine runs a step eagerly, kernels x eager_launch_s (+ `eager_extra_s`, the host time of
    launches the kernel count does not price: core/ops_linear.prefill_issue_s), when it
    carries `prompt_rows` token rows above its prefill_graph_max_tokens, or when it is a
    decode step of `decode_rows` sequences per rank above its largest captured batch
    (`graph_max_batch`, None: all). `graphed_extra_s`: what a graphed step adds beyond its
    replay (a piecewise prompt step's eager attention: piecewise_prompt_s)."""
    graphed = kernels * engine.launch_s + engine.graph_launch_s + graphed_extra_s
    eager = eager_step(engine, prompt_rows, decode_rows=decode_rows,
                       graph_max_batch=graph_max_batch)
    if eager is False:
        return graphed
    out = np.where(eager, kernels * engine.eager_launch_s + eager_extra_s, graphed)
    return float(out) if out.ndim == 0 else out


def host_step_s(engine: EngineProfile, gpu, issue, host, *, eager=False):
    """Step time from the GPU work, the kernel issue time and the per-sequence host work
    (`host` = running sequences x engine.host_per_seq_s): an engine that prepares step n+1
    and processes step n-1's tokens while the GPU runs step n (host_overlap) pays
    max(GPU, issue + host); one that does it between steps pays max(GPU, issue) + host.
    An `eager` prompt step (bool, or a mask: a step carrying prompt tokens that runs outside
    the CUDA graphs) of an engine without eager_issue_overlap pays its issue time in series
    with the GPU work, which then stands for GPU + issue (engines.py: SGLang, TensorRT-LLM and vLLM). The engine's fixed per-step overhead is added in
    every case. Python floats take the builtin max (the serving simulator prices every step
    through here)."""
    if eager is not False and not engine.eager_issue_overlap and _graph_engine(engine):
        if type(eager) is bool:
            gpu, issue = gpu + issue, 0.0 * issue
        else:
            gpu, issue = gpu + np.where(eager, issue, 0.0), np.where(eager, 0.0, issue)
    scalar = type(gpu) is float and type(issue) is float and type(host) is float
    big = max if scalar else np.maximum
    if engine.host_overlap:
        return big(gpu, issue + host) + engine.cpu_overhead_per_step_s
    return big(gpu, issue) + host + engine.cpu_overhead_per_step_s


def piecewise_prompt_s(m: ModelSpec, engine: EngineProfile) -> float:
    """Host time a prompt step within the captured sizes adds to its graph replay: the eager
    attention between the piecewise graphs, engine.piecewise_attention_s per layer (engines.py:
    vLLM). 0 for engines without piecewise graphs or without graphs."""
    if not _graph_engine(engine):
        return 0.0
    return m.num_layers * engine.piecewise_attention_s


def piecewise_step(prefill, new_tokens):
    """The prompt steps a piecewise-graph engine (vLLM) replays with its attention run eagerly:
    more than one new token per sequence (`new_tokens`: T of step_time, the largest chunk of
    the simulator's step); one token each is a uniform decode batch, a full graph."""
    return np.logical_and(prefill, np.asarray(new_tokens, dtype=float) > 1)


def prompt_series(engine: EngineProfile, eager, prefill, T):
    """The steps whose issue time host_step_s puts in series with the GPU work: prompt steps
    run eagerly, and, for an engine with piecewise prompt graphs, every piecewise_step."""
    out = np.logical_and(eager, prefill)
    if engine.piecewise_attention_s and _graph_engine(engine):
        out = np.logical_or(out, piecewise_step(prefill, T))
    return out


def _graph_engine(engine: EngineProfile) -> bool:
    """An engine that replays CUDA graphs and runs some steps eagerly (eager_step)."""
    return bool(engine.eager_launch_s) and not engine.launch_s


def _kernel_scale(m: ModelSpec, engine: EngineProfile, attention: str) -> float:
    """Engine kernels per op-list kernel: the engine's kernels_per_layer is what it launches
    for a dense (GQA/MHA, dense-MLP) layer, so the scale is taken on the model's dense twin
    (same layers, MoE and MLA removed) and the MoE/MLA ops' extra kernels (routing, permute,
    combine, latent norms) are counted at the same rate on the GPU side; an eager prompt
    step's issue counts them from the engine's code where it has eager_blocks
    (prompt_issue_s). A dense model's count is unchanged."""
    base = _dense_kernels(m, attention)
    return engine.kernels_per_layer * m.num_layers / base if base else 1.0


def prompt_issue_s(m: ModelSpec, engine: EngineProfile, attention: str) -> float:
    """Host time an eager prompt step spends beyond its op-list kernels x eager_launch_s:
    the chunked linear-attention path (core/ops_linear.prefill_issue_s) and the MLA/MoE
    blocks' sourced launches (eager_block_extra_kernels). 0 for engines that issue no step
    eagerly."""
    if not engine.eager_launch_s:
        return 0.0
    extra = eager_block_extra_kernels(m, engine, attention)
    return prefill_issue_s(m) + extra * engine.eager_launch_s


@lru_cache(maxsize=256)
def eager_block_extra_kernels(m: ModelSpec, engine: EngineProfile, attention: str) -> float:
    """Kernels an eager prompt step issues for the model's MLA and MoE blocks beyond what the
    op list x _kernel_scale counts for them: the engine's sourced block counts
    (core/eager_kernels.py), in its kernels_per_layer units, minus the op list's MoE/MLA
    extras at the dense rate. 0 without engine.eager_blocks or MoE/MLA layers."""
    b = engine.eager_blocks
    if b is None or (m.moe is None and m.mla is None):
        return 0.0
    sourced = 0.0
    if m.moe is not None:
        gated = m.moe.shared_expert_gate and m.moe.num_shared_experts
        moe = (b.moe + m.moe.num_shared_experts * b.shared_expert
               + (b.shared_expert_gate if gated else 0.0))
        sourced += m.num_moe_layers * (moe - b.mlp)
    if m.mla is not None:
        sourced += m.num_layers * (b.mla_attention - b.attention)
    sourced *= engine.kernels_per_layer / (b.attention + b.mlp)
    plain = m.model_copy(update={"moe": None, "mla": None})
    priced = _kernel_scale(m, engine, attention) * (_op_kernels(m, attention)
                                                    - _op_kernels(plain, attention))
    return sourced - priced


@lru_cache(maxsize=256)
def _dense_kernels(m: ModelSpec, attention: str) -> float:
    """Per-layer kernels of the op list of the model's dense twin, summed over its layers."""
    return _op_kernels(_dense_twin(m), attention)


@lru_cache(maxsize=256)
def _op_kernels(m: ModelSpec, attention: str) -> float:
    """Per-layer kernels of the model's op list, summed over its layers."""
    per_layer = [op for op in ops(m, Precision.of("bf16"), 1.0, 1.0, 0.0, attention=attention)
                 if op.per_layer]
    return sum(float(np.max(op.cost.kernels)) for op in per_layer)


def _dense_twin(m: ModelSpec) -> ModelSpec:
    """The same layer count with plain softmax attention and a dense MLP (only its kernel
    count is read): no MoE, MLA, linear-attention, sparse-attention, gated output or
    cross-head q/k norm."""
    return m.model_copy(update={"moe": None, "mla": None, "linear_attention": None,
                                "sparse_attention": None, "attention_output_gate": False,
                                "qk_norm_across_heads": False})
