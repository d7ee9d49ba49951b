"""Where the grouped expert GEMM switches row tiles, and what a decode step of one more row
may cost (perfmodel/core/grouped_gemm.py small_tile_max_rows, core/roofline.py _gemm_compute_s).

The property enforced: a matmul op's time never falls when the decode batch grows by one row,
and grows by at most the ratio of rows (M+1)/M, save at the grouped kernel's tile switch
M = E -> E+1 (vLLM get_default_config: BLOCK_SIZE_M 16 while M <= E, else 64), where a touched
expert's padded rows grow at most GROUPED_TILE_ROWS / GROUPED_SMALL_TILE_ROWS = 4-fold."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from perfmodel.api import resolve
from perfmodel.core.grouped_gemm import (GROUPED_SMALL_TILE_ROWS, GROUPED_TILE_ROWS,
                                         small_tile_max_rows)
from perfmodel.core.ops_ffn import expected_experts
from perfmodel.core.predict import step

TILE_JUMP = GROUPED_TILE_ROWS / GROUPED_SMALL_TILE_ROWS


def _op_s(sc, name, B, S=600.0):
    """Time of one op of a decode step of each batch in B (one new token, S cached)."""
    st_ = step(sc, np.asarray(B, dtype=float), 1.0, S)
    t = next(o.time_s for o in st_.ops if o.name == name)
    return np.broadcast_to(np.asarray(t, dtype=float), np.shape(B))


def test_mixtral_small_tile_bound_by_hand():
    # E = 8, k = 2, uniform routing: 8 tokens touch 8 * (1 - 0.75^8) = 7.1990 experts,
    # 16 routed rows over them = 2.2225 rows each (hand arithmetic of vLLM's M <= E rule)
    assert small_tile_max_rows(2, 8) == pytest.approx(2.2225, abs=1e-4)
    assert small_tile_max_rows(8, 0) == 8.0          # no E given: the many-expert limit k


@given(st.integers(1, 512), st.integers(1, 16), st.integers(1, 1100))
def test_small_tile_holds_exactly_while_tokens_do_not_exceed_experts(E, k, M):
    k = min(k, E)
    rows = M * k / max(float(expected_experts(E, k, M)), 1.0)   # the op list's rows per expert
    assert (rows <= small_tile_max_rows(k, E)) == (M <= E)


def test_mixtral_int4_experts_op_no_longer_doubles_below_e():
    # the failing case of test_serving.py::test_concurrency_trades_user_speed_for_throughput
    # (deep profile): Mixtral-8x7B int4 on A100, vLLM; before, the experts op went 15.4 ms ->
    # 32.4 ms from decode batch 6 to 7 (the tile switched at M = 7 < E = 8)
    sc, _, _ = resolve("mixtral-8x7b", "a100-sxm-80gb", weights="int4", engine="vllm")
    t = _op_s(sc, "experts", [6, 7, 8, 9])
    assert t[1] / t[0] <= 7 / 6          # 6 -> 7 and 7 -> 8 rows: at most the rows' ratio
    assert t[2] / t[1] <= 8 / 7
    assert t[3] / t[2] > 9 / 8           # the tile switch is at M = E = 8 -> 9


@given(st.sampled_from(["mixtral-8x7b", "qwen3-30b-a3b", "llama-3.1-8b"]),
       st.sampled_from(["a100-sxm-80gb", "h100-sxm", "l4", "mi300x"]),
       st.sampled_from(["vllm", "sglang", "trtllm", "llama-cpp", "tgi", "lmdeploy"]),
       st.sampled_from(["bf16", "fp8", "int4"]), st.sampled_from([1, 2]),
       st.integers(0, 8192))
def test_matmul_ops_grow_monotonely_and_boundedly_in_the_decode_batch(model, gpu, engine, w,
                                                                      tp, S):
    sc, _, _ = resolve(model, gpu, weights=w, engine=engine, tp=tp)
    B = np.arange(1.0, 301.0)
    st_ = step(sc, B, 1.0, float(S))
    E = sc.model.moe.num_experts if sc.model.moe else 0
    for op in st_.ops:
        if op.kind != "gemm":
            continue
        t = np.broadcast_to(np.asarray(op.time_s, dtype=float), B.shape)
        ratio = t[1:] / t[:-1]
        bound = B[1:] / B[:-1] * np.where((B[:-1] == E) & (op.name == "experts"), TILE_JUMP, 1.0)
        assert np.all(ratio >= 1.0 - 1e-12), (op.name, B[1:][ratio < 1.0 - 1e-12])
        assert np.all(ratio <= bound * (1 + 1e-9)), (op.name, B[1:][ratio > bound * (1 + 1e-9)])
