"""Decode epochs (serving/decode_epoch.py) give the general loop's trace to the bit: the same
first-token and finish times, preemptions, timeline segments and pooled inter-token gaps,
on scheduler configurations chosen to preempt, recompute, admit, reserve and finish inside
epochs, and on random ones (hypothesis). The reference is the same scheduler with every iteration
run by its general loop (simulate(..., epochs=False)); a spy checks that the epochs did run,
so no comparison is vacuous."""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from perfmodel.core.errors import PerfModelError
from perfmodel.core.resolve import resolve
from perfmodel.serving import decode_epoch, scheduler, stepcost
from perfmodel.serving.scheduler import Policy, simulate
from perfmodel.serving.workload import Requests

SC, _, _ = resolve("llama-3.1-8b", "h100-sxm", weights="fp8", kv="fp8")
COST = stepcost.build(SC, max_rows=8192, max_seqs=128, max_chunk=4096, max_context=2048)


def _policy(**kw) -> Policy:
    base = dict(static=False, mixed=True, chunked=True, max_seqs=128, token_budget=2048,
                total_blocks=600, block_tokens=16, reserve_output=False, request_overhead_s=0.0)
    base.update(kw)
    return Policy(**base)


def _requests(n=240, prompt=300, output=200, conc: int | None = 64, rate_rps=None, ratio=1.0,
              hit=0.0, seed=0) -> Requests:
    rng = np.random.default_rng(seed)
    lo = lambda L: max(1, int(np.ceil(ratio * L)))                       # noqa: E731
    p = rng.integers(lo(prompt), prompt + 1, size=n).astype(float)
    o = rng.integers(lo(output), output + 1, size=n).astype(float)
    send = None
    if rate_rps is not None:
        gaps = rng.exponential(1.0 / rate_rps, size=n)
        send = np.cumsum(gaps) - gaps[0]
    cached = np.minimum(np.floor(hit * p), p - 1)
    return Requests(send_s=send, prompt_tokens=p, output_tokens=o, cached_tokens=cached,
                    concurrency=conc if rate_rps is None else None)


class _Spy:
    """Counts the scheduler iterations the decode epochs ran."""

    def __init__(self, monkeypatch):
        self.iterations = 0
        real = decode_epoch.decode_epoch

        def spy(sim):
            before = sim.budget.left
            real(sim)
            self.iterations += before - sim.budget.left
        monkeypatch.setattr(scheduler, "decode_epoch", spy)


def _pooled(tr) -> np.ndarray:
    """Inter-token gaps with their weights, sorted (the pooled percentiles' input)."""
    if not tr.itl_values:
        return np.zeros((0, 2))
    v = np.concatenate(tr.itl_values)
    w = np.concatenate([np.full(a.size, x, float) for a, x in zip(tr.itl_values, tr.itl_weights)])
    order = np.lexsort((w, v))
    return np.column_stack([v[order], w[order]])


def _assert_same(a, b) -> None:
    for name in ("first_s", "finish_s", "send_s"):
        assert np.array_equal(getattr(a, name), getattr(b, name), equal_nan=True), name
    assert (a.preemptions, a.max_running) == (b.preemptions, b.max_running)
    assert a.segments == b.segments
    assert np.array_equal(_pooled(a), _pooled(b))


def _both(req, pol):
    """(trace or error text) from the epochs and from the general loop alone."""
    out = []
    for epochs in (True, False):
        try:
            out.append(simulate(COST, req, pol, epochs=epochs))
        except PerfModelError as exc:
            out.append(str(exc))
    return out


CASES = {
    # pool of 600 x 16 tokens = 19 of the 64 requests' 500 tokens: preemption by recompute
    "vllm-like, KV thrash": (_requests(), _policy()),
    "sglang-like prompt-first, KV thrash": (_requests(), _policy(mixed=False)),
    "no chunked prefill, KV thrash": (_requests(), _policy(chunked=False)),
    "random lengths and cached prefixes": (_requests(ratio=0.3, hit=0.4, seed=3),
                                           _policy(total_blocks=500)),
    "open loop over capacity": (_requests(rate_rps=400.0, conc=None, seed=1), _policy()),
    "request overhead, sequences bind": (_requests(seed=2),
                                         _policy(max_seqs=24, total_blocks=5000,
                                                 request_overhead_s=0.004)),
    "pages of one token": (_requests(n=120, seed=4), _policy(block_tokens=1, total_blocks=9000)),
    # TensorRT-LLM GUARANTEED_NO_EVICT: admitted only when the whole prompt + output fits
    "trtllm-like output reservation": (_requests(ratio=0.5, seed=5), _policy(reserve_output=True)),
    # overlap scheduler (TensorRT-LLM's, vLLM's async scheduling): admission one step late
    "overlap, open loop over capacity": (_requests(rate_rps=400.0, conc=None, seed=1),
                                         _policy(overlap=True)),
    "overlap, KV thrash": (_requests(), _policy(overlap=True)),
    "overlap, request overhead, sequences bind": (_requests(seed=2),
                                                  _policy(max_seqs=24, total_blocks=5000,
                                                          request_overhead_s=0.004,
                                                          overlap=True)),
    # SGLang's event_loop_overlap: prompt-only steps, prefill first, admission one step late
    "sglang-like prompt-first, overlap, KV thrash": (_requests(), _policy(mixed=False,
                                                                         overlap=True)),
}


@pytest.mark.parametrize("name", list(CASES))
def test_epochs_give_the_general_loops_trace(name, monkeypatch):
    req, pol = CASES[name]
    spy = _Spy(monkeypatch)
    fast, ref = _both(req, pol)
    assert not isinstance(fast, str), fast
    _assert_same(fast, ref)
    assert spy.iterations > 0                      # the epochs ran (not a vacuous comparison)
    if "thrash" in name:
        assert fast.preemptions > 0


