"""Serving validation of disaggregated rows: each pool mapped by hand, attention-DP ranks,
experts over the DP ranks, recipes per harness, and which predictor answers them."""

from perfmodel.analysis.validation import serving_predict as sp
from perfmodel.analysis.validation.serving_map import Capabilities, ServingTarget, ServingUnmapped

from serving_rows import map_row


# ------------------------------------------------------------------ disaggregated rows

def _disagg_row(**over):
    # the layout of the data file's Kimi-K2.5 GB200 rows: 1 prefill worker (tp1, dp4, ep4),
    # 4 decode workers (tp8, ep8), decode_batch_size 48 per worker
    base = dict(mode="disagg", model_path="deepseek-ai/DeepSeek-V3", system="gb200",
                precision="fp4", gemm_quant_mode="nvfp4", moe_quant_mode="nvfp4", batch_size="",
                tp_size="", pp_size="", attention_dp_size="", moe_tp_size="", moe_ep_size="",
                prefill_batch_size=1, prefill_num_workers=1, prefill_tp_size=1, prefill_pp_size=1,
                prefill_attention_dp_size=4, prefill_moe_tp_size=1, prefill_moe_ep_size=4,
                decode_batch_size=48, decode_num_workers=4, decode_tp_size=8, decode_pp_size=1,
                decode_attention_dp_size=1, decode_moe_tp_size=1, decode_moe_ep_size=8)
    base.update(over)
    return base


def test_disagg_row_maps_each_pool_by_hand():
    # by hand: concurrency = decode_batch 48 x 4 workers x dp 1 = 192 (the file's id says c192);
    # GPUs = 1 x (1 x 1 x 4) + 4 x (8 x 1 x 1) = 36; prefill max batch = prefill_batch_size 1
    # x attention DP 4; decode max batch = decode_batch_size 48 x attention DP 1
    t = map_row(Capabilities(disagg=True), **_disagg_row())
    assert isinstance(t, ServingTarget)
    assert t.prefill == dict(workers=1, tp=1, pp=1, ep=4, dp=4, max_batch=4)
    assert t.decode == dict(workers=4, tp=8, pp=1, ep=8, dp=1, max_batch=48)
    assert (t.concurrency, t.num_gpus) == (192, 36)


def test_disagg_concurrency_counts_attention_dp_ranks_and_falls_back_to_the_id():
    # decode_batch_size is per attention-DP rank: 8 x 1 worker x dp 32 = 256 (id: c256)
    t = map_row(Capabilities(disagg=True), **_disagg_row(decode_batch_size=8, decode_num_workers=1,
                                                      decode_tp_size=1, decode_attention_dp_size=32,
                                                      decode_moe_ep_size=32))
    assert t.concurrency == 256 and t.decode["dp"] == 32
    # and the worker runs decode_batch_size per rank on each of its 32 ranks: 8 x 32 = 256
    assert t.decode["max_batch"] == 256
    t = map_row(Capabilities(disagg=True), **_disagg_row(id="x_disagg_8192x1024_c25_tp4",
                                                      decode_batch_size="", decode_num_workers=""))
    assert t.concurrency == 25 and t.decode["workers"] == 1
    assert any("decode workers not stated" in a for a in t.assumptions)


def test_disagg_moe_tp_over_the_attention_dp_ranks_shards_the_experts():
    # the file's SGLang GB200 rows: attention DP 4 with moe_tp 4, moe_ep 1 on 4 GPUs: each
    # GPU holds a quarter of every expert, written as EP 4 (same bytes per GPU)
    t = map_row(Capabilities(disagg=True), **_disagg_row(prefill_moe_tp_size=4, prefill_moe_ep_size=1))
    assert (t.prefill["ep"], t.prefill["dp"], t.prefill["tp"]) == (4, 4, 1)
    assert any("moe_tp 4 x moe_ep 1" in a for a in t.assumptions)
    t = map_row(Capabilities(disagg=True), **_disagg_row(prefill_batch_size=""))
    assert "max_batch" not in t.prefill                  # unstated: the engine's limit


def test_inferencex_disagg_rows_keep_the_engines_prefill_batch_aic_rows_the_generators():
    # InferenceX (db-dump) rows state prefill_batch_size 1 everywhere while their Dynamo
    # recipes run ctx max_batch_size 16 at 1k/1k (performance_sweeps configs): not read;
    # AIConfigurator's generator writes the column as the prefill max_batch_size: 1 x dp 4
    imax = map_row(Capabilities(disagg=True), **_disagg_row(
        source="db-dump/2026-04-27 measured 2026-03-23 image tensorrtllm-runtime:0.8.1.post1"))
    assert "max_batch" not in imax.prefill
    assert any("prefill_batch_size 1 not read" in a for a in imax.assumptions)
    aic = map_row(Capabilities(disagg=True), **_disagg_row(source="aic gap analysis measured 2026-03-06"))
    assert aic.prefill["max_batch"] == 4
    assert not any("prefill_batch_size 1 not read" in a for a in aic.assumptions)


def test_disagg_rows_need_a_disaggregated_predictor():
    u = map_row(**_disagg_row())
    assert isinstance(u, ServingUnmapped) and "disaggregated" in u.reason


def test_disagg_levels_above_the_work_bound_are_listed_not_simulated(monkeypatch):
    # a bound on validation work: levels above DISAGG_SIM_MAX_CONCURRENCY get the stated
    # reason; only the levels within it reach the simulator
    from perfmodel import api
    seen = []

    def fake(*a, concurrencies, **kw):
        seen.extend(concurrencies)
        return type("R", (), {"points": []})()

    monkeypatch.setattr(api, "serve_disagg", fake)
    t = map_row(Capabilities(disagg=True), **_disagg_row())
    c = sp.DISAGG_SIM_MAX_CONCURRENCY
    got = sp.simulated(t, [c, c + 1, 4 * c], None, sp._Specs())
    assert seen == [c]
    assert got[c + 1] == got[4 * c] == sp.BOUND_REASON and "bound on validation work" in got[c + 1]


def test_the_default_predictor_simulates_no_disaggregated_row():
    assert not sp.get_predictor(None).capabilities.disagg
    u = map_row(sp.get_predictor(None).capabilities, **_disagg_row())
    assert isinstance(u, ServingUnmapped) and "disaggregated" in u.reason
