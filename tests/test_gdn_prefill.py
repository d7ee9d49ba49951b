"""Gated DeltaNet prompt path (core/ops_linear.py): the chunked FLOP count, its efficiency and host
issue against the H200 run (calibrate/data/gdn-prefill-h200-sxm-20261202.json), and the bench's
torch reference against the plain recurrence."""

import json
import statistics
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from calib_scripts import load_script, quick_cpu_run
from perfmodel import api
from perfmodel.core import ops_linear as ol
from perfmodel.core import predict
from perfmodel.core.catalog import load_model
from perfmodel.core.efficiency import SUSTAINED_CLOCK_FRACTION
from perfmodel.core.host_cost import eager_block_extra_kernels
from perfmodel.core.ops import LINEAR_ATTENTION_OP, ops
from perfmodel.core.specs import Deployment, Precision

ROOT = Path(__file__).resolve().parents[1]
RUN = ROOT / "calibrate" / "data" / "gdn-prefill-h200-sxm-20261202.json"
QWEN35 = load_model("qwen3.5-397b-a17b")
BF16 = Precision.of("bf16")
H200_BF16_PEAK = 989.4e12      # hardware/h200-sxm.yaml: dense bf16 (NVIDIA H200 datasheet)


def _gdn(B, T, S=0.0, m=QWEN35):
    return next(o for o in ops(m, BF16, B, T, S) if o.name == LINEAR_ATTENTION_OP)


def test_chunked_flops_per_token_head_by_hand():
    # chunk_gated_delta_rule, C = 64, dk = dv = 128 (Qwen3.5 config linear_*_head_dim):
    # kkt 2*64*128 + solve 2/3*64^2 + w,u 2*64*(128+128) + h 4*128*128 + o 2*128*128 + 2*64*256
    by_hand = 16384 + 2730.67 + 32768 + 65536 + 32768 + 32768
    assert float(ol.flops_per_token_head(QWEN35, 1024)) == pytest.approx(by_hand, rel=1e-5)
    # decode: the recurrent form, 6 dk dv
    assert float(ol.flops_per_token_head(QWEN35, 1)) == 6 * 128 * 128


def test_prompt_op_counts_the_chunked_form_decode_the_recurrent():
    # 45 linear layers x 64 value heads (Qwen3.5-397B config)
    pre, dec = _gdn(1.0, 2048.0), _gdn(8.0, 1.0, 2048.0)
    assert float(pre.cost.flops) == pytest.approx(2048 * 64 * 45 * 182954.67, rel=1e-5)
    assert float(dec.cost.flops) == 8 * 64 * 45 * 6 * 128 * 128
    assert float(pre.cost.kernels) == float(dec.cost.kernels) == 4 * 45


def _records():
    return json.loads(RUN.read_text())["records"]


def test_run_is_the_fla_kernels_checked_against_the_reference():
    run = json.loads(RUN.read_text())
    assert run["backend"] == "fla" and run["env"]["nvidia_smi_after"]["clocks_sm_mhz"] > 1500
    # bf16 operands: 1e-3..1e-2 relative error against the fp32 chunked reference
    assert run["check"]["o_rel_err"] < 1e-2 and run["check"]["state_rel_err"] < 1e-2


def test_efficiency_curve_reproduces_the_h200_run():
    f = float(ol.flops_per_token_head(QWEN35, 1024))
    ratios = []
    for r in _records():
        x = r["tokens"] * r["value_heads_local"]
        e = float(ol.linear_attention_efficiency(QWEN35, Deployment(tp=r["tp"]),
                                                 r["tokens"], r["tokens_each"], 0.5))
        ratios.append((x * f / (H200_BF16_PEAK * e)) / r["ops_sum_s"])
        if not (r["prompts"] == 1 and r["value_heads_local"] == 8 and r["tokens"] >= 4096):
            assert 0.85 <= ratios[-1] <= 1.2, r   # the scan-bound long single prompts: below
    assert 0.9 <= statistics.median(ratios) <= 1.1


def test_issue_time_is_the_runs_median():
    assert ol.GDN_PREFILL_ISSUE_S == pytest.approx(
        statistics.median(r["layer_issue_s"] for r in _records()), rel=0.02)


def _scenario(engine="sglang", model="qwen3.5-397b-a17b", gpu="h200-sxm", tp=8):
    sc, _, _ = api.resolve(api.make_query(model=model, gpu=gpu, weights="fp8", kv="fp8",
                                          engine=engine, tp=tp))
    return sc


def test_eager_prompt_step_pays_the_linear_layers_issue_time():
    sc = _scenario()
    est = predict.step(sc, 1, 4096, 0, prefill=True)
    assert bool(est.eager)
    kernels_s = float(est.kernels) * sc.engine.eager_launch_s
    host = float(est.cpu_s) - sc.engine.cpu_overhead_per_step_s - float(est.host_s)
    # plus the MoE blocks' sourced launches beyond the op list (tests/test_eager_blocks.py)
    blocks_s = (eager_block_extra_kernels(sc.model, sc.engine, sc.attention)
                * sc.engine.eager_launch_s)
    assert host == pytest.approx(kernels_s + 45 * ol.GDN_PREFILL_ISSUE_S + blocks_s, rel=1e-6)


