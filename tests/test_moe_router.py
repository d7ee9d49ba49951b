"""MoE routers in the op list: fp32 where the engines upcast them (MoESpec.router_fp32), never a
W8A8 kernel, priced against the H200 whole-layer run (calibrate/bench_moe_layer.py)."""
import dataclasses
import json
from pathlib import Path

import pytest

from perfmodel import api
from perfmodel.core import predict
from perfmodel.core.catalog import load_model
from perfmodel.core.catalog.hf_config import load_hf_config
from perfmodel.core.efficiency import burst
from calib_scripts import quick_cpu_run

ROOT = Path(__file__).resolve().parents[1]
LAYER_RUN = ROOT / "calibrate" / "data" / "moe-layer-h200-sxm-20261202b.json"


def _router_s_per_layer(model, weights="fp8", gpu="h200-sxm", tp=8, T=8192,
                        ops=("router", "router_upcast"), **spec):
    sc, _, _ = api.resolve(api.make_query(model=model, gpu=gpu, weights=weights, kv="fp8",
                                          engine="vllm", tp=tp))
    sc = dataclasses.replace(sc, eff=burst(sc.eff))   # the H200 runs were timed in bursts
    if spec:
        m = sc.model.model_copy(update={"moe": sc.model.moe.model_copy(update=spec)})
        sc = dataclasses.replace(sc, model=m)
    est = predict.step(sc, 1, T, 0, prefill=True)
    return sum(float(o.time_s) for o in est.ops
               if o.name in ops) / sc.model.num_layers


def _measured_router_s(model, tp, T):
    recs = json.loads(LAYER_RUN.read_text())["records"]
    return next(r["ops_s"]["router"] for r in recs
                if (r["model"], r["tp"], r["T"]) == (model, tp, T))


def test_catalog_marks_the_fp32_routers_of_the_engines_source():
    # vLLM minimax_m2.py (gate params_dtype=torch.float32) and glm4_moe.py (nn.Linear
    # dtype=torch.float32); qwen3_moe.py keeps the 16-bit gate
    assert load_model("minimax-m2.5").moe.router_fp32
    assert load_model("minimax-m2").moe.router_fp32
    assert load_model("glm-4.5").moe.router_fp32
    assert not load_model("qwen3-235b-a22b").moe.router_fp32
    assert not load_model("deepseek-v3").moe.router_fp32


def test_hf_config_sets_the_fp32_router_by_model_type(tmp_path):
    cfg = {"model_type": "minimax_m2", "num_hidden_layers": 4, "hidden_size": 256,
           "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 32,
           "intermediate_size": 64, "vocab_size": 1000, "num_local_experts": 16,
           "num_experts_per_tok": 4, "max_position_embeddings": 4096}
    path = tmp_path / "m" / "config.json"
    path.parent.mkdir()
    path.write_text(json.dumps(cfg))
    assert load_hf_config(path).moe.router_fp32
    cfg["model_type"] = "qwen3_moe"
    cfg.update(num_experts=16, moe_intermediate_size=64)
    path.write_text(json.dumps(cfg))
    assert not load_hf_config(path).moe.router_fp32


@pytest.mark.parametrize("T", [1024, 8192])
def test_fp32_router_time_matches_the_h200_layer_run(T):
    # measured: calibrate/data/moe-layer-h200-sxm-20261202b.json, MiniMax-M2.5 tp8 router op
    # (fp32 upcast + fp32 GEMM M x 3072 @ 3072 x 256): 62 us at 1024, 337 us at 8192
    # (the curve is fitted to two router shapes in a separate run, ±20% on each)
    measured = _measured_router_s("minimax-m2.5", 8, T)
    assert 0.8 <= _router_s_per_layer("minimax-m2.5", T=T) / measured <= 1.25
    # before router_fp32 the op was priced as a 16-bit (fp8) GEMM: several times too fast
    assert _router_s_per_layer("minimax-m2.5", T=T, router_fp32=False) / measured < 0.5


def test_fp32_router_curve_refits_to_the_router_run():
    # calibrate/data/router-gemm-h200-sxm-20261202.json: the fp32 GEMM alone of the MiniMax-M2
    # and GLM-4.5 routers at M >= 1024 against the router op's time per layer
    recs = json.loads((ROOT / "calibrate" / "data" / "router-gemm-h200-sxm-20261202.json")
                      .read_text())["records"]
    for r in recs:
        if r["dtype"] != "fp32" or r["model"] not in ("minimax-m2.5", "glm-4.5") or r["M"] < 1024:
            continue
        pred = _router_s_per_layer(r["model"], T=r["M"], tp=4 if r["model"] == "glm-4.5" else 8,
                                   ops=("router",))
        assert 0.8 <= pred / r["gemm_seconds"] <= 1.25, (r["model"], r["M"], pred, r)


def test_bf16_router_time_matches_the_h200_layer_run():
    # measured: the same run, Qwen3-235B-A22B tp8 router (bf16, M x 4096 @ 4096 x 128): 25 us
    measured = _measured_router_s("qwen3-235b-a22b", 8, 8192)
    assert 0.6 <= _router_s_per_layer("qwen3-235b-a22b") / measured <= 1.25


def test_router_is_never_a_w8a8_kernel():
    # the gate is built unquantized (quant_config=None): its time does not follow the weights
    bf16 = _router_s_per_layer("qwen3-235b-a22b", weights="bf16")
    fp8 = _router_s_per_layer("qwen3-235b-a22b", weights="fp8")
    assert fp8 == pytest.approx(bf16, rel=1e-9)


def test_fp32_router_costs_more_than_16_bit_at_every_size():
    for T in (1, 64, 1024, 8192):
        assert (_router_s_per_layer("minimax-m2.5", T=T)
                > _router_s_per_layer("minimax-m2.5", T=T, router_fp32=False))


def test_layer_bench_quick_cpu_run_writes_its_records(tmp_path):
    pytest.importorskip("torch")
    res = quick_cpu_run(ROOT / "calibrate" / "bench_moe_layer.py", tmp_path / "layer.json")
    assert res["checks"]["align_ok"] and res["checks"]["gate_up_rel_err"] < 0.01
    assert not res["skipped"] and len(res["records"]) == 2
    for rec in res["records"]:
        assert {"router", "topk", "align", "gate_up", "down", "combine"} <= set(rec["ops_s"])
        assert rec["ops_sum_s"] > 0 and rec["layer_wall_s"] > 0
        assert rec["experts_touched"] <= rec["experts"]


def test_router_bench_quick_cpu_run(tmp_path):
    pytest.importorskip("torch")
    recs = quick_cpu_run(ROOT / "calibrate" / "bench_router_gemm.py", tmp_path / "r.json")["records"]
    assert {r["dtype"] for r in recs} == {"fp32", "bf16"}
    assert all(r["flops"] == 2.0 * r["M"] * r["D"] * r["E"] and r["seconds"] > 0 for r in recs)

