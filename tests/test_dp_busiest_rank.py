"""Attention data parallelism in the step-cost surface (serving/stepcost.py, module docstring):
a prompt lives on one DP rank, so its own ops run there alone while the routed experts see
every rank's rows; the step runs at the busiest rank."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from perfmodel.api import make_query, resolve
from perfmodel.serving import stepcost

DP = 4
LOCAL_S_PER_ROW = 3e-6       # synthetic tables: one rank's own ops, s per table row
ROUTED_S_PER_ROW = 1e-6      # the routed experts' part, s per table row
CHUNK_ATTN_S = 2e-3          # one chunk's attention as tabulated (a 1/dp share of it)


@pytest.fixture(scope="module")
def tables():
    """A real dp4 x EP4 table with its costs replaced by linear ones and no host terms, so a
    step's time is its GPU work plus the engine's fixed per-step overhead."""
    q = make_query(model="minimax-m2.5", gpu="h100-sxm", tp=1, ep=DP, dp=DP, weights="fp8",
                   kv="fp8", engine="vllm", prompt_tokens=1024, output_tokens=16)
    sc, _, _ = resolve(q)
    c = stepcost.build(sc, max_rows=16384, max_seqs=16, max_chunk=4096, max_context=4096)
    assert c.dp == DP and c.routed_s is not None
    rows = c.rows
    synth = dict(body_s=(LOCAL_S_PER_ROW + ROUTED_S_PER_ROW) * rows,
                 routed_s=ROUTED_S_PER_ROW * rows, head_s=np.zeros_like(rows),
                 chunk_attn_s=np.full_like(c.chunk_attn_s, CHUNK_ATTN_S),
                 dec_attn_s=np.zeros_like(c.dec_attn_s), attn_fixed_s=0.0, cpu_s=0.0,
                 eager_cpu_s=0.0, prompt_issue_s=0.0, piecewise_s=0.0, host_seq_s=0.0)
    on = dataclasses.replace(c, **synth)
    spread = dataclasses.replace(c, **{**synth, "dp": 1, "routed_s": None})  # the old rule
    return on, spread


def test_a_lone_prompt_runs_its_own_ops_on_one_rank(tables):
    on, spread = tables
    c = 1000
    # hand calculation: spread evenly, the step costs body(c) + one chunk's tabulated
    # attention; on one rank its own ops cost local(DP x c) and its attention DP x the share
    extra = LOCAL_S_PER_ROW * (DP * c - c) + (DP - 1) * CHUNK_ATTN_S
    got = on.step_s(0, 0.0, [c], [0.0], 1) - spread.step_s(0, 0.0, [c], [0.0], 1)
    assert got == pytest.approx(extra, rel=1e-9)


def test_one_equal_prompt_per_rank_changes_nothing(tables):
    on, spread = tables
    chunks = [800] * DP
    assert on.step_s(3, 900.0, chunks, [0.0] * DP, DP) == pytest.approx(
        spread.step_s(3, 900.0, chunks, [0.0] * DP, DP), rel=1e-12)


def test_decode_only_steps_change_nothing(tables):
    on, spread = tables
    assert on.step_s(12, 12 * 500.0) == pytest.approx(spread.step_s(12, 12 * 500.0), rel=1e-12)


@pytest.mark.parametrize("chunks", [[100], [2000, 10], [900, 900, 50], [4000] * 2])
def test_never_cheaper_than_the_even_spread(tables, chunks):
    on, spread = tables
    z = [0.0] * len(chunks)
    assert on.step_s(2, 800.0, chunks, z, len(chunks)) >= spread.step_s(2, 800.0, chunks, z,
                                                                          len(chunks))
