"""The routed-expert GEMM law (core/grouped_gemm.py) against the H200 measurement of the fused
MoE kernel at prompt sizes (calibrate/bench_moe_prefill.py, calibrate/MOE_PREFILL_NOTES.md)."""
import dataclasses
import json
import statistics
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from perfmodel import api
from perfmodel.core import predict
from perfmodel.core.efficiency import burst
from perfmodel.core.grouped_gemm import (DEPTH_HALF_K, GROUPED_KERNEL_FRACTION,
                                         depth_efficiency)
from calib_scripts import load_script, quick_cpu_run

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "calibrate" / "data"
PREFILL = DATA / "moe-prefill-h200-sxm-20261201.json"
DECODE = DATA / "moe-decode-h200-sxm-20261201.json"
REPEAT = DATA / "repeats" / "moe-prefill-h200-sxm-20261201-repeat.json"
FIT = ROOT / "calibrate" / "fit_moe_prefill.py"
BENCH = ROOT / "calibrate" / "bench_moe_prefill.py"


def _fit_module():
    return load_script(FIT)


def _record(recs, model, moe_tp, ep, T, kind, gemm):
    return next(r for r in recs if (r["model"], r["moe_tp"], r["ep"], r["T"], r["kind"], r["gemm"])
                == (model, moe_tp, ep, T, kind, gemm))


def test_refitting_the_committed_run_gives_the_shipped_constants():
    fit = _fit_module()
    res = fit.fit(fit.load([PREFILL]))
    assert res["points"] >= 90
    assert res["fraction"] == pytest.approx(GROUPED_KERNEL_FRACTION, abs=0.006)
    assert res["half_k"] == pytest.approx(DEPTH_HALF_K, abs=15)
    assert res["median_abs_err"] < 0.08 and res["max_abs_err"] < 0.35


def test_the_law_tracks_every_prompt_size_and_the_old_law_did_not():
    fit = _fit_module()
    recs = fit.load([PREFILL])
    new = fit.ratios(recs, GROUPED_KERNEL_FRACTION, DEPTH_HALF_K)
    a = fit.arrays(recs)
    old = fit.old_law_s(a, fit.card()) / a["s"]
    for T in (1024, 2048, 4096, 8192, 16384):
        idx = [i for i, r in enumerate(recs) if r["T"] == T]
        assert 0.9 <= float(np.median(new[idx])) <= 1.1, T
        assert float(np.median(old[idx])) > 1.5, T     # the finding: 1.6-2.6x too slow


def test_decode_sized_batches_are_weight_stream_bound_as_the_law_says():
    fit = _fit_module()
    v = fit.ratios(fit.load([DECODE]), GROUPED_KERNEL_FRACTION, DEPTH_HALF_K)
    assert 0.8 <= float(np.median(v)) <= 1.1


def test_shallow_down_projection_follows_the_depth_law():
    # DeepSeek-V3 at tp8, 8192 tokens: down (K = 256) has half the FLOPs of gate_up (K = 7168)
    recs = json.loads(PREFILL.read_text())["records"]
    up = _record(recs, "deepseek-v3", 8, 1, 8192, "triton_fp8_block", "gate_up")
    down = _record(recs, "deepseek-v3", 8, 1, 8192, "triton_fp8_block", "down")
    measured = down["flops_per_s"] / up["flops_per_s"]
    assert measured == pytest.approx(depth_efficiency(256) / depth_efficiency(7168), rel=0.1)


def test_the_repeat_on_a_fresh_machine_agrees():
    a = {(r["model"], r["moe_tp"], r["ep"], r["T"], r["kind"], r["gemm"]): r["seconds"]
         for r in json.loads(PREFILL.read_text())["records"]}
    b = json.loads(REPEAT.read_text())["records"]
    ratios = [r["seconds"] / a[(r["model"], r["moe_tp"], r["ep"], r["T"], r["kind"], r["gemm"])]
              for r in b if r["kind"] == "triton_fp8_block"]
    assert len(ratios) >= 100 and abs(statistics.median(ratios) - 1) < 0.03


def test_model_experts_op_matches_the_kernel_for_minimax_tp4_8k():
    # one layer's gate_up + down on one GPU of MiniMax-M2.5 fp8 (block scales) at tp4, 8192 tokens
    recs = json.loads(PREFILL.read_text())["records"]
    meas = sum(_record(recs, "minimax-m2.5", 4, 1, 8192, "triton_fp8_block", g)["seconds"]
               for g in ("gate_up", "down"))
    sc, _, _ = api.resolve(api.make_query(model="minimax-m2.5", gpu="h200-sxm", weights="fp8-b128",
                                          kv="fp8", engine="vllm", tp=4))
    sc = dataclasses.replace(sc, eff=burst(sc.eff))   # the kernel run was timed in bursts
    op = next(o for o in predict.step(sc, 1, 8192, 0, prefill=True).ops if o.name == "experts")
    assert float(op.compute_s) / sc.model.num_moe_layers == pytest.approx(meas, rel=0.15)


