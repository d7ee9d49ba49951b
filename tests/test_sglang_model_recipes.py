"""Per-model receive intervals of InferenceX's SGLang scripts
(analysis/validation/serving_recipe_sglang.py) against the shared Blackwell rule
(serving_recipe._inferencemax_recv: 10 below C=16, 30 from it)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from perfmodel.analysis.validation.serving_recipe import recipe_for
from perfmodel.analysis.validation.serving_recipe_sglang import sglang_model_flags
from serving_rows import map_row

IMAX = "db-dump/2026-04-27 measured 2026-04-17 image lmsysorg/sglang:v0.5.9-cu130"


def _recv(model: str, gpu: str, weights: str, conc: int, disagg: bool = False):
    return recipe_for(IMAX, "sglang", 1024, concurrency=conc, gpu=gpu, output=1024,
                      model=model, weights=weights, disagg=disagg).recv_interval_steps


@pytest.mark.parametrize("model, gpu, weights, conc, want", [
    # qwen3.5_fp4_b200.sh: 30 at every concurrency
    ("qwen3.5-397b-a17b", "b200", "fp4", 4, 30), ("qwen3.5-397b-a17b", "b200", "fp4", 8, 30),
    ("qwen3.5-397b-a17b", "b200", "fp4", 64, 30),
    # the shared rule where the scripts follow it (qwen3.5_fp8_b200.sh, qwen3.5_bf16_b200.sh,
    # qwen3.5_{fp4,bf16}_b300.sh, dsr1_fp4_b200.sh)
    ("qwen3.5-397b-a17b", "b200", "fp8", 8, 10), ("qwen3.5-397b-a17b", "b200", "fp8", 16, 30),
    ("qwen3.5-397b-a17b", "b200", "bf16", 8, 10), ("qwen3.5-397b-a17b", "b300", "fp4", 8, 10),
    ("qwen3.5-397b-a17b", "b300", "fp4", 16, 30),
    ("deepseek-v3", "b200", "fp4", 8, 10), ("deepseek-v3", "b200", "fp4", 16, 30),
    # glm5_fp8_b200.sh / glm5_fp8_b300.sh pass none (SGLang polls every step); glm5_fp4_b200.sh
    # passes 10 at every concurrency
    ("glm-5", "b200", "fp8", 4, None), ("glm-5", "b200", "fp8", 64, None),
    ("glm-5", "b300", "fp8", 16, None), ("glm-5", "b200", "fp4", 4, 10),
    ("glm-5", "b200", "fp4", 64, 10),
    # no interval on the H200 (its scripts pass none)
    ("qwen3.5-397b-a17b", "h200-sxm", "fp8", 64, None), ("deepseek-v3", "h200-sxm", "fp8", 64, None),
])
def test_each_script_gets_its_own_receive_interval(model, gpu, weights, conc, want):
    assert _recv(model, gpu, weights, conc) == want


@pytest.mark.parametrize("version, conc, want", [
    # qwen3.5_fp8_b300.sh (every stored version) passes 10 at every concurrency; its config
    # (InferenceX PR #1048) ran the v0.5.10.post1 image
    ("0.5.10.post1", 4, 10), ("0.5.10.post1", 16, 10), ("0.5.10.post1", 256, 10),
    ("v0.5.11", 64, 10),
    # rows of an older release predate that config: the shared Blackwell rule (10 below C=16)
    ("0.5.9", 4, 10), ("0.5.9", 16, 30), ("0.5.9", 128, 30),
    # a nightly or unknown version cannot be placed after the config's start: the shared rule
    ("nightly-dev", 16, 30), (None, 16, 30),
])
def test_qwen35_fp8_b300_script_applies_from_its_configs_release(version, conc, want):
    r = recipe_for(IMAX, "sglang", 1024, concurrency=conc, gpu="b300", output=1024,
                   model="qwen3.5-397b-a17b", weights="fp8", version=version)
    assert r.recv_interval_steps == want
    ran = version in ("0.5.10.post1", "v0.5.11")
    assert any("qwen3.5_fp8_b300.sh" in n for n in r.notes) == ran


def test_the_b300_fp8_script_does_not_reach_other_formats_or_gpus():
    for gpu, weights in (("b300", "fp4"), ("b300", "bf16"), ("b200", "fp8")):
        r = recipe_for(IMAX, "sglang", 1024, concurrency=16, gpu=gpu, output=1024,
                       model="qwen3.5-397b-a17b", weights=weights, version="0.5.10.post1")
        assert r.recv_interval_steps == 30


def test_the_recipe_says_which_script_set_the_interval():
    r = recipe_for(IMAX, "sglang", 1024, concurrency=4, gpu="b200", output=1024,
                   model="qwen3.5-397b-a17b", weights="fp4")
    assert any("qwen3.5_fp4_b200.sh" in n and "30" in n for n in r.notes)
    # and does not claim the shared rule it replaced
    assert not any("10 below C=16" in n for n in r.notes)


def test_qwen35_keeps_its_radix_cache_off_everywhere():
    for gpu in ("b200", "b300", "h200-sxm"):
        r = recipe_for(IMAX, "sglang", 1024, concurrency=4, gpu=gpu, output=1024,
                       model="qwen3.5-397b-a17b", weights="fp8")
        assert r.radix_cache is False
    assert recipe_for(IMAX, "sglang", 1024, concurrency=4, gpu="b200", output=1024,
                      model="glm-5", weights="fp8").radix_cache is None


def test_disaggregated_workers_keep_their_own_rule():
    # the dynamo-sglang workers' interval (serving_recipe.INFERENCEMAX_SGLANG_DISAGG_RECV_INTERVAL)
    assert _recv("qwen3.5-397b-a17b", "b200", "fp4", 4, disagg=True) == 10


@given(model=st.text(max_size=20), engine=st.sampled_from(["sglang", "vllm", "trtllm", "x"]),
       gpu=st.one_of(st.none(), st.sampled_from(["b200", "b300", "h200-sxm", "h100-sxm"]),
                     st.text(max_size=8)),
       weights=st.one_of(st.none(), st.sampled_from(["fp8", "fp4", "bf16"]), st.text(max_size=6)),
       disagg=st.booleans())
def test_any_input_gives_none_or_typed_overrides(model, engine, gpu, weights, disagg):
    out = sglang_model_flags(model, engine, gpu, weights, disagg)
    if out is None:
        return
    fields, notes = out
    assert set(fields) <= {"recv_interval_steps", "radix_cache", "expert_parallel",
                           "kv_memory_fraction"} and notes
    assert fields.get("expert_parallel") in (None, 1)
    assert engine == "sglang"
    recv = fields.get("recv_interval_steps")
    assert recv is None or (isinstance(recv, int) and recv > 1)
    assert ("recv_interval_steps" not in fields or recv is not None
            or (model or "").lower().startswith("glm-5"))
    assert ("radix_cache" in fields) == (model or "").lower().startswith("qwen3.5")


def _qwen35_row(system: str, source: str = IMAX, **over):
    fields = dict(backend="sglang", backend_version="0.5.9",
                  model_path="Qwen/Qwen3.5-397B-A17B", system=system, precision="fp8",
                  gemm_quant_mode="fp8", moe_quant_mode="fp8_block", batch_size="4",
                  tp_size="8", attention_dp_size="1", moe_tp_size="1", moe_ep_size="8",
                  source=source)
    fields.update(over)
    return map_row(**fields)


def test_qwen35_fp8_h200_runs_its_experts_tensor_parallel():
    # qwen3.5_fp8_h200.sh launches `--tp $TP` and never passes EP_SIZE: SGLang's ep_size stays 1
    r = recipe_for(IMAX, "sglang", 1024, concurrency=4, gpu="h200-sxm", output=1024,
                   model="qwen3.5-397b-a17b", weights="fp8")
    assert r.expert_parallel == 1
    assert any("qwen3.5_fp8_h200.sh" in n and "ep 1" in n for n in r.notes)
    t = _qwen35_row("h200_sxm")
    assert (t.tp, t.ep, t.recipe.expert_parallel) == (8, 8, 1)   # the file's ep, the script's
    assert any("without --ep-size" in a for a in t.assumptions)


def _simulated_ep(monkeypatch, t) -> int:
    """The expert-parallel size the simulator's query for row `t` asks for."""
    from perfmodel import api
    from perfmodel.analysis.validation import serving_predict as sp

    class Seen(Exception):
        pass

    def capture(**kw):
        raise Seen(kw["ep"])

    monkeypatch.setattr(api, "make_query", capture)
    with pytest.raises(Seen) as got:
        sp.simulated(t, [4], None, sp._Specs())
    return got.value.args[0]


