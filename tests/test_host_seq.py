"""Host work per running sequence (EngineProfile.host_per_seq_s, host_overlap, issue 13):
one rule in core/roofline.host_step_s, seen the same by step_time, the serving step cost and
the steady-state curve.

Golden numbers: vLLM V1, Llama-2-7B at batch 256 spent 5-6 ms between two decode steps in its
Python scheduler (vllm-project/vllm#10634): the presets' 20 us per sequence x 256 = 5.12 ms."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from perfmodel.core.engines import ENGINES, PYTHON_SCHEDULER_PER_SEQ_S
from perfmodel.core.resolve import resolve
from perfmodel.core.roofline import step_time
from perfmodel.serving import stepcost

SC, _, _ = resolve("llama-3.1-8b", "h100-sxm", weights="fp8", kv="fp8", engine="vllm")


def _sc(**engine):
    return replace(SC, engine=SC.engine.model_copy(update=engine))


def _step(sc, B, S=1000.0):
    est = step_time(sc.model, sc.hw, sc.precision, sc.engine, sc.eff, B, 1.0, S, dep=sc.dep,
                    attention=sc.attention)
    return float(np.asarray(est.time_s)), est


def test_python_schedulers_carry_the_vllm_measurement():
    # vllm#10634: ~5.5 ms over 256 sequences less the 0.6 ms fixed overhead -> ~19-20 us
    assert PYTHON_SCHEDULER_PER_SEQ_S == pytest.approx((5.5e-3 - 0.6e-3) / 256, rel=0.05)
    for name in ("vllm", "sglang", "trtllm"):
        assert ENGINES[name].host_per_seq_s == PYTHON_SCHEDULER_PER_SEQ_S
        assert ENGINES[name].host_overlap       # async / overlap schedulers, on by default
    for name in ("hf-eager", "torch-eager", "torch-graph", "torch-compile", "llama-cpp"):
        assert ENGINES[name].host_per_seq_s == 0.0    # untouched: no source, no change


def test_in_series_adds_256_sequences_times_20_us():
    on, _ = _step(_sc(host_overlap=False), 256.0)
    off, _ = _step(_sc(host_per_seq_s=0.0), 256.0)
    assert on - off == pytest.approx(256 * 20e-6, rel=1e-9)      # 5.12 ms


def test_overlapped_host_work_costs_only_beyond_the_gpu_step():
    # overlapped: max(GPU, issue + 256 x 20 us) + the fixed 0.6 ms (vLLM preset)
    t, est = _step(SC, 256.0)
    gpu = float(np.asarray(est.gpu_s))
    host = 256 * 20e-6
    issue = float(np.asarray(est.cpu_s)) - host - SC.engine.cpu_overhead_per_step_s
    assert t == pytest.approx(max(gpu, issue + host) + SC.engine.cpu_overhead_per_step_s)
    # a host cost ten times larger must then set the pace: 51.2 ms + 0.6 ms
    big, _ = _step(_sc(host_per_seq_s=200e-6), 256.0)
    assert big == pytest.approx(issue + 256 * 200e-6 + 0.6e-3, rel=1e-9)
    assert big > gpu + 0.6e-3


def test_serving_step_cost_uses_the_same_rule():
    for sc in (_sc(host_overlap=False), _sc(host_per_seq_s=200e-6)):
        cost = stepcost.build(sc, max_rows=512, max_seqs=256, max_chunk=512, max_context=2048)
        ref, _ = _step(sc, 256.0, S=1000.0)
        assert cost.step_s(256, 256 * 1000.0) == pytest.approx(ref, rel=0.01)
        run = cost.decode_run_s(256, 1000.0, 3)
        assert run[0] == pytest.approx(ref, rel=0.01)


@given(b=st.floats(1.0, 2048.0), extra=st.floats(1.0, 512.0), s=st.floats(0.0, 8192.0),
       engine=st.sampled_from(["vllm", "sglang", "trtllm"]), overlap=st.booleans())
def test_step_time_non_decreasing_in_sequences(b, extra, s, engine, overlap):
    sc = replace(SC, engine=ENGINES[engine].model_copy(update={"host_overlap": overlap}))
    lo, _ = _step(sc, b, s)
    hi, _ = _step(sc, b + extra, s)
    assert np.isfinite(lo) and np.isfinite(hi)
    assert hi >= lo * (1 - 1e-12)


@given(s=st.floats(0.0, 8192.0), engine=st.sampled_from(["vllm", "sglang", "trtllm"]),
       overlap=st.booleans())
def test_one_sequence_changes_by_at_most_one_host_cost(s, engine, overlap):
    e = ENGINES[engine].model_copy(update={"host_overlap": overlap})
    with_host, _ = _step(replace(SC, engine=e), 1.0, s)
    without, _ = _step(replace(SC, engine=e.model_copy(update={"host_per_seq_s": 0.0})), 1.0, s)
    assert 0.0 <= with_host - without <= e.host_per_seq_s * (1 + 1e-9)


def test_attention_dp_ranks_each_schedule_their_share():
    # dp=2: each rank's own scheduler handles 128 of the 256 sequences, in parallel
    dp2 = replace(SC, dep=SC.dep.model_copy(update={"dp": 2}))
    on, _ = _step(replace(dp2, engine=dp2.engine.model_copy(update={"host_overlap": False})), 256.0)
    off, _ = _step(replace(dp2, engine=dp2.engine.model_copy(update={"host_per_seq_s": 0.0})), 256.0)
    assert on - off == pytest.approx(128 * 20e-6, rel=1e-9)      # 2.56 ms
    sc = replace(dp2, engine=dp2.engine.model_copy(update={"host_overlap": False}))
    cost = stepcost.build(sc, max_rows=512, max_seqs=256, max_chunk=512, max_context=2048)
    assert cost.step_s(256, 256 * 1000.0) == pytest.approx(_step(sc, 256.0)[0], rel=0.01)
