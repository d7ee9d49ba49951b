"""MoE and MLA physics: expert-parallel load imbalance, routing kernels, MLA forms."""

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from perfmodel import api
from perfmodel.core.catalog import load_model
from perfmodel.core.memory import kv_cache_bytes, weight_bytes_by_group
from perfmodel.core.efficiency import default_efficiency
from perfmodel.core.engines import ENGINES
from perfmodel.core.expert_load import expert_load_ratios
from perfmodel.core.hardware import load_gpu
from perfmodel.core.ops import mla_flops_per_pair, ops
from perfmodel.core.errors import PerfModelError
from perfmodel.core.parallel import (allreduce_s, group_allreduce_s, hierarchical_hops, link_for,
                                     pipeline_handoffs, shard, validate_deployment)
from perfmodel.core.predict import pp_bubble_fraction
from perfmodel.core.predict import step as predict_step
from perfmodel.core.resolve import resolve
from perfmodel.core.roofline import step_time
from perfmodel.core.specs import Deployment, Precision

BF16 = Precision.of("bf16")


def _exact_max_load_one_token(num_experts: int, k: int, ep: int) -> float:
    """E[max_r c_r] for one token by enumerating every split of its k experts over ep ranks
    (multivariate hypergeometric: prod C(G, c_r) / C(E, k))."""
    g = num_experts // ep
    total = math.comb(num_experts, k)
    acc = 0.0
    for split in _splits(k, ep, min(g, k)):
        acc += max(split) * math.prod(math.comb(g, c) for c in split) / total
    return acc


def _splits(k: int, parts: int, cap: int):
    """Every tuple of `parts` counts in 0..cap that sum to k (the tuples of
    itertools.product(range(cap + 1), repeat=parts) with sum k, without the other cap^parts)."""
    if parts == 1:
        if k <= cap:
            yield (k,)
        return
    for c in range(min(cap, k) + 1):
        for rest in _splits(k - c, parts - 1, cap):
            yield (c, *rest)


def test_max_expert_load_mixtral_ep2_one_token_is_40_over_28():
    # by hand: 2 of 8 experts, 4 per rank; split 1-1 with prob 16/28 (max 1), 2-0 or 0-2
    # with prob 12/28 (max 2): E[max] = (16 + 24)/28 = 1.4286 rows, mean 1
    assert _exact_max_load_one_token(8, 2, 2) == pytest.approx(40 / 28)
    load, touched = expert_load_ratios(8, 2, 2, 1)
    assert load == pytest.approx(40 / 28, rel=0.04)   # seeded simulation, 256 draws
    assert touched == pytest.approx(load)             # one token: rows = experts touched


def test_max_expert_load_deepseek_v3_ep8_one_token():
    # DeepSeek-V3 config: 256 routed experts, 8 per token; EP8 -> 32 per rank, mean 1 row
    exact = _exact_max_load_one_token(256, 8, 8)
    assert 2.3 < exact < 2.7                          # the "about 2.5x at B=1"
    load, _ = expert_load_ratios(256, 8, 8, 1)
    assert load == pytest.approx(exact, rel=0.04)


def test_max_expert_load_at_16_tokens_follows_the_normal_limit():
    # mu = 16, sigma^2 = 16 * 8 * (1/8)(7/8)(248/255); expected max of 8 normals 1.4236
    # (Tippett 1925): 1 + 1.4236 * sigma / 16 = 1.33, the "about 1.3x at B=16"
    sigma = math.sqrt(16 * 8 * (1 / 8) * (7 / 8) * 248 / 255)
    load, _ = expert_load_ratios(256, 8, 8, 16)
    assert load == pytest.approx(1 + 1.4236 * sigma / 16, rel=0.05)


def test_uniform_routing_at_the_trtllm_wide_ep_blog_point_is_far_below_its_measurement():
    # TensorRT-LLM blog 4, Table 1: DeepSeek-R1 (256 experts, top-8), EP32, mean 1024 routed
    # rows per rank = 4096 tokens; measured busiest rank 2.564x the mean, by-rank std 491.6.
    # Uniform routing by hand: sigma^2 = 4096 * 8 * (1/32)(31/32)(248/255) -> sigma 31.07 rows;
    # expected max of 32 standard normals 2.07 (Tippett 1925): 1 + 2.07 * 31.07 / 1024 = 1.063
    sigma = math.sqrt(4096 * 8 * (1 / 32) * (31 / 32) * 248 / 255)
    assert sigma == pytest.approx(31.07, abs=0.01)
    load, _ = expert_load_ratios(256, 8, 32, 4096)
    assert load == pytest.approx(1 + 2.07 * sigma / 1024, rel=0.01)
    assert load < 1 + 0.1 * (2.564 - 1)   # popularity, not sampling, is the measured excess