def test_decode_step_has_no_extra_issue_and_the_attention_efficiency():
    sc = _scenario()
    est = predict.step(sc, 16, 1, 2048, prefill=False)
    op = next(o for o in est.ops if o.name == LINEAR_ATTENTION_OP)
    # the H200's bf16 peak at its sustained-load clock (core/efficiency.py)
    half = sc.hw.peak_flops_per_s["bf16"] * SUSTAINED_CLOCK_FRACTION
    assert float(op.compute_s) == pytest.approx(float(op.flops) / (half * sc.eff.attn_compute))
    assert float(est.cpu_s) < 1e-3      # a graph replay, not 45 x 1.43 ms


def test_models_without_linear_attention_pay_nothing():
    for mid in ("llama-3.1-8b", "deepseek-v3", "qwen3-235b-a22b"):
        assert ol.prefill_issue_s(load_model(mid)) == 0.0
        assert not any(o.name == LINEAR_ATTENTION_OP for o in ops(load_model(mid), BF16, 1, 512, 0))


@given(T=st.integers(64, 65536), tp=st.sampled_from([1, 2, 4, 8]), B=st.integers(1, 64))
def test_prompt_time_grows_with_tokens_and_efficiency_stays_below_its_ceiling(T, tp, B):
    dep = Deployment(tp=tp)
    e1 = ol.linear_attention_efficiency(QWEN35, dep, B * T, T, 0.5)
    e2 = ol.linear_attention_efficiency(QWEN35, dep, B * 2 * T, 2 * T, 0.5)
    assert 0 < float(e1) <= float(e2) < ol.GDN_CHUNK_EFF_MAX
    t = [float(_gdn(B, n).cost.flops) / float(ol.linear_attention_efficiency(QWEN35, dep, B * n, n, 0.5))
         for n in (T, 2 * T)]
    assert np.isfinite(t).all() and t[1] > t[0]


def test_torch_reference_matches_the_recurrence():
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    bench = load_script(ROOT / "calibrate" / "bench_gdn_prefill.py")
    g0 = torch.Generator().manual_seed(0)
    T, Hk, Hv, d = 100, 2, 4, 16          # not a chunk multiple; 2 value heads per key head
    q, k = torch.randn(T, Hk, d, generator=g0), torch.randn(T, Hk, d, generator=g0)
    v = torch.randn(T, Hv, d, generator=g0)
    g, beta = -torch.rand(T, Hv, generator=g0) * 0.2, torch.rand(T, Hv, generator=g0)
    o, S = bench.torch_chunk_gdn(q, k, v, g, beta, chunk=16)
    qn = F.normalize(q, dim=-1).repeat_interleave(2, 1) * d ** -0.5
    kn = F.normalize(k, dim=-1).repeat_interleave(2, 1)
    St, out = torch.zeros(Hv, d, d), []
    for t in range(T):                    # S_t = a_t S + k (beta (v - S^T k))^T; o = S_t^T q
        St = St * g[t].exp()[:, None, None]
        vn = beta[t][:, None] * (v[t] - torch.einsum("hkv,hk->hv", St, kn[t]))
        St = St + torch.einsum("hk,hv->hkv", kn[t], vn)
        out.append(torch.einsum("hkv,hk->hv", St, qn[t]))
    out = torch.stack(out)
    assert float((o - out).norm() / out.norm()) < 1e-5
    assert float((S - St).norm() / St.norm()) < 1e-5


def test_bench_quick_cpu_run(tmp_path):
    pytest.importorskip("torch")
    res = quick_cpu_run(ROOT / "calibrate" / "bench_gdn_prefill.py", tmp_path / "g.json")
    assert res["backend"] == "torch" and not res["skipped"] and len(res["records"]) == 2
    for rec in res["records"]:
        assert set(rec["ops_s"]) == {"conv", "gate", "core", "norm"} and rec["ops_sum_s"] > 0


# flashinfer-ai/flashinfer PR #3001 (B200, FLA 0.4.2): FLA chunk_gated_delta_rule_fwd on one
# 8192-token prompt, Qwen3.5-397B heads: 338 us at TP8 (8 value heads), 424 us at TP4 (16)
B200_FLA_CORE_8K_S = {8: 338e-6, 4: 424e-6}


@pytest.mark.parametrize("tp", [4, 8])
def test_blackwell_chunked_prompt_path_takes_the_published_b200_time(tp):
    # the op covers the whole layer (conv, gating, chunk rule, gated norm), so its time per
    # layer lies above the chunk rule's published time, and at most 1.22x it (the rest of the
    # layer on the H200 at 8192 tokens: 541 / 442 us, the run's ops_s) at the sustained clock
    # (/ 0.85, core/efficiency.py), 5% slack; priced at the H200's fraction of the 2.3x larger
    # B200 peak it came to 0.17 / 0.29 ms, below the published time
    per_layer = []
    for gpu in ("b200", "h200-sxm"):
        est = predict.step(_scenario(gpu=gpu, tp=tp), 1, 8192, 0, prefill=True)
        op = next(o for o in est.ops if o.name == LINEAR_ATTENTION_OP)
        per_layer.append(float(op.time_s) / QWEN35.linear_attention.num_layers)
    upper = 541 / 442 / SUSTAINED_CLOCK_FRACTION * 1.05
    assert B200_FLA_CORE_8K_S[tp] < per_layer[0] < upper * B200_FLA_CORE_8K_S[tp]
    # and about the H200's own time (published 762 us vs measured 787 us over the two shapes)
    assert 0.9 < per_layer[0] / per_layer[1] < 1.05
