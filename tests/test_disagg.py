"""Disaggregated prefill/decode serving (perfmodel/serving/disagg.py, api.serve_disagg, CLI)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from perfmodel import api
from perfmodel.cli import main as cli_main
from perfmodel.core.errors import PerfModelError
from perfmodel.core.hardware import list_gpus
from perfmodel.core.resolve import resolve
from perfmodel.serving.disagg import PoolLayout, _pool
from perfmodel.serving.disagg_transfer import transfer_bytes_per_gpu

MODEL, GPU = "llama-3.1-8b", "h100-sxm"
ONE = dict(workers=1, tp=1)


def test_kv_bytes_of_one_request_by_hand():
    # Llama-3.1-8B config.json: 32 layers, 8 KV heads, head_dim 128; bf16 = 2 bytes
    sc, _, _ = resolve(MODEL, GPU)
    assert transfer_bytes_per_gpu(sc, 512) == pytest.approx(2 * 32 * 8 * 128 * 2 * 512)


def _hand_ttft_and_step(prompt: int):
    """Prefill of one prompt on an idle worker + the KV transfer over NVLink, and the decode
    worker's first step (the 1-token chunk over `prompt` cached tokens), from the step costs."""
    sc, _, _ = resolve(MODEL, GPU)
    wl_pool, _, _ = _pool(sc, PoolLayout(**ONE), None, prompt=prompt, output=1, share=2,
                          overhead=True)
    dc_pool, _, _ = _pool(sc, PoolLayout(**ONE), None, prompt=prompt + 1, output=1, share=2,
                          overhead=False)
    prefill_s = wl_pool.cost.step_s(0, 0.0, [prompt], [0.0], 1)
    link = sc.hw.intra_node_link                     # 2 GPUs: one NVLink domain
    xfer_s = link.latency_s + 2 * 32 * 8 * 128 * 2 * prompt / (link.bandwidth_bytes_per_s
                                                                * sc.eff.link)
    ttft = sc.engine.per_request_overhead_s + prefill_s + xfer_s
    return ttft, xfer_s, dc_pool.cost.step_s(0, 0.0, [1], [float(prompt)], 1)


def test_two_requests_apart_ttft_and_tpot_by_hand():
    # O = 3: the decode worker's first step (the 1-token chunk over 512 cached tokens) ends
    # with the client's first token; its second step (one decode row at context 513) is the
    # one inter-token gap left, spread over O - 1 = 2 (api.serve's TPOT definition)
    ttft, _, first_step = _hand_ttft_and_step(512)
    sc, _, _ = resolve(MODEL, GPU)
    dc_pool, _, _ = _pool(sc, PoolLayout(**ONE), None, prompt=513, output=2, share=2,
                          overhead=False)
    second_step = dc_pool.cost.step_s(1, 513.0)
    r = api.serve_disagg(MODEL, GPU, prefill=ONE, decode=ONE, trace=[(0.0, 512, 3), (10.0, 512, 3)])
    p = r.points[0]
    assert r.kv_link.startswith("scale-up")
    assert p.ttft_p50_s == pytest.approx(ttft + first_step, rel=1e-6)
    assert p.tpot_p50_s == pytest.approx(second_step / 2, rel=1e-6)
    assert p.e2e_p50_s == pytest.approx(ttft + first_step + second_step, rel=1e-6)


def test_two_requests_together_share_the_link():
    # both prompts run in one prefill step; the second transfer waits for the first (output 1:
    # the first token is the prefill's, nothing runs on the decode worker)
    sc, _, _ = resolve(MODEL, GPU)
    _, xfer_s, _ = _hand_ttft_and_step(512)
    pf, _, _ = _pool(sc, PoolLayout(**ONE), None, prompt=512, output=1, share=2, overhead=True)
    both = pf.cost.step_s(0, 0.0, [512, 512], [0.0, 0.0], 2)
    first = sc.engine.per_request_overhead_s + both + xfer_s
    r = api.serve_disagg(MODEL, GPU, prefill=ONE, decode=ONE, trace=[(0.0, 512, 1), (0.0, 512, 1)])
    p = r.points[0]
    assert p.ttft_p50_s == pytest.approx(first + 0.5 * xfer_s, rel=1e-6)   # mean of the two
    assert p.ttft_p90_s == pytest.approx(first + 0.9 * xfer_s, rel=1e-6)


def test_layerwise_transfer_never_slower():
    kw = dict(prefill=ONE, decode=ONE, prompt_tokens=4096, output_tokens=16, concurrencies=[1])
    a = api.serve_disagg(MODEL, GPU, **kw).points[0]
    b = api.serve_disagg(MODEL, GPU, layerwise_transfer=True, **kw).points[0]
    assert b.ttft_p50_s < a.ttft_p50_s


