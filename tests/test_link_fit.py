"""The link fit (calibrate/fit_link.py), the profile's link_latency_s, and bench_nccl.py's CPU path."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from perfmodel.api import predict_request, resolve
from perfmodel.core.errors import SpecFileError
from perfmodel.core.hardware import load_gpu
from perfmodel.core.profile import Profile, load_profile

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "calibrate"))
import fit_link  # noqa: E402

RAW = ROOT / "calibrate" / "data" / "raw-nccl-h200x2-20261129.json"
PROFILE = ROOT / "calibrate" / "profiles" / "h200-sxm-x2-link.yaml"
LINK_BW = 450e9


@pytest.mark.parametrize("p, eff, lat", [(2, 0.7, 5e-6), (8, 0.55, 12e-6), (4, 0.95, 1e-6)])
def test_fit_recovers_known_link(p, eff, lat):
    rng = np.random.default_rng(p)
    b = 2.0 ** np.arange(13, 30)
    t = fit_link.model_s(b, p, LINK_BW, eff, lat) * rng.lognormal(0, 0.02, b.size)
    e, l = fit_link.fit_allreduce(b, t, p, LINK_BW)
    assert e == pytest.approx(eff, rel=0.05) and l == pytest.approx(lat, rel=0.08)


def test_fit_never_exceeds_the_datasheet_link():
    b = 2.0 ** np.arange(13, 30)
    t = fit_link.model_s(b, 2, 2 * LINK_BW, 1.0, 4e-6)        # a link twice the datasheet's
    e, _ = fit_link.fit_allreduce(b, t, 2, LINK_BW)
    assert e == pytest.approx(1.0)


def test_measured_run_is_physical_and_the_fit_beats_the_datasheet():
    raw = json.loads(RAW.read_text())
    assert raw["complete"] and raw["world_size"] == 2
    big = max(raw["allreduce"]["records"], key=lambda r: r["bytes"])
    # NVLink 4 gives 450 GB/s per direction per GPU (NVIDIA H200 product page): bus bandwidth
    # of a large all-reduce must sit below it and well above PCIe
    assert 0.4 * LINK_BW < big["busbw_bytes_per_s"] < LINK_BW
    default = load_gpu("h200-sxm")
    for curve in ("eager", "device"):
        b, t = fit_link.allreduce_points(raw, curve)
        eff, lat = fit_link.fit_allreduce(b, t, 2, LINK_BW)
        assert 0.3 < eff <= 1.0 and 1e-6 < lat < 50e-6
        before = fit_link.errors(fit_link.model_s(b, 2, LINK_BW, 0.75, default.intra_node_link.latency_s), t)
        after = fit_link.errors(fit_link.model_s(b, 2, LINK_BW, eff, lat), t)
        assert after["rms_log"] < 0.5 * before["rms_log"]


def test_committed_profile_holds_the_device_fit():
    prof = load_profile(PROFILE)
    b, t = fit_link.allreduce_points(json.loads(RAW.read_text()), "device")
    eff, lat = fit_link.fit_allreduce(b, t, 2, LINK_BW)
    assert prof.gpu == "h200-sxm"
    assert prof.efficiency.link_fraction == pytest.approx(eff, rel=1e-3)
    assert prof.link_latency_s == pytest.approx(lat, rel=1e-2)


def comm_s(est) -> float:
    return sum(o.time_s for o in est.ops if o.kind == "comm")


def test_link_latency_adds_exactly_its_latency_steps():
    """Two all-reduces per layer, each 2*ceil(log2 p) latencies: 32 layers * 2 * 4 * delta.
    5 us per hop keeps the decode all-reduces on the LL protocol (4 x 5 us under the Simple
    protocol's 8.4 + 6 x 3.4 us at p = 4; core/parallel.py allreduce_s)."""
    base = predict_request("llama-3.1-8b", "h200-sxm", engine="vllm", tp=4, batch=8)
    prof = Profile(gpu="h200-sxm", link_latency_s=5e-6)
    slow = predict_request("llama-3.1-8b", "h200-sxm", engine="vllm", tp=4, batch=8, profile=prof)
    delta = 5e-6 - load_gpu("h200-sxm").intra_node_link.latency_s
    assert comm_s(slow) - comm_s(base) == pytest.approx(32 * 2 * 4 * delta)
    assert slow.tpot_s > base.tpot_s


def test_link_latency_of_another_card_is_not_applied():
    prof = Profile(gpu="h100-sxm", link_latency_s=20e-6)
    sc, warnings, _ = resolve("llama-3.1-8b", "h200-sxm", tp=2, profile=prof)
    assert sc.hw.intra_node_link.latency_s == load_gpu("h200-sxm").intra_node_link.latency_s
    assert any("link latency" in w for w in warnings)


@given(value=st.one_of(st.floats(allow_nan=True), st.text(max_size=5), st.none()))
def test_profile_link_latency_is_checked(tmp_path_factory, value):
    path = tmp_path_factory.mktemp("p") / "p.yaml"
    path.write_text(f"gpu: h200-sxm\nlink_latency_s: {json.dumps(value)}\n")
    try:
        prof = load_profile(path)
    except SpecFileError as exc:
        assert "link_latency_s" in str(exc) or "YAML" in str(exc)
        return
    if prof.link_latency_s is not None:
        assert 0 <= prof.link_latency_s <= 1.0
        r = predict_request("llama-3.1-8b", "h200-sxm", tp=2, profile=prof)
        assert np.isfinite(r.tpot_s)


def test_fit_link_cli_errors_are_exit_2(tmp_path, capsys):
    assert fit_link.main([str(tmp_path / "missing.json")]) == 2
    assert fit_link.main([str(RAW), "--gpu", "no-such-gpu"]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 2


BENCH = ROOT / "calibrate" / "bench_nccl.py"


def test_bench_nccl_without_torchrun_is_one_line_exit_2():
    pytest.importorskip("torch")
    env = {k: v for k, v in os.environ.items() if k not in ("WORLD_SIZE", "RANK")}
    proc = subprocess.run([sys.executable, str(BENCH), "--out", "/dev/null"], env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and proc.stderr.strip().count("\n") == 0
    assert "torchrun" in proc.stderr


def test_bench_nccl_smoke_on_cpu_writes_the_documented_records(tmp_path):
    pytest.importorskip("torch")
    torchrun = shutil.which("torchrun") or str(Path(sys.executable).parent / "torchrun")
    if not Path(torchrun).exists():
        pytest.skip("torchrun not installed")
    out = tmp_path / "smoke.json"
    proc = subprocess.run([torchrun, "--nproc_per_node=2", str(BENCH), "--smoke", "--out", str(out),
                           "--sections", "allreduce,decode_tp"], capture_output=True, text=True,
                          timeout=240, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    raw = json.loads(out.read_text())
    assert raw["complete"] and raw["world_size"] == 2 and raw["backend"] == "gloo"
    assert raw["env"]["multicast_env"]["NCCL_NVLS_ENABLE"] == "0"
    for r in raw["allreduce"]["records"]:
        assert r["busbw_bytes_per_s"] == pytest.approx(r["algbw_bytes_per_s"])  # 2(p-1)/p = 1
        assert r["algbw_bytes_per_s"] == pytest.approx(r["bytes"] / r["seconds"])
        assert r["seconds"] == max(r["seconds_per_rank"]) and len(r["seconds_per_rank"]) == 2
    dec = raw["decode_tp"]["records"]
    assert {(r["batch"], r["context"]) for r in dec} == {(1, 16), (1, 32), (2, 16), (2, 32)}
    assert all(r["allreduces_per_step"] == 2 * raw["decode_tp"]["model"]["num_layers"] for r in dec)
