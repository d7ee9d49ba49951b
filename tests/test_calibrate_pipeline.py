"""The CPU pipeline end to end: `perfmodel calibrate run --device cpu --quick` (bench.py, then
the fit) -> `perfmodel predict --profile` reproduces the fit; on a recorded CPU run
(tests/data/) the profile moves the held-out predictions toward the measurements. Also: no
GPU, no torch, a failing bench, and atomic profile writes.

The bench runs with one thread (OMP_NUM_THREADS=1): on a loaded 2-core CI machine,
multi-threaded CPU steps jump between 1 ms and 100+ ms (OpenMP barriers spinning while
another process holds the core); single-threaded ones repeat within ~20%.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest
import yaml

import perfmodel.cli.calibrate as cal_cli
from perfmodel.analysis.calibration.raw import model_from_shape
from perfmodel.cli import main
from perfmodel.core.profile import load_profile

ROOT = Path(__file__).resolve().parents[1]
H200_RAW = ROOT / "calibrate" / "data" / "raw-h200-sxm-20261201b.json"
CPU_RAW = ROOT / "tests" / "data" / "raw-cpu-quick-20261201.json"


@pytest.fixture(scope="module")
def cpu_run(tmp_path_factory):
    pytest.importorskip("torch")
    d = tmp_path_factory.mktemp("calib")
    mp = pytest.MonkeyPatch()
    mp.setenv("OMP_NUM_THREADS", "1")
    try:
        import io
        import sys
        out, err = io.StringIO(), io.StringIO()
        mp.setattr(sys, "stdout", out)
        mp.setattr(sys, "stderr", err)
        rc = main(["calibrate", "run", "--device", "cpu", "--quick", "--raw-out", str(d / "raw.json"),
                   "--out", str(d / "cpu.yaml"), "--json"])
    finally:
        mp.undo()
    assert rc == 0, err.getvalue()[-3000:]
    return d, json.loads(out.getvalue())


def _predict(capsys, args) -> dict:
    capsys.readouterr()
    assert main(["predict", *args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def _held_out_through_cli(capsys, raw: dict, doc: dict, profile: Path, hw: Path, d: Path):
    """(calibrated, datasheet, measured) seconds of every held-out point, by `perfmodel predict`."""
    model_yaml = d / "model.yaml"
    model_yaml.write_text(yaml.safe_dump(model_from_shape(raw["e2e"]["model"]).model_dump(mode="json")))
    held = [p for p in doc["report"]["points"] if p["held_out"]]
    assert held, "the quick CPU run must leave held-out points"
    rows = []
    for p in held:
        args = ["--model", str(model_yaml), "--gpu", str(hw), "--engine", p["engine"],
                "--batch", str(p["batch"])]
        if p["phase"] == "decode":
            ctx = str(int(p["context"]))
            args += ["--prompt", ctx, "--output", "2", "--context", ctx]
            key = "decode_step_s"
        else:
            args += ["--prompt", str(p["new_tokens"]), "--output", "2"]
            key = "prefill_s"
        calibrated = _predict(capsys, args + ["--profile", str(profile)])[key]
        datasheet = _predict(capsys, args)[key]
        # the CLI with the written profile gives exactly what the fit reported
        assert calibrated == pytest.approx(p["fitted_s"], rel=1e-6)
        assert datasheet == pytest.approx(p["datasheet_s"], rel=1e-6)
        rows.append((calibrated, datasheet, p["measured_s"]))
    return rows


def test_cpu_pipeline_profile_reaches_predict(cpu_run, capsys):
    """Live run: the written profile and hardware spec reach `perfmodel predict` unchanged.
    No claim about accuracy here: these timings come from a shared machine right now."""
    d, doc = cpu_run
    raw = json.loads((d / "raw.json").read_text())
    hw = [Path(w) for w in doc["written"] if Path(w).parent.name == "hardware"]
    assert len(hw) == 1 and (d / "cpu.yaml").is_file() and (d / "cpu.report.md").is_file()
    _held_out_through_cli(capsys, raw, doc, d / "cpu.yaml", hw[0], d)


def test_recorded_cpu_run_fit_moves_toward_measurements(tmp_path, capsys):
    """Recorded run (tests/data/raw-cpu-quick-20261201.json: `calibrate/bench.py --quick
    --device cpu`, OMP_NUM_THREADS=1, on this project's 2-core AMD EPYC dev VM): the fitted
    profile predicts the held-out points better than datasheet-only inputs. Recorded inputs,
    so the outcome does not depend on the load of the machine running the test (issue 17:
    the live version failed at 0.43 vs 0.40 under load)."""
    out = tmp_path / "cpu.yaml"
    assert main(["calibrate", "fit", str(CPU_RAW), "--out", str(out), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    hw = [Path(w) for w in doc["written"] if Path(w).parent.name == "hardware"]
    assert len(hw) == 1
    rows = _held_out_through_cli(capsys, json.loads(CPU_RAW.read_text()), doc, out, hw[0], tmp_path)
    cal_err = [abs(c / m - 1) for c, _, m in rows]
    ds_err = [abs(ds / m - 1) for _, ds, m in rows]
    assert statistics.median(cal_err) < statistics.median(ds_err)


def test_cpu_profile_records_the_run(cpu_run):
    d, doc = cpu_run
    prof = load_profile(d / "cpu.yaml")
    assert prof.gpu.startswith("cpu-") and prof.meta["device"] == "cpu"
    assert prof.meta["torch"] and prof.meta["date"] and prof.meta["points"] > 0
    assert prof.meta["fit_error"]["held_out"]["points"] == doc["report"]["held_out"]["points"]
    # eager timings are host time: the fitted launch cost is kept under the run's host CPU
    assert prof.host and prof.host.startswith(json.loads((d / "raw.json").read_text())["env"]["cpu"]["model_name"])
    assert "launch_s" in prof.hosts[prof.host]["torch-eager"]


# ------------------------------------------------------------------ bad environments


def test_no_gpu_suggests_device_cpu(tmp_path, capsys):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    rc = main(["calibrate", "run", "--device", "cuda", "--quick", "--raw-out",
               str(tmp_path / "raw.json"), "--out", str(tmp_path / "p.yaml")])
    assert rc == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last.startswith("perfmodel calibrate: error:") and "--device cpu" in last
    assert not (tmp_path / "p.yaml").exists()


def test_torch_missing_names_the_install(tmp_path, capsys, monkeypatch):
    real = cal_cli.importlib.util.find_spec
    monkeypatch.setattr(cal_cli.importlib.util, "find_spec",
                        lambda name, *a: None if name == "torch" else real(name, *a))
    rc = main(["calibrate", "run", "--device", "cpu", "--quick", "--raw-out", str(tmp_path / "r.json")])
    assert rc == 2
    err = capsys.readouterr().err
    assert "pip install '.[calibrate]'" in err and len(err.strip().splitlines()) == 1


def test_bench_failure_is_one_clean_error(tmp_path, capsys):
    pytest.importorskip("torch")
    rc = main(["calibrate", "run", "--device", "cpu", "--quick", "--sections", "nonsense",
               "--raw-out", str(tmp_path / "r.json")])
    assert rc == 2
    assert "calibrate/bench.py failed" in capsys.readouterr().err.strip().splitlines()[-1]


def test_interrupted_write_leaves_the_old_profile_whole(tmp_path, monkeypatch, capsys):
    """The profile is replaced atomically: a failure while writing keeps the previous file."""
    out = tmp_path / "h200.yaml"
    assert main(["calibrate", "fit", str(H200_RAW), "--gpu", "h200-sxm", "--out", str(out)]) == 0
    before = out.read_text()
    real_replace = Path.replace

    def failing_replace(self, target):
        if Path(target) == out:
            raise OSError("disk full (simulated)")
        return real_replace(self, target)

    monkeypatch.setattr(Path, "replace", failing_replace)
    assert main(["calibrate", "fit", str(H200_RAW), "--gpu", "h200-sxm", "--out", str(out)]) == 2
    assert "disk full" in capsys.readouterr().err
    assert out.read_text() == before
    assert load_profile(out).gpu == "h200-sxm"