@pytest.mark.parametrize("rate", [4.0, 12.0])
def test_more_prefill_workers_never_raise_ttft(rate):
    kw = dict(decode=dict(workers=2, tp=1), prompt_tokens=2048, output_tokens=32,
              rate_rps=[rate], num_requests=60)
    one = api.serve_disagg(MODEL, GPU, prefill=dict(workers=1, tp=1), **kw).points[0]
    three = api.serve_disagg(MODEL, GPU, prefill=dict(workers=3, tp=1), **kw).points[0]
    assert three.ttft_p50_s <= one.ttft_p50_s * (1 + 1e-9)
    assert three.ttft_p90_s <= one.ttft_p90_s * (1 + 1e-9)


def test_tpot_independent_of_prefill_workers_when_decode_bound():
    # short prompts, long outputs: nearly every request in flight is decoding on one worker
    kw = dict(decode=dict(workers=1, tp=1), prompt_tokens=128, output_tokens=256,
              concurrencies=[32], num_requests=96)
    a = api.serve_disagg(MODEL, GPU, prefill=dict(workers=1, tp=1), **kw).points[0]
    b = api.serve_disagg(MODEL, GPU, prefill=dict(workers=4, tp=1), **kw).points[0]
    assert b.tpot_p50_s == pytest.approx(a.tpot_p50_s, rel=0.03)


def test_keys_match_serve_and_values_are_finite():
    r = api.serve_disagg(MODEL, GPU, prefill=ONE, decode=dict(workers=2, tp=1),
                         prompt_tokens=1024, output_tokens=64, concurrencies=[1, 8])
    for p in r.points:
        for k in ("ttft_p50_s", "ttft_p99_s", "tpot_p50_s", "tpot_p90_s", "output_tok_s_total",
                  "request_rate_rps"):
            v = getattr(p, k)
            assert v is not None and np.isfinite(v) and v > 0
        assert p.fits and p.preemptions == 0
    assert r.points[1].output_tok_s_total > r.points[0].output_tok_s_total


def test_scale_out_link_and_missing_link_error():
    r = api.serve_disagg(MODEL, GPU, prefill=dict(workers=4, tp=2), decode=dict(workers=1, tp=2),
                         prompt_tokens=256, output_tokens=8, concurrencies=[1])
    assert r.kv_link.startswith("scale-out") and r.num_gpus == 10
    gpu = next(g.id for g in list_gpus() if g.intra_node_link and g.inter_node_link is None
               and (g.scale_up_gpus or g.gpus_per_node or 8) <= 8)
    with pytest.raises(PerfModelError, match="no inter-node link"):
        api.serve_disagg(MODEL, gpu, prefill=dict(workers=8, tp=1), decode=dict(workers=2, tp=1),
                         prompt_tokens=256, output_tokens=8, concurrencies=[1])


def test_layout_errors_name_the_constraint():
    with pytest.raises(PerfModelError, match="ep=3 does not divide"):
        api.serve_disagg("deepseek-v3", "h200-sxm", weights="fp8",
                         prefill=dict(workers=1, tp=8, ep=3), decode=dict(workers=1, tp=8),
                         prompt_tokens=128, output_tokens=8, concurrencies=[1])
    with pytest.raises(PerfModelError, match="prefill worker .* cannot hold one request"):
        api.serve_disagg("llama-3.1-70b", GPU, prefill=ONE, decode=dict(workers=1, tp=4),
                         prompt_tokens=128, output_tokens=8, concurrencies=[1])
    with pytest.raises(PerfModelError, match="decode worker .* cannot receive"):
        api.serve_disagg("llama-3.1-70b", GPU, prefill=dict(workers=1, tp=4), decode=ONE,
                         prompt_tokens=128, output_tokens=8, concurrencies=[1])
    with pytest.raises(PerfModelError, match="prefill layout"):
        api.serve_disagg(MODEL, GPU, prefill=dict(workers=0), decode=ONE, concurrencies=[1])


@given(pw=st.integers(-1, 3), dw=st.integers(-1, 3), tp=st.sampled_from([0, 1, 2, 3, 16]),
       ep=st.sampled_from([1, 2, 5]), dp=st.sampled_from([0, 1, 2]),
       prompt=st.integers(-5, 3000), output=st.integers(-1, 40),
       conc=st.one_of(st.none(), st.integers(-1, 6), st.just(200)),
       rate=st.one_of(st.none(), st.floats(-1, 50)),
       weights=st.sampled_from(["bf16", "fp8", "fp5", ""]),
       mb=st.sampled_from([None, -1, 0, 1, 3, 10 ** 9]),
       recv=st.sampled_from([None, 0, 1, 10, 2.5]))
