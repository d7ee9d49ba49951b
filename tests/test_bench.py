"""calibrate/bench.py: the quick CPU run writes every section with the documented fields."""
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "calibrate" / "bench.py"

# per-record keys documented in bench.py's docstring
KEYS = {
    "bandwidth": {"kind", "dtype", "buffer_bytes", "bytes", "seconds", "bytes_per_s", "reps", "inner"},
    "gemm": {"dtype", "layer", "M", "N", "K", "seconds", "flops", "bytes", "flops_per_s", "reps", "inner"},
    "attention": {"kind", "B", "S", "q_heads", "kv_heads", "head_dim", "dtype", "seconds",
                  "kv_bytes", "flops", "reps", "inner"},
    "launch": {"mode", "timing", "kernels", "seconds", "seconds_per_kernel", "host_seconds_per_launch"},
    "e2e": {"model", "mode", "dtype", "phase", "batch", "context", "prompt", "new_tokens", "seconds",
            "tokens_per_s", "kernels", "compile_s", "reps"},
}
ENV_KEYS = {"device", "torch_version", "cuda_version", "python_version", "hostname", "date_utc",
            "argv", "gpu_name", "compute_capability", "sm_count", "l2_bytes", "total_memory_bytes",
            "nvidia_smi_before", "nvidia_smi_after", "cpu_name", "cpu_count", "torch_threads"}
MODEL_KEYS = {"num_layers", "d_model", "num_heads", "num_kv_heads", "head_dim", "ffn_dim", "vocab_size"}


def run_bench(*args, env=None, timeout=300):
    return subprocess.run([sys.executable, str(BENCH), *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def raw(tmp_path_factory):
    pytest.importorskip("torch")
    out = tmp_path_factory.mktemp("bench") / "raw.json"
    proc = run_bench("--quick", "--device", "cpu", "--out", str(out))
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(out.read_text())


def positive_finite(x):
    return isinstance(x, (int, float)) and math.isfinite(x) and x > 0


def test_top_level(raw):
    assert raw["schema_version"] == 1
    assert raw["complete"] is True
    assert set(KEYS) | {"env"} <= set(raw)
    assert ENV_KEYS <= set(raw["env"])
    assert raw["env"]["device"] == "cpu"


@pytest.mark.parametrize("section", sorted(KEYS))
def test_section_records(raw, section):
    part = raw[section]
    assert {"records", "skipped", "elapsed_s"} <= set(part)
    assert part["records"], f"{section} has no records"
    for rec in part["records"]:
        assert KEYS[section] <= set(rec), f"{section} record lacks {KEYS[section] - set(rec)}"
        assert positive_finite(rec["seconds"]), rec
    for skip in part["skipped"]:
        assert {"what", "reason"} <= set(skip)


def test_gemm_and_attention_counts(raw):
    for rec in raw["gemm"]["records"]:
        assert rec["flops"] == 2 * rec["M"] * rec["N"] * rec["K"]
        assert rec["bytes"] > rec["N"] * rec["K"] // 2
    kinds = {r["kind"] for r in raw["attention"]["records"]}
    assert {"sdpa_gqa", "naive"} <= kinds
    for rec in raw["attention"]["records"]:
        assert rec["kv_bytes"] == 2 * rec["B"] * rec["S"] * rec["kv_heads"] * rec["head_dim"] * 2


def test_e2e_has_decode_and_prefill(raw):
    recs = raw["e2e"]["records"]
    assert MODEL_KEYS <= set(raw["e2e"]["model"])
    eager = [r for r in recs if r["mode"] == "eager"]
    assert {r["phase"] for r in eager} == {"decode", "prefill"}
    for r in recs:
        assert MODEL_KEYS <= set(r["model"])
        assert positive_finite(r["tokens_per_s"])
        if r["phase"] == "decode":
            assert r["new_tokens"] == 1 and r["context"] > 0
        else:
            assert r["context"] == 0 and r["prompt"] == r["new_tokens"]


def test_raw_records_what_each_mode_ran_and_the_host(raw):
    """Each e2e mode names the engine preset it implements (perfmodel/core/engines.py), and
    the host CPU (model, clock) is recorded for the host-bound fit (issue 15)."""
    from perfmodel.core.engines import ENGINES
    modes = raw["e2e"]["modes"]
    assert {"eager", "graph", "compile"} <= set(modes)
    assert {m: modes[m]["engine"] for m in ("eager", "graph", "compile")} == {
        "eager": "torch-eager", "graph": "torch-graph", "compile": "torch-compile"}
    assert all(v["engine"] in ENGINES for v in modes.values())
    c = modes["compile"]
    assert c["scope"] == "whole model" and c["compile_mode"] == "reduce-overhead" and c["fullgraph"]
    assert c["cuda_graphs"] is False            # a CPU run has no CUDA graphs, and says so
    cpu = raw["env"]["cpu"]
    assert cpu["model_name"] == raw["env"]["cpu_name"] and cpu["logical_cpus"] >= 1
    assert cpu["mhz_median"] is None or cpu["mhz_median"] > 0


def test_cuda_without_gpu_exits_2():
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA GPU")
    proc = run_bench("--device", "cuda", "--out", "/nonexistent/never-written.json")
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "--device cpu" in lines[0]


def test_without_torch_names_the_extra(tmp_path):
    fake = tmp_path / "torch"
    fake.mkdir()
    (fake / "__init__.py").write_text("raise ImportError('no torch here')\n")
    proc = run_bench("--quick", "--device", "cpu", env={"PYTHONPATH": str(tmp_path), "PATH": ""})
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "pip install '.[calibrate]'" in lines[0]
