"""EP without attention DP (tp x EP, 'TEP'): every rank holds every token after the
attention all-reduce, so the MoE layer ends in one all-reduce over the tp GPUs, like a dense
MLP, and runs no dispatch/combine all-to-all (core/parallel.comm_times; TensorRT-LLM
_torch/models/modeling_deepseekv3.py: the MoE's final all-reduce, fused with residual add and
RMSNorm under POST_MOE_FUSION; its all-to-all only under enable_attention_dp)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from perfmodel.core.catalog import load_model
from perfmodel.core.efficiency import default_efficiency
from perfmodel.core.errors import PerfModelError
from perfmodel.core.hardware import load_gpu
from perfmodel.core.parallel import comm_times, validate_deployment
from perfmodel.core.specs import Deployment
from perfmodel.core.units import US

DSV3_LAYERS = 61   # DeepSeek-V3 config.json num_hidden_layers (3 dense + 58 MoE)


def _comm(model: str, gpu: str, dep: Deployment, rows) -> dict:
    m, hw = load_model(model), load_gpu(gpu)
    return dict(comm_times(m, hw, default_efficiency(hw), dep, np.asarray(rows, dtype=float),
                           one_sided_a2a=True))


def test_tep_decode_step_all_reduces_every_layers_mlp_worked_number():
    # DeepSeek-V3, 1 token row, tp8 x EP8 on H200 (hardware_db/h200-sxm.yaml: NVLink 4 at
    # 450 GB/s per direction, 3 us per hop, Simple protocol 8.4 us + 3.4 us per step;
    # link efficiency 0.75), message 7168 x 2 bytes = 14336 B, no NVLS window:
    #   ring bytes  2 x 7/8 x 14336 / (450e9 x 0.75)         = 0.0743 us
    #   LL          6 hops x 3 us + 0.0743 / 0.5              = 18.149 us
    #   Simple      8.4 + 14 x 3.4 + 0.0743                   = 56.07 us  -> LL wins
    # one all-reduce after the MoE in each of the 61 layers: 61 x 18.149 us = 1.107 ms
    comm = _comm("deepseek-v3", "h200-sxm", Deployment(tp=8, ep=8), [1.0])
    assert "ep_alltoall" not in comm
    assert float(comm["tp_allreduce_mlp"][0]) == pytest.approx(DSV3_LAYERS * 18.149 * US, rel=1e-3)
    # more than the exchange priced before this rule: 3 dense-layer all-reduces plus, per MoE
    # layer, a dispatch and a combine of 2 hops x 3 us each (plus < 1 us of bytes)
    assert float(comm["tp_allreduce_mlp"][0]) > (3 * 18.149 + 58 * 2 * 2 * 3.0 + 58) * US


def test_tep_prefill_moves_one_all_reduce_not_k_over_tp_copies():
    # tp4 x EP4 prefill of 8192 rows: the dispatch + combine priced before sent k/tp = 8/4 = 2
    # copies of each row each way (4 x the row bytes x 3/4 over NVLink); the all-reduce moves
    # 2 x 3/4 x the row bytes: the MLP all-reduce of a TEP step is that of the same tp group
    # with no EP at all
    tep = _comm("deepseek-v3", "b200", Deployment(tp=4, ep=4), [8192.0])
    tp_only = _comm("deepseek-v3", "b200", Deployment(tp=4), [8192.0])
    assert tep.keys() == tp_only.keys()
    for name in tep:
        assert np.allclose(tep[name], tp_only[name], rtol=1e-12), name


@given(model=st.sampled_from(["deepseek-v3", "qwen3-30b-a3b", "mixtral-8x7b"]),
       gpu=st.sampled_from(["h200-sxm", "gb200", "b200", "h100-sxm"]),
       tp=st.sampled_from([1, 2, 4, 8, 16]), ep=st.sampled_from([1, 2, 4, 8, 16]),
       rows=st.floats(min_value=0.0, max_value=1e6, allow_nan=False))
def test_without_attention_dp_ep_never_changes_the_collectives(model, gpu, tp, ep, rows):
    m = load_model(model)
    try:
        validate_deployment(m, Deployment(tp=tp, ep=ep))
        validate_deployment(m, Deployment(tp=tp))
        tep = _comm(model, gpu, Deployment(tp=tp, ep=ep), [rows, 1.0])
        plain = _comm(model, gpu, Deployment(tp=tp), [rows, 1.0])
    except PerfModelError as exc:
        assert str(exc) and "\n" not in str(exc)
        return
    assert tep.keys() == plain.keys() and "ep_alltoall" not in tep
    for name in tep:
        assert np.all(np.isfinite(tep[name])) and np.allclose(tep[name], plain[name]), name


def test_attention_dp_with_ep_still_exchanges():
    # the rule is TP attention's only: tp1 x dp8 x EP8 keeps its dispatch/combine
    comm = _comm("deepseek-v3", "h200-sxm", Deployment(tp=1, dp=8, ep=8), [64.0])
    assert "ep_alltoall" in comm and float(comm["ep_alltoall"][0]) > 0