def test_api_random_and_invalid_inputs(pw, dw, tp, ep, dp, prompt, output, conc, rate, weights,
                                       mb, recv):
    try:
        r = api.serve_disagg("qwen3-30b-a3b", GPU, weights=weights,
                             prefill=dict(workers=pw, tp=tp, ep=ep, dp=dp, max_batch=mb),
                             decode=dict(workers=dw, tp=1, ep=1, max_batch=mb),
                             prompt_tokens=prompt,
                             output_tokens=output,
                             concurrencies=None if conc is None else [conc],
                             rate_rps=None if rate is None else [rate], num_requests=8,
                             recv_interval_steps=recv)
    except PerfModelError as exc:
        assert "\n" not in str(exc) and str(exc)
        return
    assert isinstance(r, api.DisaggReport)
    for p in r.points:
        for v in (p.ttft_p50_s, p.tpot_p90_s, p.output_tok_s_total):
            assert v is None or (np.isfinite(v) and v > 0)


def test_cli_table_json_and_bad_input(capsys):
    base = ["serve-disagg", "--model", MODEL, "--gpu", GPU, "--prompt", "512", "--output", "16",
            "--concurrency", "1,4", "--prefill-workers", "1", "--decode-workers", "2"]
    assert cli_main(base) == 0
    assert "TTFT p50 ms" in capsys.readouterr().out
    assert cli_main(base + ["--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["decode"]["workers"] == 2 and len(out["points"]) == 2
    bad = ["serve-disagg", "--model", "deepseek-v3", "--gpu", "h200-sxm", "--weights", "fp8",
           "--prompt", "64", "--output", "8", "--concurrency", "1", "--prefill-workers", "1",
           "--prefill-tp", "8", "--prefill-ep", "3", "--decode-workers", "1", "--decode-tp", "8"]
    assert cli_main(bad) == 2
    err = capsys.readouterr().err.strip()
    assert "does not divide" in err and "\n" not in err


def test_serve_disagg_flag_matches_the_alias_command(capsys):
    pools = ["--concurrency", "1,4", "--prefill-workers", "1", "--decode-workers", "2", "--json"]
    assert cli_main(["serve", "--disagg", "--model", MODEL, "--gpu", GPU, "--prompt-tokens", "512",
                     "--output-tokens", "16"] + pools) == 0
    a = json.loads(capsys.readouterr().out)
    assert cli_main(["serve-disagg", "--model", MODEL, "--gpu", GPU, "--prompt", "512",
                     "--output", "16"] + pools) == 0
    b = json.loads(capsys.readouterr().out)
    assert a["decode"]["workers"] == 2 and a["points"] == b["points"]
    # without the pools, or with a scheduler override it does not model: one clean error
    assert cli_main(["serve", "--disagg", "--model", MODEL, "--gpu", GPU, "--prompt-tokens",
                     "512", "--output-tokens", "16", "--concurrency", "1"]) == 2
    assert "--prefill-workers" in capsys.readouterr().err
    assert cli_main(["serve", "--disagg", "--model", MODEL, "--gpu", GPU, "--prompt-tokens",
                     "512", "--output-tokens", "16", "--max-num-seqs", "4"] + pools) == 2
    assert "not modelled with --disagg" in capsys.readouterr().err


def test_preempted_cached_prefixes_do_not_stall_the_decode_worker():
    # 70B fp8 on one H100 holds ~2 requests of KV: the decode worker preempts, and the waiting
    # requests' transferred KV is evicted and recomputed rather than stalling the scheduler
    r = api.serve_disagg("llama-3.1-70b", GPU, weights="fp8", prefill=ONE, decode=ONE,
                         prompt_tokens=2048, output_tokens=256, rate_rps=[5.0], num_requests=40)
    p = r.points[0]
    assert p.preemptions > 0 and p.tpot_p50_s > 0


def test_size_disagg_finds_a_layout_and_reports_a_miss():
    from perfmodel.analysis.sizing_disagg import size_disagg
    ok = size_disagg(MODEL, GPU, rate_rps=2.0, prompt=1024, output=64, ttft_slo_s=1.0,
                     tpot_slo_s=0.05, max_gpus=4, num_requests=40)
    assert ok.best is not None and ok.best.num_gpus == 2          # 1 + 1 is the smallest layout
    assert ok.best.ttft_p90_s <= 1.0 and ok.best.tpot_p50_s <= 0.05
    miss = size_disagg(MODEL, GPU, rate_rps=2.0, prompt=1024, output=64, ttft_slo_s=1e-4,
                       tpot_slo_s=0.05, max_gpus=2, num_requests=40)
    assert miss.best is None and "no layout" in miss.reason
    with pytest.raises(PerfModelError, match="max_gpus"):
        size_disagg(MODEL, GPU, rate_rps=2.0, prompt=1024, output=64, ttft_slo_s=1.0,
                    tpot_slo_s=0.05, max_gpus=1)
