"""vLLM's async scheduling as a version property (analysis/validation/serving_recipe_vllm.py):
the `vllm` preset follows the current default (on since 0.14.0, vllm-project/vllm#27614,
first released in 0.14.0: torch-spyre/sendnn-inference#636 "Disables async scheduling which is
now enabled by default"), a serving row of an older version runs the synchronous loop, and the
validation passes the row's version to the simulator (Recipe.overlap_scheduler)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from perfmodel.analysis.validation.serving_map import map_serving_row
from perfmodel.analysis.validation.serving_predict import _with_recipe
from perfmodel.analysis.validation.serving_recipe import recipe_for
from perfmodel.analysis.validation.serving_recipe_vllm import vllm_async_scheduling
from perfmodel.analysis.validation.serving_table import rows_from_dicts
from perfmodel.core.engines import ENGINES
from perfmodel.core.resolve import resolve

# the serving file's image-less InferenceMAX Llama-70B import (serving_recipe, Provenance)
LLAMA70B = "aic gap analysis measured 2025-10-29"
AIC = "aic gap analysis measured 2026-03-20"


@pytest.mark.parametrize("version,want", [
    ("0.11.0", False), ("0.12.0", False), ("0.13.0", False),   # releases before vllm#27614
    ("0.14.0", True), ("0.15.1", True), ("0.19.0", True), ("v0.14.1", True), ("1.0", True),
    ("nightly-5b8c30d62b754b57", True),                         # the file's April 2026 nightly
])
def test_async_scheduling_from_0_14_0(version, want):
    on, note = vllm_async_scheduling(version)
    assert on is want and "vllm#27614" in note


def test_no_version_keeps_the_preset_unless_measured_before_the_merge():
    assert vllm_async_scheduling(None)[0] is None
    assert vllm_async_scheduling("")[0] is None
    on, note = vllm_async_scheduling(None, before_merge=True)
    assert on is False and "before 0.14.0" in note


def test_the_vllm_preset_follows_the_current_default():
    assert ENGINES["vllm"].scheduler.overlap_scheduler is True


def test_recipe_carries_the_rows_version_and_says_so():
    old = recipe_for(AIC, "vllm", 1024, version="0.12.0")
    new = recipe_for(AIC, "vllm", 1024, version="0.19.0")
    sweep = recipe_for(LLAMA70B, "vllm", 1024, concurrency=4, gpu="h200-sxm", output=1024)
    assert (old.overlap_scheduler, new.overlap_scheduler) == (False, True)
    assert any("predates async scheduling" in n for n in old.notes)
    # the 70B sweep's scripts pass `async-scheduling: true` (serving_recipe_vllm)
    assert sweep.overlap_scheduler is True
    assert any("async-scheduling: true" in n for n in sweep.notes)
    assert old.key() != new.key()                  # predicted apart
    # other engines: untouched by the vLLM rule
    assert recipe_for(AIC, "sglang", 1024, version="0.12.0").overlap_scheduler is None
    assert recipe_for(AIC, "trtllm", 1024, version="0.12.0").overlap_scheduler is None


def test_the_simulated_scheduler_gets_the_rows_version():
    sc, _, _ = resolve("llama-3.1-8b", "h100-sxm", engine="vllm")
    off = _with_recipe(sc, recipe_for(AIC, "vllm", 1024, version="0.12.0")).engine.scheduler
    on = _with_recipe(sc, recipe_for(AIC, "vllm", 1024, version="0.19.0")).engine.scheduler
    assert off.overlap_scheduler is False and on.overlap_scheduler is True


def test_a_mapped_vllm_row_says_which_loop_it_ran():
    # the cells of tests/test_serving_recipe.py's row, which maps
    row = dict(id="t", backend="vllm", backend_version="0.12.0",
               model_path="meta-llama/Llama-3.1-8B", system="h100_sxm", precision="", mode="agg",
               isl="1024", osl="128", gemm_quant_mode="", moe_quant_mode="", batch_size="8",
               tp_size="1", pp_size="1", attention_dp_size="1", moe_tp_size="1",
               moe_ep_size="1", silicon_ttft_ms="100", silicon_tpot_ms="10", source=AIC)
    t = map_serving_row(rows_from_dicts("t", [row])[0])
    assert t.recipe.overlap_scheduler is False
    assert any("0.12.0 predates async scheduling" in a for a in t.assumptions)


@given(version=st.one_of(st.none(), st.text(max_size=16)), before=st.booleans())
def test_any_version_string_gives_a_flag_and_a_note(version, before):
    on, note = vllm_async_scheduling(version, before_merge=before)
    assert on in (True, False, None) and note


def test_a_script_flag_holds_over_the_versions_default():
    # InferenceX benchmarks/70b_fp8_h200_slurm.sh etc. write `async-scheduling: true` into the
    # server config: on even for a release before 0.14.0, whose default is off
    for version in (None, "0.11.0", "0.13.0", "0.19.0"):
        on, note = vllm_async_scheduling(version, before_merge=True, script_async=True)
        assert on is True and "async-scheduling: true" in note
    assert vllm_async_scheduling("0.11.0", script_async=False)[0] is False


@pytest.mark.parametrize("gpu", ["h100-sxm", "h200-sxm", "b200"])
def test_every_gpu_of_the_70b_sweep_runs_the_overlapped_loop(gpu):
    # all three scripts of the sweep (70b_fp8_h100_slurm.sh, 70b_fp8_h200_slurm.sh,
    # 70b_fp8_b200_docker.sh) carry the flag; another aic row without a version keeps the preset
    assert recipe_for(LLAMA70B, "vllm", 1024, concurrency=16, gpu=gpu, output=1024,
                      tp=4).overlap_scheduler is True
    assert recipe_for(AIC, "vllm", 1024, gpu=gpu).overlap_scheduler is None
