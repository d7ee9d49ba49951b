"""SGLang's --scheduler-recv-interval in disaggregated serving (serving/disagg_report._recv_pools)
and the validation recipe that sets it (analysis/validation/serving_recipe.py)."""

from __future__ import annotations

import pytest

from perfmodel import api
from perfmodel.analysis.validation.serving_recipe import (
    INFERENCEMAX_SGLANG_DISAGG_RECV_INTERVAL, recipe_for)
from perfmodel.core.errors import PerfModelError

MODEL, GPU = "llama-3.1-8b", "h100-sxm"
ONE = dict(workers=1, tp=1)
IMAX = "db-dump/2026-04-27 measured 2026-02-09 image lmsysorg/sglang:v0.5.8.post1-cu130"
# A long request A keeps the decode worker busy; B arrives 0.5 s later, mid-decode.
TRACE = [(0.0, 512, 400), (0.5, 512, 50)]


def _run(n, trace=TRACE):
    return api.serve_disagg(MODEL, GPU, engine="sglang", prefill=ONE, decode=ONE, trace=trace,
                            recv_interval_steps=n)


def test_a_busy_decode_worker_admits_after_at_most_n_decode_steps():
    # SGLang SchedulerRecvSkipper (managers/scheduler_recv_skipper.py): a decode step adds 1 to
    # the counter, requests are polled when it reaches n. B arrives while A decodes, so its
    # admission waits between 0 and n decode steps; A arrived at an idle worker and waits none.
    # B's arrival is moved over one poll period (10 steps of ~7 ms): a single arrival can land
    # on a poll and wait nothing, the mean over the phases cannot.
    n = 10
    delays = []
    for offset in (0.0, 0.02, 0.04, 0.06):
        trace = [TRACE[0], (TRACE[1][0] + offset, *TRACE[1][1:])]
        base, slow = _run(None, trace), _run(n, trace)
        d_mean = slow.points[0].ttft_mean_s - base.points[0].ttft_mean_s
        step = base.points[0].itl_p50_s              # one decode step of A (batch 1-2)
        assert d_mean >= 0.0
        # mean of A (+0) and B (+at most n steps); the batch of two steps a little slower
        assert d_mean <= n * step * 1.25 / 2
        delays.append(d_mean)
    assert sum(delays) > 0.0                          # B waited at least a little
    assert "--scheduler-recv-interval 10 on the prefill and decode workers" in " ".join(slow.assumptions)


def test_attention_dp_workers_poll_every_step():
    # SchedulerRecvSkipper asserts `not enable_dp_attention`: a DP-attention decode worker
    # takes no interval, so the prediction equals the one without the flag
    dp2 = dict(workers=1, tp=1, dp=2)
    base = api.serve_disagg(MODEL, GPU, engine="sglang", prefill=dp2, decode=dp2, trace=TRACE)
    withn = api.serve_disagg(MODEL, GPU, engine="sglang", prefill=dp2, decode=dp2, trace=TRACE,
                             recv_interval_steps=10)
    assert withn.points[0].ttft_mean_s == base.points[0].ttft_mean_s
    assert withn.points[0].tpot_p50_s == base.points[0].tpot_p50_s
    assert "not applied: both pools run attention DP" in " ".join(withn.assumptions)


@pytest.mark.parametrize("bad", [0, -3, 10_001, 2.5, True, "10"])
def test_bad_interval_is_a_one_line_error(bad):
    with pytest.raises(PerfModelError, match="recv_interval_steps") as exc:
        _run(bad)
    assert "\n" not in str(exc.value)


def test_the_recipe_sets_10_on_blackwell_sglang_disagg_rows_only():
    # dynamo slurm_jobs GB200 SGLang worker scripts: --scheduler-recv-interval 10 on both roles
    assert INFERENCEMAX_SGLANG_DISAGG_RECV_INTERVAL == 10
    for gpu in ("b200", "gb200", "gb300"):
        r = recipe_for(IMAX, "sglang", 1024, concurrency=512, gpu=gpu, disagg=True)
        assert r.recv_interval_steps == 10 and r.range_ratio == 0.8
    assert recipe_for(IMAX, "sglang", 1024, concurrency=512, gpu="h200-sxm",
                      disagg=True).recv_interval_steps is None
    assert recipe_for(IMAX, "trtllm", 1024, concurrency=512, gpu="gb200",
                      disagg=True).recv_interval_steps is None
    # aggregated rows keep their rule: 30 from C=16 on B200, nothing on GB200
    assert recipe_for(IMAX, "sglang", 1024, concurrency=64, gpu="b200").recv_interval_steps == 30
    assert recipe_for(IMAX, "sglang", 1024, concurrency=64, gpu="gb200").recv_interval_steps is None