@pytest.mark.parametrize("case", ["vllm-like, KV thrash", "overlap, KV thrash"])
def test_most_thrash_iterations_run_in_epochs(case, monkeypatch):
    """Under KV thrash the epochs take most iterations (the point of them), with the overlap
    scheduler's one-step-late admission too."""
    req, pol = CASES[case]
    spy = _Spy(monkeypatch)
    budget = scheduler.StepBudget()
    simulate(COST, req, pol, budget)
    assert spy.iterations > 0.5 * (budget.cap - budget.left)


def test_a_policy_parameter_the_epochs_do_not_model_leaves_them_off(monkeypatch):
    """A scheduler rule added to Policy (and _Sim) but not to the epochs must not be skipped
    silently: the epochs stand aside and the general loop runs every iteration."""
    @dataclass(frozen=True)
    class NewRulePolicy(Policy):
        admit_after_preempt: bool = False

    req, pol = CASES["vllm-like, KV thrash"]
    spy = _Spy(monkeypatch)
    tr = simulate(COST, req, NewRulePolicy(**{f.name: getattr(pol, f.name) for f in fields(pol)}))
    assert spy.iterations == 0 and tr.preemptions > 0


@given(mixed=st.booleans(), chunked=st.booleans(), max_seqs=st.integers(1, 80),
       token_budget=st.one_of(st.none(), st.integers(8, 3000)),
       blocks=st.integers(20, 3000), bs=st.sampled_from([1, 4, 16, 32]), reserve=st.booleans(),
       overhead=st.sampled_from([0.0, 0.002]), n=st.integers(1, 80),
       prompt=st.integers(1, 600), output=st.integers(1, 300), ratio=st.floats(0.1, 1.0),
       hit=st.floats(0.0, 0.9), conc=st.integers(1, 64),
       rate=st.one_of(st.none(), st.floats(1.0, 2000.0)), seed=st.integers(0, 50),
       overlap=st.booleans(), recv=st.sampled_from([1, 1, 3, 10]))
def test_random_schedules_match_the_general_loop(mixed, chunked, max_seqs, token_budget,
                                                 blocks, bs, reserve, overhead, n, prompt,
                                                 output, ratio, hit, conc, rate, seed, overlap,
                                                 recv):
    """Random policies, SGLang's (mixed=False, recv_interval_steps > 1, overlap) among them:
    with an interval the epochs stand aside and the general loop's two runs must agree."""
    pol = _policy(mixed=mixed, chunked=chunked, max_seqs=max_seqs, token_budget=token_budget,
                  total_blocks=blocks, block_tokens=bs, reserve_output=reserve,
                  request_overhead_s=overhead, overlap=overlap, recv_interval_steps=recv)
    req = _requests(n=n, prompt=prompt, output=output, conc=conc, rate_rps=rate,
                    ratio=ratio, hit=hit, seed=seed)
    fast, ref = _both(req, pol)
    if isinstance(ref, str) or isinstance(fast, str):
        assert fast == ref                         # the same clean error (a stall, a cap)
        return
    _assert_same(fast, ref)


def test_thrash_runs_one_step_decode_runs_on_floats(monkeypatch):
    """Under KV thrash most decode runs are one step long: the epoch prices them on floats
    (_Epoch._one_step, not _Sim._run_steps' arrays), and the traces above still match."""
    calls = []
    real = decode_epoch._Epoch._one_step
    monkeypatch.setattr(decode_epoch._Epoch, "_one_step",
                        lambda self, d, c: calls.append(d) or real(self, d, c))
    req, pol = CASES["vllm-like, KV thrash"]
    fast, ref = _both(req, pol)
    _assert_same(fast, ref)
    assert calls


def test_float_paths_give_numpys_values_to_the_bit():
    """The float paths both loops share give what the numpy expressions they replace give,
    bit for bit: a one-step decode run (np.interp over the interpolated row) against the
    same run's first step priced on arrays, and more than 8 prompt chunks' attention against
    chunk_attn (_bilinear) -- on grid points, between them and past both edges."""
    rng = np.random.default_rng(7)
    ctxs = COST._dctx + rng.uniform(-10.0, 2200.0, 60).tolist() + [0.5, 1024.0, 1e6]
    for d in (1, 2, 3, 7, 31, 64, 100, 128, 500):
        for x in ctxs:
            assert COST.decode_run_s(d, x, 1)[0] == COST.decode_run_s(d, x, 2)[0], (d, x)
    c = np.concatenate([COST.chunk, rng.uniform(-5.0, 4500.0, 500)])
    s0 = np.concatenate([COST.chunk_ctx[:1].repeat(COST.chunk.size), rng.uniform(-5.0, 2300.0, 500)])
    pts = [stepcost._bilinear_pt(COST._chunk, COST._cctx, COST._cattn, float(a), float(b))
           for a, b in zip(c, s0)]
    assert np.array_equal(COST.chunk_attn(c, s0), np.array(pts))


def test_numpy_sums_fewer_than_8_values_in_order():
    """_Epoch._step records a step's prompt tokens with sum() below 8 chunks: numpy's
    pairwise sum adds fewer than 8 values in order, so the same float (non-integers too)."""
    rng = np.random.default_rng(3)
    for n in range(1, 8):
        for _ in range(300):
            v = (rng.uniform(0, 3000, n) * rng.choice([1e-3, 1.0, 1e5], n)).tolist()
            assert float(np.sum(v)) == sum(v)
