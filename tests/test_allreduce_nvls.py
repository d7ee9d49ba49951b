"""Tensor-parallel all-reduce by implementation: the ring, and NVLink SHARP (NVLS) where the
switch reduces and the engine runs the message on it (core/parallel.py allreduce_s)."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from perfmodel.core.catalog import load_model
from perfmodel.core.efficiency import default_efficiency
from perfmodel.core.engines import ENGINES
from perfmodel.core.hardware import load_gpu
from perfmodel.core.parallel import NO_NVLS, allreduce_hops, allreduce_s, comm_times
from perfmodel.core.specs import Deployment

GiB = 2**30
NVLS_GPUS = ("h100-sxm", "h200-sxm", "b200")
ALWAYS = (0.0, None)                      # every message on NVLS
VLLM = ENGINES["vllm"].allreduce_nvls_window
TRTLLM = ENGINES["trtllm"].allreduce_nvls_window


def _busbw(nbytes, t, p):
    """nccl-tests' bus bandwidth of an all-reduce: algbw x 2(p-1)/p."""
    return nbytes / t * 2 * (p - 1) / p


def test_h100_nvls_at_8_gpus_gives_the_published_busbw():
    # NVIDIA/nccl#1455 (8 x H100 SXM, NCCL_ALGO=NVLS, 2-4 GiB): busbw 480 GB/s at 8 GPUs;
    # GTC S62129 gives the same 480 GB/s for NVLink4 SHARP all-reduce
    hw = load_gpu("h100-sxm")
    t = allreduce_s(4 * GiB, 8, hw.intra_node_link, default_efficiency(hw), ALWAYS)
    assert _busbw(4 * GiB, t, 8) == pytest.approx(480e9, rel=0.01)


def test_b200_nvls_at_8_gpus_gives_the_published_busbw():
    # NVIDIA/nccl#1807: all_reduce_perf on 8 B200 of one server, NCCL 2.27: busbw "830+" GB/s
    hw = load_gpu("b200")
    t = allreduce_s(4 * GiB, 8, hw.intra_node_link, default_efficiency(hw), ALWAYS)
    assert _busbw(4 * GiB, t, 8) == pytest.approx(830e9, rel=0.01)


@pytest.mark.parametrize("p", [2, 4])
def test_nvls_gains_little_or_nothing_at_small_groups(p):
    # NVIDIA/nccl#1455: with NCCL_ALGO=NVLS the busbw stays at the ring's 365-370 GB/s for 2-4
    # GPUs and only rises above it from 5 GPUs on: the ring's 2(p-1)/p traffic is small there
    hw = load_gpu("h100-sxm")
    eff = default_efficiency(hw)
    ring = allreduce_s(GiB, p, hw.intra_node_link, eff, NO_NVLS)
    nvls = allreduce_s(GiB, p, hw.intra_node_link, eff, ALWAYS)
    assert nvls <= ring
    assert ring / nvls < 1.25   # at 8 GPUs the gain is 480 / 370 = 1.3 measured (#1455)
    if p == 2:
        assert nvls == ring     # one peer: the ring moves B once, NVLS cannot beat it


def test_nvls_at_8_gpus_beats_the_ring_by_the_switch_reduction():
    # ring 2*7/8 B / (450 GB/s x 0.75) against B / 274 GB/s: 1.75 x 274 / 337.5 = 1.42
    hw = load_gpu("h100-sxm")
    eff = default_efficiency(hw)
    ring = allreduce_s(GiB, 8, hw.intra_node_link, eff, NO_NVLS)
    nvls = allreduce_s(GiB, 8, hw.intra_node_link, eff, ALWAYS)
    assert ring / nvls == pytest.approx(1.75 * 274 / (450 * eff.link_fraction), rel=0.01)