@given(e_per_rank=st.integers(1, 64), ep=st.sampled_from([2, 4, 8, 16]),
       k=st.integers(1, 16), n=st.floats(1, 1e5))
def test_busiest_rank_is_at_least_the_mean_and_tends_to_it(e_per_rank, ep, k, n):
    num_experts = e_per_rank * ep
    k = min(k, num_experts)
    load, touched = expert_load_ratios(num_experts, k, ep, np.array([n, n + 1, 1e7]))
    assert np.all(load >= 1 - 1e-9) and np.all(touched >= 1 - 1e-9)
    # the busiest rank's rows never drop when a token is added (common random numbers)
    assert load[1] * (n + 1) >= load[0] * n - 1e-6
    assert load[2] < 1.01 and touched[2] < 1.01          # -> the mean as tokens grow
    assert load[0] <= min(k, e_per_rank) * ep / k + 1e-9  # a rank holds at most min(k, G) of a token


def test_ep_prices_the_busiest_rank_of_the_routed_experts():
    m = load_model("deepseek-v3")
    lst = ops(m, BF16, 1.0, 1.0, 1024.0)
    tp_only = {o.name: o for o in shard(lst, m, Deployment(tp=8), tokens=1.0)}
    with_ep = {o.name: o for o in shard(lst, m, Deployment(tp=8, ep=8), tokens=1.0)}
    load, touched = expert_load_ratios(256, 8, 8, 1.0)
    assert with_ep["experts"].cost.flops == pytest.approx(tp_only["experts"].cost.flops * load)
    assert with_ep["experts"].cost.weight_bytes == pytest.approx(
        tp_only["experts"].cost.weight_bytes * touched)
    assert with_ep["o_proj"].cost.weight_bytes == tp_only["o_proj"].cost.weight_bytes


def test_mla_flops_per_pair_deepseek_v3():
    # DeepSeek-V3 config.json: 128 heads, kv_lora_rank 512, qk_rope 64, qk_nope 128, v_head 128.
    # DeepSeek-V2 paper sec. 2.1: absorbed 2N(d_c+d_R) + 2N d_c = 2*128*1088 = 278,528;
    # decompressed 2N(d_nope+d_R) + 2N d_v = 2*128*320 = 81,920; ratio 3.4 (the 3.4x).
    absorbed, decompressed = mla_flops_per_pair(load_model("deepseek-v3"))
    assert absorbed == 278_528
    assert decompressed == 81_920
    assert absorbed / decompressed == pytest.approx(3.4)


def test_mla_decode_is_absorbed_and_long_prefill_decompressed():
    m = load_model("deepseek-v3")
    absorbed, decompressed = mla_flops_per_pair(m)
    L = m.num_layers
    S = 4096.0
    dec = [o for o in ops(m, BF16, 1.0, 1.0, S) if o.name == "attention"][0]
    assert dec.cost.flops == pytest.approx((S + 1) * absorbed * L)
    T = 32768.0
    pre = [o for o in ops(m, BF16, 1.0, T, 0.0) if o.name == "attention"][0]
    assert pre.cost.flops == pytest.approx(T * (T + 1) / 2 * decompressed * L)


def test_kernels_per_layer_grow_with_moe_and_mla_but_not_for_dense_models():
    # torch-eager issues every kernel from the CPU, so cpu_s counts them:
    # cpu = kernels * launch_s + overhead. Llama: the engine's k per layer plus 7 outside
    # the layers (embedding, final norm, lm_head, 4 sampling kernels).
    hw, eng = load_gpu("h100-sxm"), ENGINES["torch-eager"]
    eff = default_efficiency(hw)

    def kernels(model_id):
        m = load_model(model_id)
        est = step_time(m, hw, BF16, eng, eff, 1, 1, 128, dep=Deployment(tp=8))
        return (est.cpu_s - eng.cpu_overhead_per_step_s) / eng.launch_s

    k = eng.kernels_per_layer          # the preset's count for a dense Llama layer
    assert kernels("llama-3.1-70b") == pytest.approx(k * 80 + 7)
    # DeepSeek-V3 op list, by hand per layer: input norm, 5 MLA projections, 3 latent
    # norm/rope kernels, attention, 2 residuals, post-attention norm, activation (14);
    # 3 dense layers add up/down (2 each); 58 MoE layers add router, shared up/down, 3 expert
    # GEMMs, 2 routing, permute, combine (10 each): 14*61 + 2*3 + 10*58 = 1440 kernels, vs
    # 13 per layer for its dense twin -> k * 1440 / 13 engine kernels.
    assert kernels("deepseek-v3") == pytest.approx(k * 1440 / 13 + 7)