def test_the_simulator_runs_the_scripts_expert_parallel(monkeypatch):
    for system, tp, ep, want in (("h200_sxm", "8", "8", 1), ("b200_sxm", "4", "4", 4)):
        t = _qwen35_row(system, tp_size=tp, moe_ep_size=ep)
        assert _simulated_ep(monkeypatch, t) == want


@pytest.mark.parametrize("system, weights", [("b200_sxm", "fp8"), ("b300_sxm", "fp8")])
def test_other_scripts_keep_the_rows_expert_parallel(system, weights):
    # qwen3.5_fp8_b200.sh passes --ep-size $EP_SIZE; the B300 script --expert-parallel-size
    r = recipe_for(IMAX, "sglang", 1024, concurrency=4, gpu=system.split("_")[0], output=1024,
                   model="qwen3.5-397b-a17b", weights=weights)
    assert r.expert_parallel is None
    t = _qwen35_row(system, tp_size="4", moe_ep_size="4")
    assert (t.tp, t.ep, t.recipe.expert_parallel) == (4, 4, None)


def test_disaggregated_and_other_harness_rows_keep_the_stated_expert_parallel():
    assert recipe_for(IMAX, "sglang", 1024, concurrency=4, gpu="h200-sxm", output=1024,
                      model="qwen3.5-397b-a17b", weights="fp8",
                      disagg=True).expert_parallel is None
    # a row of another harness (no InferenceX provenance) is not the script's
    t = _qwen35_row("h200_sxm", source="some other bench")
    assert (t.ep, t.recipe.expert_parallel) == (8, None)


