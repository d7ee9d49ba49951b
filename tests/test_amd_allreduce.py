"""AMD Infinity Fabric all-reduce times (core/parallel.py allreduce_s with the hardware_db links)
against the published kernel tables the link figures were read from. Expected values are the
sources' measured times; the tolerances say how close the alpha-beta law has to come."""

import pytest

from perfmodel.core import units
from perfmodel.core.efficiency import default_efficiency
from perfmodel.core.hardware import load_gpu
from perfmodel.core.parallel import allreduce_s

KIB, MIB = 2**10, 2**20


def _ar_us(gpu: str, nbytes: float, p: int) -> float:
    hw = load_gpu(gpu)
    return allreduce_s(float(nbytes), p, hw.intra_node_link, default_efficiency(hw)) / units.US


# vLLM PR #39080 (2026-04), MI355X TP8 bf16, column vllm/us (vLLM's custom all-reduce)
@pytest.mark.parametrize("nbytes, measured_us", [
    (24 * KIB, 6.3), (48 * KIB, 6.7), (96 * KIB, 7.6), (768 * KIB, 16.0), (1536 * KIB, 24.2)])
def test_mi355x_tp8_custom_allreduce(nbytes, measured_us):
    assert _ar_us("mi355x", nbytes, 8) == pytest.approx(measured_us, rel=0.15)


# vLLM PR #19744 (2025-06), MI300X TP4, column baseline (vLLM's custom all-reduce), small sizes
@pytest.mark.parametrize("nbytes, measured_us", [(2 * KIB, 7.18), (16 * KIB, 7.26), (32 * KIB, 7.58)])
def test_mi300x_tp4_small_allreduce(nbytes, measured_us):
    assert _ar_us("mi300x", nbytes, 4) == pytest.approx(measured_us, rel=0.10)


# Azure ND MI300X v5 rccl-tests, 8 GPUs, busbw 131.57 / 171.46 / 230.35 / 290.81 GB/s:
# time = bytes * 2 * 7/8 / busbw = 111.6 / 171.2 / 254.9 / 807.7 us
@pytest.mark.parametrize("nbytes, busbw", [
    (8 * MIB, 131.57e9), (16 * MIB, 171.46e9), (32 * MIB, 230.35e9), (128 * MIB, 290.81e9)])
def test_mi300x_tp8_rccl_allreduce(nbytes, busbw):
    measured_us = nbytes * 2 * 7 / 8 / busbw / units.US
    assert _ar_us("mi300x", nbytes, 8) == pytest.approx(measured_us, rel=0.12)


def test_small_message_floor_hand_calculation():
    # 6 hops x 1.05 us + LL at half of 0.65 x 537.6 GB/s over the ring's 2 x 7/8 of 24 KiB
    ring_s = 2 * 7 / 8 * 24 * KIB / (0.65 * 537.6e9)
    assert _ar_us("mi355x", 24 * KIB, 8) == pytest.approx(6 * 1.05 + 2 * ring_s / units.US, rel=1e-9)
    # MI325X is the same gfx942 part on the same links: the MI300X figures
    assert _ar_us("mi325x", 1 * MIB, 8) == pytest.approx(_ar_us("mi300x", 1 * MIB, 8), rel=1e-12)
