"""The sustained-load clock (core/efficiency.py SUSTAINED_CLOCK_FRACTION) against its H200 run,
and where the model applies it: compute terms only, serving and predict paths, not calibration."""

import dataclasses
import json
import statistics
from pathlib import Path

import numpy as np
import pytest
from pydantic import ValidationError

from perfmodel import api
from perfmodel.analysis.calibration.points import Point, precision_of
from perfmodel.analysis.calibration.points import predict as predict_points
from perfmodel.core import predict
from perfmodel.core.efficiency import (SUSTAINED_CLOCK_FRACTION, burst, default_efficiency,
                                       sustained_clock_fraction)
from perfmodel.core.hardware import load_gpu
from perfmodel.core.roofline import step_time

RUN = Path(__file__).resolve().parents[1] / "calibrate" / "data" / "sustained-h200-sxm-20261202.json"
TENSOR_RUNS = ("gemm_bf16_8192x8192x8192", "gemm_fp8_8192x8192x8192",
               "gemm_bf16_4096x8192x8192", "attention_causal_flops")


def _run():
    return json.loads(RUN.read_text())


def test_the_h200_run_holds_085_of_its_burst_rate_under_load():
    runs = {r["name"]: r for r in _run()["runs"]}
    ratios = [runs[n]["sustained_per_s"] / runs[n]["burst_per_s"] for n in TENSOR_RUNS]
    assert all(0.80 <= r <= 0.90 for r in ratios), ratios
    assert statistics.median(ratios) == pytest.approx(SUSTAINED_CLOCK_FRACTION, abs=0.01)
    # bf16 8192^3: 2 x 8192^3 FLOP per product; the burst is ~0.79 of the datasheet bf16 peak
    peak = load_gpu("h200-sxm").peak_flops_per_s["bf16"]
    assert runs["gemm_bf16_8192x8192x8192"]["burst_per_s"] / peak == pytest.approx(0.79, abs=0.03)
    # memory-bound work keeps its rate: the memory clock is not capped
    copy = runs["copy_bytes"]
    assert copy["sustained_per_s"] / copy["burst_per_s"] > 0.97


def test_the_card_was_power_capped_while_it_ran_the_gemms():
    d = _run()
    smi = [s.split(", ") for _, s in d["smi"]]
    busy = [row for row in smi if float(row[3]) > 650]          # watts
    assert len(busy) > 100
    # nvidia-smi clocks_throttle_reasons.active 0x4: SW power cap; SM clock below 1980 MHz
    assert all(int(row[5], 16) & 0x4 for row in busy)
    assert statistics.median(int(row[1]) for row in busy) < 0.8 * 1980
    assert {row[2] for row in smi} == {"3201"}                   # memory clock never moves


def _h200(engine="vllm"):
    sc, _, _ = api.resolve(api.make_query(model="llama-3.1-70b", gpu="h200-sxm", weights="fp8",
                                          kv="fp8", engine=engine, tp=8))
    return sc


def test_a_compute_bound_prompt_step_pays_1_over_the_fraction_in_its_compute_ops():
    sc = _h200()
    loaded = predict.step(sc, 1, 8192, 0, prefill=True)
    cold = predict.step(dataclasses.replace(sc, eff=burst(sc.eff)), 1, 8192, 0, prefill=True)
    for a, b in zip(loaded.ops, cold.ops):
        assert a.name == b.name
        assert float(a.compute_s) == pytest.approx(float(b.compute_s) / SUSTAINED_CLOCK_FRACTION)
    mlp = next(o for o in loaded.ops if o.name == "mlp_up")
    assert float(mlp.compute_s) > float(mlp.memory_s)           # compute-bound at 8192 rows
    # the datasheet-peak time (MFU denominator) does not move
    assert float(loaded.flops_at_peak_s) == pytest.approx(float(cold.flops_at_peak_s))


def test_a_memory_bound_decode_step_keeps_its_weight_stream_time():
    sc = _h200()
    loaded = predict.step(sc, 1, 1, 1024, prefill=False)
    cold = predict.step(dataclasses.replace(sc, eff=burst(sc.eff)), 1, 1, 1024, prefill=False)
    up_l = next(o for o in loaded.ops if o.name == "mlp_up")
    up_c = next(o for o in cold.ops if o.name == "mlp_up")
    assert float(up_l.memory_s) > float(up_l.compute_s)
    assert float(up_l.time_s) == pytest.approx(float(up_c.time_s))


def test_which_chips_take_the_fraction():
    for gpu in ("h100-sxm", "h200-sxm", "b200", "gb200"):
        hw = load_gpu(gpu)
        assert sustained_clock_fraction(hw, default_efficiency(hw)) == SUSTAINED_CLOCK_FRACTION
    for gpu in ("mi300x", "rtx-4090", "a100-sxm-80gb"):
        hw = load_gpu(gpu)
        assert sustained_clock_fraction(hw, default_efficiency(hw)) == 1.0
    hw = load_gpu("h200-sxm")   # a profile's own value wins
    eff = default_efficiency(hw).model_copy(update={"sustained_clock_fraction": 0.7})
    assert sustained_clock_fraction(hw, eff) == 0.7


@pytest.mark.parametrize("bad", [0.0, -0.5, 1.5, float("nan")])
def test_an_impossible_fraction_is_refused(bad):
    eff = default_efficiency(load_gpu("h200-sxm")).model_dump()
    with pytest.raises(ValidationError):
        type(default_efficiency(load_gpu("h200-sxm")))(**{**eff, "sustained_clock_fraction": bad})


def test_calibration_points_are_priced_at_the_burst_clock():
    # bench.py times its records after an idle gap: the fit must not see the sustained clock
    sc = _h200()
    pts = [Point(name="p", mode="e2e", engine="vllm", dtype="fp8_e4m3", phase="prefill", B=1,
                 T=4096, S=0.0, request=False, measured_s=1.0, kernels=None)]
    got = predict_points(pts, sc.model, sc.hw, sc.eff, {"vllm": sc.engine})[0]
    p = precision_of("fp8_e4m3")
    cold = step_time(sc.model, sc.hw, p, sc.engine, burst(sc.eff), 1, 4096, 0).time_s
    loaded = step_time(sc.model, sc.hw, p, sc.engine, sc.eff, 1, 4096, 0).time_s
    assert got == pytest.approx(float(cold))
    assert float(loaded) > 1.05 * float(cold)    # a 4096-token prompt step is compute-bound


def test_the_bench_script_needs_only_torch_and_the_standard_library_and_refuses_a_cpu():
    import ast
    import subprocess
    import sys
    path = RUN.parents[1] / "bench_sustained.py"
    mods = {a.name.split(".")[0] for n in ast.walk(ast.parse(path.read_text()))
            if isinstance(n, ast.Import) for a in n.names}
    mods |= {n.module.split(".")[0] for n in ast.walk(ast.parse(path.read_text()))
             if isinstance(n, ast.ImportFrom) and n.module}
    assert mods - set(sys.stdlib_module_names) == {"torch"}
    r = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=120,
                       env={"CUDA_VISIBLE_DEVICES": "", "PATH": "/usr/bin:/bin"})
    assert r.returncode == 2 and "needs a CUDA GPU" in r.stderr and "Traceback" not in r.stderr