# The DeepSeek R1 fp4 B200 script before InferenceX PR #204 launched `--enable-ep-moe`, which
# SGLang turns into ep_size = tp_size (InferenceX PR #242 thread; SGLang deprecated-arguments
# table); its config gave no ep, so the file says moe_ep_size 1 for those rows.
NOV = "db-dump/2026-04-27 measured 2025-11-10"


@pytest.mark.parametrize("source, gpu, weights, tp, disagg, want", [
    (NOV, "b200", "fp4", 4, False, 4), (NOV, "b200", "fp4", 8, False, 8),
    ("db-dump/2026-04-27 measured 2025-11-02", "b200", "fp4", 8, False, 8),
    # later configs state ep = tp themselves (PR #204); the fp8 script had no --enable-ep-moe
    (IMAX, "b200", "fp4", 4, False, None), (NOV, "b200", "fp8", 8, False, None),
    # other GPUs, disaggregated workers, other harnesses and TP 1 keep the row's
    (NOV, "b300", "fp4", 4, False, None), (NOV, "b200", "fp4", 4, True, None),
    ("some other bench measured 2025-11-10", "b200", "fp4", 4, False, None),
    (NOV, "b200", "fp4", 1, False, None),
])
def test_the_autumn_2025_dsr1_fp4_b200_script_ran_expert_parallel_tp(source, gpu, weights, tp,
                                                                       disagg, want):
    r = recipe_for(source, "sglang", 1024, concurrency=4, gpu=gpu, output=1024, tp=tp,
                   model="deepseek-v3", weights=weights, disagg=disagg)
    assert r.expert_parallel == want
    assert any("--enable-ep-moe" in n for n in r.notes) == (want is not None)


def test_the_simulator_runs_tp_experts_on_the_autumn_2025_dsr1_fp4_b200_rows(monkeypatch):
    t = map_row(backend="sglang", backend_version="", model_path="deepseek-ai/DeepSeek-V3",
                system="b200_sxm", precision="fp4", gemm_quant_mode="nvfp4",
                moe_quant_mode="nvfp4", batch_size="4", tp_size="8", attention_dp_size="1",
                moe_tp_size="8", moe_ep_size="1", source=NOV)
    assert (t.tp, t.ep, t.recipe.expert_parallel) == (8, 1, 8)   # the file's ep, the script's
    assert _simulated_ep(monkeypatch, t) == 8


@pytest.mark.parametrize("source, disagg, cold", [
    (NOV, False, True), ("db-dump/2026-04-27 measured 2025-12-15", False, True),
    ("db-dump/2026-04-27 measured 2026-01-29", False, False), (IMAX, False, False),
    # srt-slurm's sa-bench drains its own warm-up (serving_recipe docstring)
    (NOV, True, False),
])
def test_inferencex_rows_before_the_warmup_pr_say_they_ran_cold(source, disagg, cold):
    # InferenceX PR #480 (opened 2026-01-17) added --num-warmups 2C; before it the client
    # (kimbochen/bench_serving) sent one test request, then the measured run
    r = recipe_for(source, "sglang", 1024, concurrency=4, gpu="b200", output=1024,
                   model="deepseek-v3", weights="fp8", disagg=disagg)
    harness = next(n for n in r.notes if n.startswith("harness:"))
    assert ("no warm-up" in harness) == cold
    assert ("2 x C warm-up drained" in harness) == (not cold)