def test_small_messages_keep_the_tree_latency():
    # decode's small all-reduces are latency: 2*ceil(log2 p) hops of the link's latency,
    # whichever the large-message path (the hop tests of test_moe_physics still hold)
    hw = load_gpu("h200-sxm")
    link, eff = hw.intra_node_link, default_efficiency(hw)
    for p in (2, 4, 8):
        for window in (NO_NVLS, ALWAYS, VLLM, TRTLLM):
            assert allreduce_s(0.0, p, link, eff, window) == allreduce_hops(p) * link.latency_s


def test_engines_take_nvls_as_their_sources_say():
    # SGLang sets NCCL_NVLS_ENABLE=0 by default (entrypoints/engine.py); vLLM runs its custom
    # all-reduce to 256 KiB and symm-mem multimem to 64 MiB at TP8 on sm90 (all_reduce_utils.py);
    # TRT-LLM's AUTO leaves its 8 MB workspace for NCCL, NVLS on (customAllReduceUtils.h)
    assert ENGINES["sglang"].allreduce_nvls_window == NO_NVLS
    assert VLLM == (256 * 2**10, 64 * 2**20)
    assert TRTLLM == (8e6, None)
    assert ENGINES["torch-graph"].allreduce_nvls_window == NO_NVLS


def test_nvls_applies_only_inside_the_engines_window():
    hw = load_gpu("h200-sxm")
    link, eff = hw.intra_node_link, default_efficiency(hw)

    def ring(b):
        return allreduce_s(b, 8, link, eff, NO_NVLS)
    for b in (128 * 2**10, 2 * 64 * 2**20):          # vLLM's custom AR below, PyNCCL above
        assert allreduce_s(b, 8, link, eff, VLLM) == ring(b)
    assert allreduce_s(32 * 2**20, 8, link, eff, VLLM) < ring(32 * 2**20)
    # below TRT-LLM's 8 MB switch-over its one/two-shot kernels: the ring's time, capped by
    # what NVLS takes at the switch-over (the engine picks the faster kernel there)
    at_switch = link.nvls_latency_s + 8e6 / link.nvls_allreduce_bytes_per_s
    for b in (1e6, 4e6, 7.9e6):
        assert allreduce_s(b, 8, link, eff, TRTLLM) == pytest.approx(min(ring(b), at_switch))
    assert allreduce_s(1e6, 8, link, eff, TRTLLM) == ring(1e6)
    assert allreduce_s(1e9, 8, link, eff, TRTLLM) < ring(1e9)      # NCCL, NVLS
    # vectorized messages take the same rule element by element
    sizes = np.array([128 * 2**10, 32 * 2**20, 2 * 64 * 2**20])
    both = allreduce_s(sizes, 8, link, eff, VLLM)
    assert both == pytest.approx([allreduce_s(float(b), 8, link, eff, VLLM) for b in sizes])


def test_llama70b_prefill_all_reduce_at_tp8_on_h200_with_vllm():
    # 2,048 prompt tokens x 8192 x 2 bytes = 33.5 MB per all-reduce (inside vLLM's multimem
    # window): NVLS 25 us (NCCL tuning.cc) + 33.5 MB / 271 GB/s (nccl-tests#272) = 148.8 us,
    # against the Simple ring's 8.4 + 14 x 3.4 us + 1.75 x 33.5 MB / 337.5 GB/s = 230 us; two
    # per layer over 80 layers
    m, hw = load_model("llama-3.1-70b"), load_gpu("h200-sxm")
    times = dict(comm_times(m, hw, default_efficiency(hw), Deployment(tp=8), 2048.0, nvls=VLLM))
    per_ar = 25e-6 + 2048 * 8192 * 2 / 271e9
    assert times["tp_allreduce_attention"] == pytest.approx(80 * per_ar, rel=1e-6)
    assert times["tp_allreduce_mlp"] == pytest.approx(80 * per_ar, rel=1e-6)


def test_link_without_nvls_ignores_the_engine_setting():
    hw = load_gpu("a100-sxm-80gb")
    link, eff = hw.intra_node_link, default_efficiency(hw)
    assert link.nvls_allreduce_bytes_per_s is None
    assert allreduce_s(GiB, 8, link, eff, ALWAYS) == allreduce_s(GiB, 8, link, eff, NO_NVLS)


