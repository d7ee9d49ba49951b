"""InferenceX vLLM scripts that launch tensor parallelism only
(serving_recipe_vllm.INFERENCEX_VLLM_TP_ONLY_SCRIPTS): the simulator runs the row's GPUs as TP,
experts sharded tensor-parallel, one attention group, whatever ep / attention DP the row states."""

from __future__ import annotations

import pytest

from perfmodel.analysis.validation.serving_recipe import recipe_for
from perfmodel.analysis.validation.serving_map import Capabilities
from serving_rows import map_row

# a db-dump row of the serving file (Kimi-K2.5 NVFP4, 4 x B200, vLLM 0.17.0, 1k/1k, C = 4)
IMAX = "db-dump/2026-04-27 measured 2026-03-27 image vllm/vllm-openai:v0.17.0"


def _kimi(system: str = "b200_sxm", source: str = IMAX, **over):
    fields = dict(backend="vllm", backend_version="0.17.0", model_path="moonshotai/Kimi-K2.5",
                  system=system, precision="fp4", gemm_quant_mode="nvfp4",
                  moe_quant_mode="nvfp4", batch_size="1", tp_size="4", attention_dp_size="4",
                  moe_tp_size="1", moe_ep_size="16", source=source)
    fields.update(over)
    return map_row(Capabilities(attention_dp=True), **fields)


def _launched(monkeypatch, t) -> dict:
    """The layout serving_predict.simulated hands to api.make_query for the row."""
    from perfmodel import api
    from perfmodel.analysis.validation import serving_predict as sp

    class Seen(Exception):
        pass

    def capture(**kw):
        raise Seen({k: kw[k] for k in ("tp", "ep", "dp")})

    monkeypatch.setattr(api, "make_query", capture)
    with pytest.raises(Seen) as got:
        sp.simulated(t, [t.concurrency], None, sp._Specs())
    return got.value.args[0]


@pytest.mark.parametrize("gpu", ["b200", "b300"])
def test_kimi_nvfp4_scripts_launch_tp_only(gpu):
    # kimik2.5_fp4_{b200,b300}.sh: `vllm serve --tensor-parallel-size=$TP`, no
    # --enable-expert-parallel, no --data-parallel-size
    r = recipe_for(IMAX, "vllm", 1024, concurrency=4, gpu=gpu, output=1024, model="kimi-k2.5",
                   weights="fp4", version="0.17.0")
    assert (r.expert_parallel, r.attention_dp) == (1, 1)
    assert any("kimik2.5_fp4_" + gpu + ".sh" in n for n in r.notes)


def test_the_attention_dp_encoding_is_replayed_as_tp_over_the_same_gpus(monkeypatch):
    # the file: tp 4 x attention_dp 4, moe_ep 16 (the mapping: 4 GPUs, tp 1 x dp 4, ep 4); the
    # script ran TP 4 on those 4 GPUs, experts TP-sharded
    t = _kimi()
    assert (t.tp, t.ep, t.attention_dp, t.concurrency) == (1, 4, 4, 4)   # the file's layout
    assert _launched(monkeypatch, t) == dict(tp=4, ep=1, dp=1)


def test_the_ep_encoding_is_replayed_as_tp(monkeypatch):
    t = _kimi(batch_size="4", attention_dp_size="1", moe_ep_size="4",
              source="aic gap analysis measured 2026-03-11 image image=vllm/vllm-openai:v0.17.0")
    assert (t.tp, t.ep, t.attention_dp) == (4, 4, 1)
    assert _launched(monkeypatch, t) == dict(tp=4, ep=1, dp=1)


def test_other_rows_keep_their_layout(monkeypatch):
    # AIConfigurator's own harness, a disaggregated pool, another model's script (the
    # MiniMax-M2.5 scripts pass --enable-expert-parallel and, on B300 FP4, DP_ATTENTION)
    aic = _kimi(source="aic gap analysis")
    assert aic.recipe.attention_dp is None and aic.recipe.expert_parallel is None
    assert _launched(monkeypatch, aic) == dict(tp=1, ep=4, dp=4)
    for model, weights in (("minimax-m2.5", "fp8"), ("minimax-m2.5", "fp4")):
        r = recipe_for(IMAX, "vllm", 1024, concurrency=4, gpu="b300", output=1024, model=model,
                       weights=weights, version="0.19.0")
        assert (r.expert_parallel, r.attention_dp) == (None, None)
    r = recipe_for(IMAX, "vllm", 1024, concurrency=4, gpu="b200", output=1024,
                   model="kimi-k2.5", weights="fp4", disagg=True)
    assert (r.expert_parallel, r.attention_dp) == (None, None)