# ----------------------------------------------------------------- topology and pipelines

def test_hierarchical_allreduce_hop_counts():
    # TP16 over two HGX boards of 8: reduce-scatter + all-gather inside a board take
    # ceil(log2 8) = 3 steps each; the all-reduce across the 2 boards 2*ceil(log2 2) = 2
    assert hierarchical_hops(16, 8) == (6, 2)
    assert hierarchical_hops(64, 8) == (6, 6)      # 8 boards: 2*ceil(log2 8) across
    assert hierarchical_hops(8, 8) == (6, 0)       # one board: a flat all-reduce
    assert hierarchical_hops(16, 72) == (8, 0)     # GB200 NVL72: TP16 stays on NVLink


def test_tp16_across_two_hgx_boards_moves_a_sixth_of_the_flat_ring_time():
    # H100 hardware_db: NVLink 450 GB/s, InfiniBand NDR 50 GB/s per GPU. A large message
    # (latency negligible): flat ring over IB 2*15/16 B/50e9; hierarchical
    # 2*7/8 B/450e9 + 2*1/2*(B/8)/50e9 -> ratio (1.75/450 + 0.125/50) / (1.875/50) = 0.170
    hw = load_gpu("h100-sxm")
    eff = default_efficiency(hw)
    nbytes = 1e12
    hier = group_allreduce_s(nbytes, 16, hw, Deployment(tp=16), eff)
    flat = allreduce_s(nbytes, 16, hw.inter_node_link, eff)
    assert hier / flat == pytest.approx((1.75 / 450 + 0.125 / 50) / (1.875 / 50), rel=1e-3)


def test_gb200_nvl72_accepts_tp16_on_nvlink():
    hw = load_gpu("gb200")
    assert hw.inter_node_link is None and hw.scale_up_gpus == 72
    eff = default_efficiency(hw)
    dep = Deployment(tp=16)
    assert link_for(hw, dep) is hw.intra_node_link
    assert group_allreduce_s(1e6, 16, hw, dep, eff) == allreduce_s(1e6, 16, hw.intra_node_link, eff)


def test_tp_beyond_the_domain_without_an_inter_node_link_is_a_one_line_error():
    hw = load_gpu("h100-sxm").model_copy(update={"inter_node_link": None})
    with pytest.raises(PerfModelError, match="scale-up domain of 8 GPUs.*no inter-node link"):
        link_for(hw, Deployment(tp=16))


def test_pipeline_handoffs_cross_nodes_only_at_board_boundaries():
    hw = load_gpu("h100-sxm")
    assert pipeline_handoffs(hw, Deployment(tp=8, pp=2)) == (0, 1)   # one stage per board
    assert pipeline_handoffs(hw, Deployment(tp=2, pp=8)) == (6, 1)   # 4 stages per board
    assert pipeline_handoffs(hw, Deployment(tp=1, pp=4)) == (3, 0)


def test_pp_bubble_fraction():
    # GPipe (Huang et al. 2019): bubble (p-1)/(m+p-1): 2 stages, 4 micro-batches -> 1/5
    assert pp_bubble_fraction(2, 4) == pytest.approx(0.2)
    assert pp_bubble_fraction(4, 1) == pytest.approx(0.75)
    assert pp_bubble_fraction(8, 1e9) == pytest.approx(0.0, abs=1e-6)


def test_pipelined_prefill_of_four_long_prompts_fills_and_drains():
    # 4 prompts, TP8 x PP2: one prompt per micro-batch, (4 + 2 - 1) stage times of half a
    # full pass each = 2.5 full passes of one prompt: the bubble 1/5 of the 4/2 ideal
    sc, _, _ = resolve("llama-3.1-405b", "h100-sxm", weights="fp8", tp=8, pp=2)
    one = predict_step(sc, 1.0, 8192.0, 0.0, fill=True).time_s
    four = predict_step(sc, 4.0, 8192.0, 0.0, fill=True).time_s
    ideal = 4 / 2 * one
    assert four == pytest.approx(ideal / (1 - pp_bubble_fraction(2, 4)), rel=1e-6)


# ----------------------------------------------------------------- attention DP x expert EP

def test_dp_attention_replicates_attention_and_spreads_experts():
    m = load_model("deepseek-v3")
    p = Precision.of("fp8")
    one = weight_bytes_by_group(m, p, Deployment())
    dp8 = weight_bytes_by_group(m, p, Deployment(tp=1, dp=8, ep=8))
    assert dp8["experts"] == pytest.approx(one["experts"] / 8)
    assert dp8["attention"] == pytest.approx(one["attention"])          # replicated per group
    # MLA's latent is whole on every TP rank (kv_replication) but each DP group keeps only
    # its B/dp sequences: 64 sequences over dp=8 -> 8 sequences' latents per GPU
    tp8 = kv_cache_bytes(m, p, batch=64, context=1024, dep=Deployment(tp=8, ep=8))
    dp = kv_cache_bytes(m, p, batch=64, context=1024, dep=Deployment(tp=1, dp=8, ep=8))
    assert tp8 == pytest.approx(kv_cache_bytes(m, p, batch=64, context=1024))
    assert dp == pytest.approx(tp8 / 8)