@pytest.mark.parametrize("field", ["allreduce_nvls_min_bytes", "allreduce_nvls_max_bytes"])
def test_negative_nvls_limits_are_rejected(field):
    with pytest.raises(ValidationError):
        ENGINES["vllm"].model_validate({**ENGINES["vllm"].model_dump(), field: -1.0})


@given(gpu=st.sampled_from(NVLS_GPUS), p=st.sampled_from([2, 4, 8]),
       window=st.sampled_from([NO_NVLS, ALWAYS, VLLM, TRTLLM]),
       a=st.floats(0, 1e10), b=st.floats(0, 1e10))
def test_all_reduce_time_never_falls_with_bytes_and_never_beats_the_link(gpu, p, window, a, b):
    hw = load_gpu(gpu)
    link, eff = hw.intra_node_link, default_efficiency(hw)
    lo, hi = sorted((a, b))
    t_lo, t_hi = allreduce_s(lo, p, link, eff, window), allreduce_s(hi, p, link, eff, window)
    assert np.isfinite(t_hi)
    # every GPU must at least send its message out once over its own link
    assert t_hi >= hi / link.bandwidth_bytes_per_s
    assert t_lo <= t_hi


def test_engine_table_shows_the_nvls_window():
    from perfmodel.webapp.views.definitions import engines_table
    table = engines_table()
    shown = dict(zip(table["engine"], table["all-reduce on NVLink SHARP (MiB)"]))
    assert shown["vllm"] == "0.25 - 64"          # 256 KiB to 64 MiB
    assert shown["trtllm"] == "above 7.63"       # 8 MB (decimal) = 7.63 MiB
    assert shown["sglang"] == "never"


def test_protocols_follow_nccls_cost_model():
    # NVIDIA/nccl src/graph/tuning.cc, NVLink: LL ring latency small, half the bandwidth (4 data
    # bytes per 8-byte store); Simple 8.4 us + 3.4 us per ring step at full bandwidth. At 8
    # GPUs on H100 (337.5 GB/s ring): LL 18 us + 1.75 B / 168.75 GB/s, Simple 56 us +
    # 1.75 B / 337.5 GB/s: equal at B = 38 us x 337.5 GB/s / 1.75 = 7.33 MB
    hw = load_gpu("h100-sxm")
    link, eff = hw.intra_node_link, default_efficiency(hw)
    ll = lambda b: 18e-6 + 1.75 * b / (450e9 * 0.75 * 0.5)    # noqa: E731
    simple = lambda b: 56e-6 + 1.75 * b / (450e9 * 0.75)       # noqa: E731
    for b in (64e3, 1e6, 4e6, 7e6, 8e6, 64e6):
        assert allreduce_s(b, 8, link, eff, NO_NVLS) == pytest.approx(min(ll(b), simple(b)))
    assert ll(7e6) < simple(7e6) and simple(8e6) < ll(8e6)


def test_our_two_gpu_measurement_sits_above_the_single_protocol_line():
    # calibrate/data/raw-nccl-h200x2-20261129.json (2 x H200, NCCL 2.28.9, NVLS off, CUDA
    # graph): 2 MiB 33.1 us, 4 MiB 36.4 us. The protocol minimum moves toward them from the
    # single-protocol line (LL latency at full bandwidth), and stays below (no overfit)
    hw = load_gpu("h200-sxm")
    link, eff = hw.intra_node_link, default_efficiency(hw)
    one = link.model_copy(update={"simple_base_latency_s": None, "simple_step_latency_s": None})
    for b, measured in ((2 * 2**20, 33.1e-6), (4 * 2**20, 36.4e-6)):
        old, new = allreduce_s(b, 2, one, eff), allreduce_s(b, 2, link, eff)
        assert old < new < measured
