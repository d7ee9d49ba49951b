"""Claim scenarios on a whole layout (attention DP, EP over tp x dp, nodes): the baseline is
api.evaluate of the same Query, the TP lever says what it does to the GPU count, and a routed
dense small model shares the GPUs without an expert split. Expected values come from
perfmodel's public API."""

import pytest

from perfmodel import api
from perfmodel.analysis.claims import Scenario
from perfmodel.analysis.claims.levers import layout_notes, moves
from perfmodel.analysis.claims.metrics import evaluate
from perfmodel.analysis.claims.scenario import fill
from perfmodel.core.query import make_query

BASE = dict(model="deepseek-v3", gpu="h200-sxm", weights="fp8", tp=4, ep=8, dp=2, batch=8,
            prompt_tokens=1024, output_tokens=256)


def test_tp_moves_keep_dp_and_ep_and_scale_a_given_node_count():
    f, _ = fill(Scenario(**BASE, nodes=1))
    tp_moves = [m for m in moves(f, "output_tok_s_total") if m.lever == "parallelism"]
    assert [m.changes for m in tp_moves] == [{"tp": 8, "nodes": 2}]   # tp <= 8 in a node
    ev = evaluate(Scenario(**{**BASE, "tp": 8, "nodes": 2}))
    assert ev.num_gpus == 16                            # 8 x 2 DP groups, 8 per server
    (line,) = layout_notes(f)
    assert "keep DP 2 and EP 8" in line and "Nodes 1 grow" in line
    assert layout_notes(fill(Scenario(**{**BASE, "dp": 1, "ep": 4}))[0]) == []


def test_routing_to_a_dense_model_under_ep_runs_on_the_same_gpus():
    sc = Scenario(**BASE, routing={"small_model": "llama-3.2-1b", "share": 0.5})
    ev = evaluate(sc)
    big = api.evaluate(make_query(**BASE))
    small = api.evaluate(make_query(**{**BASE, "model": "llama-3.2-1b", "ep": 1}))
    assert ev.num_gpus == 8
    assert ev.values["tpot_s"] == pytest.approx(0.5 * big.tpot_s + 0.5 * small.tpot_s, rel=1e-9)