def test_dp_groups_run_attention_on_their_share_of_the_batch():
    m = load_model("deepseek-v3")
    hw = load_gpu("h200-sxm")
    eff, eng = default_efficiency(hw), ENGINES["sglang"]
    p = Precision.of("fp8")
    dp = step_time(m, hw, p, eng, eff, 64, 1, 1024, dep=Deployment(tp=1, dp=8, ep=8))
    alone = step_time(m, hw, p, eng, eff, 8, 1, 1024, dep=Deployment())
    attn = {o.name: o for o in dp.ops}["attention"]
    assert attn.flops == pytest.approx({o.name: o for o in alone.ops}["attention"].flops)
    names = {o.name for o in dp.ops}
    assert "ep_alltoall" in names and "dp_moe_allreduce" not in names


@pytest.mark.parametrize("dep,needle", [
    (dict(tp=8, ep=3), "ep=3 does not divide the 256 experts"),
    (dict(tp=2, dp=2, ep=8), "ep=8 does not divide the tp x dp = 4 GPUs"),
    (dict(tp=3), "tp=3 does not divide num_heads=128"),
])
def test_bad_layouts_are_one_line_errors_naming_the_constraint(dep, needle):
    with pytest.raises(PerfModelError, match=needle):
        validate_deployment(load_model("deepseek-v3"), Deployment(**dep))


@given(st.sampled_from(["deepseek-v3", "qwen3-30b-a3b", "mixtral-8x7b", "llama-3.1-70b", "x"]),
       st.sampled_from(["h200-sxm", "gb200", "b100", "mi300x", "l40s"]),
       st.sampled_from([1, 2, 4, 8, 16, 3]), st.sampled_from([1, 2, 4, 8, 16, 0]),
       st.sampled_from([1, 2, 8, 32, 5]), st.sampled_from([1, 2, 4]),
       st.integers(-1, 512), st.sampled_from([1, 16, 4096]))
def test_parallel_layouts_give_a_finite_result_or_a_clean_error(model, gpu, tp, dp, ep, pp, B, P):
    try:
        r = api.predict_request(model, gpu, weights="fp8", batch=B, prompt=P, output=8,
                                tp=tp, dp=dp, ep=ep, pp=pp, engine="sglang")
    except PerfModelError as exc:
        assert str(exc) and "\n" not in str(exc)
        return
    assert isinstance(r, api.RequestEstimate)
    assert all(math.isfinite(v) and v > 0 for v in (r.ttft_s, r.tpot_s, r.e2e_s))


def test_two_batch_overlap_hides_the_all_to_all_up_to_the_expert_time():
    m, hw = load_model("deepseek-v3"), load_gpu("h200-sxm")
    eff, eng = default_efficiency(hw), ENGINES["sglang"]
    p, dep = Precision.of("fp8"), Deployment(tp=1, dp=8, ep=8)
    plain = {o.name: o.time_s for o in step_time(m, hw, p, eng, eff, 256, 1, 2048, dep=dep).ops}
    tbo = eng.model_copy(update={"moe_comm_overlap": 0.5})
    half = {o.name: o.time_s for o in step_time(m, hw, p, tbo, eff, 256, 1, 2048, dep=dep).ops}
    a2a = plain["ep_alltoall"]
    assert half["ep_alltoall"] == pytest.approx(a2a - min(0.5 * a2a, plain["experts"]))
    assert half["experts"] == plain["experts"]


def test_dp_attention_holds_more_sequences_than_tp_for_mla():
    # under TP every GPU keeps the whole MLA latent of every sequence (kv_replication); DP
    # attention splits the sequences over the groups, so KV memory admits more of them
    from perfmodel.serving.curve import serve_curve
    kw = dict(weights="fp8", engine="sglang", prompt=2000, output=1000, concurrencies=[64])
    tp8 = serve_curve("deepseek-v3", "h200-sxm", tp=8, ep=8, **kw)
    dp8 = serve_curve("deepseek-v3", "h200-sxm", tp=1, dp=8, ep=8, **kw)
    assert dp8.num_gpus == tp8.num_gpus == 8
    assert dp8.kv_max_concurrency > 2 * tp8.kv_max_concurrency