def test_the_fit_script_prints_the_shipped_law_and_refuses_bad_files(tmp_path):
    run = subprocess.run([sys.executable, str(FIT), str(PREFILL)], capture_output=True, text=True,
                         timeout=120, cwd=ROOT)
    assert run.returncode == 0, run.stderr
    assert f"fraction {GROUPED_KERNEL_FRACTION:.3f}, half_k {DEPTH_HALF_K:.0f}" in run.stdout
    bad = tmp_path / "bad.json"
    bad.write_text('{"records": [{"kind": "triton_fp8_block"}]}')
    for arg in (str(bad), str(tmp_path / "missing.json")):
        run = subprocess.run([sys.executable, str(FIT), arg], capture_output=True, text=True,
                             timeout=120, cwd=ROOT)
        assert run.returncode == 2 and "fit_moe_prefill:" in run.stderr
        assert "Traceback" not in run.stderr


def test_the_bench_runs_quick_on_the_cpu(tmp_path):
    pytest.importorskip("torch")
    res = quick_cpu_run(BENCH, tmp_path / "m.json", timeout=300)
    assert {r["kind"] for r in res["records"]} >= {"bf16_grouped", "dense_bf16"}
    for r in res["records"]:
        assert r["seconds"] > 0 and r["flops"] == 2 * r["M"] * r["K"] * r["N"]
    for c in res["checks"]:
        assert c["rel_err"] < 1e-2     # bf16 grouped GEMM against an fp32 reference


@pytest.mark.parametrize("tp, ep, share", [(4, 1, 1.0), (4, 4, 0.25), (8, 2, 0.5), (1, 1, 1.0)])
def test_every_expert_shard_gathers_and_sums_the_rows_routed_to_it(tp, ep, share):
    # vLLM fused_moe under TP: each rank's moe_sum reads all k*M partial rows (M, k, D) before
    # the all-reduce; under EP a rank gets the rows of its E/ep experts (core/parallel.py)
    from perfmodel.core.catalog import load_model
    from perfmodel.core.ops import ops
    from perfmodel.core.parallel import shard
    from perfmodel.core.specs import Deployment, Precision
    m = load_model("qwen3-235b-a22b")
    whole = {o.name: o for o in ops(m, Precision.of("fp8"), 1, 4096, 0)}
    rank = {o.name: o for o in shard(list(whole.values()), m, Deployment(tp=tp, ep=ep), 4096.0)}
    for name in ("moe_permute", "moe_combine"):
        assert float(rank[name].cost.act_bytes) == pytest.approx(float(whole[name].cost.act_bytes) * share)
    # the expert GEMMs themselves stay split over all tp ranks (without EP imbalance)
    if ep == 1:
        assert float(rank["experts"].cost.flops) == pytest.approx(float(whole["experts"].cost.flops) / tp)


SMALL = DATA / "moe-decode-small-h200-sxm-20261202.json"


@pytest.mark.parametrize("moe_tp", [2, 4])
def test_qwen3_235b_decode_experts_match_the_kernel_at_small_batches(moe_tp):
    # vLLM 0.12.0 Qwen3-235B-A22B-FP8 rows (docs/aic_vllm012.md): TPOT measured 1.5-2x the
    # prediction at C = 4-20. The expert GEMMs at those batches, default config (BLOCK_M 64)
    # and the 16-row tile of vLLM's tuned E=128,N=768 / N=384 H200 files, on one H200: the
    # model's experts op stays within 25% of the default kernel, and the tuned tile is faster,
    # so neither config accounts for a 1.5-2x step.
    recs = json.loads(SMALL.read_text())["records"]
    sc, _, _ = api.resolve(api.make_query(model="qwen3-235b-a22b", gpu="h200-sxm",
                                          weights="fp8-b128", kv="fp8", engine="vllm", tp=moe_tp))
    sc = dataclasses.replace(sc, eff=burst(sc.eff))   # the kernel run was timed in bursts
    for T in (4, 8, 16, 32):
        default = sum(_record(recs, "qwen3-235b-a22b", moe_tp, 1, T, "triton_fp8_block", g)["seconds"]
                      for g in ("gate_up", "down"))
        tuned = sum(_record(recs, "qwen3-235b-a22b", moe_tp, 1, T, "triton_fp8_block_m16", g)["seconds"]
                    for g in ("gate_up", "down"))
        op = next(o for o in predict.step(sc, T, 1, 1000).ops if o.name == "experts")
        model = float(op.time_s) / sc.model.num_moe_layers
        assert model == pytest.approx(default, rel=0.25), T
        assert tuned <= default * 1.02, T
