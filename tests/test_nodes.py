"""--nodes: laying a layout's GPUs over servers (perfmodel/core/topology.py, Query.nodes)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from perfmodel import api
from perfmodel.cli import main as cli_main
from perfmodel.core.errors import PerfModelError
from perfmodel.core.hardware import load_gpu
from perfmodel.core.parallel import link_for
from perfmodel.core.query import make_query
from perfmodel.core.topology import nodes_domain

BASE = dict(model="llama-3.1-70b", gpu="h100-sxm", tp=8, batch=8, prompt_tokens=1024,
            output_tokens=128)


def test_domain_by_hand():
    # hardware_db: h100-sxm gpus_per_node 8, scale_up_gpus 8 (HGX); gb200 4 per tray, 72 per NVL72
    h100, gb200 = load_gpu("h100-sxm"), load_gpu("gb200")
    assert nodes_domain(h100, 8, 1) == 8
    assert nodes_domain(h100, 8, 2) == 4            # 4 + 4: NVLink only inside each node
    assert nodes_domain(h100, 16, 2) == 8
    assert nodes_domain(gb200, 8, 2) == 8           # two trays of one NVL72 rack: one domain
    assert nodes_domain(gb200, 144, 36) == 72       # 36 trays = 2 racks of 18


@pytest.mark.parametrize("gpus, nodes, words", [
    (8, 3, "do not divide evenly"),
    (8, 16, "more nodes than"),
    (16, 1, "a h100-sxm node holds 8"),
])
def test_layouts_that_do_not_fit_name_the_constraint(gpus, nodes, words):
    with pytest.raises(PerfModelError, match=words):
        nodes_domain(load_gpu("h100-sxm"), gpus, nodes)


def test_spreading_tp_over_two_hgx_nodes_moves_its_all_reduce_off_nvlink():
    one, _, _ = api.resolve(make_query(**BASE, nodes=1))
    two, _, _ = api.resolve(make_query(**BASE, nodes=2))
    assert link_for(one.hw, one.dep) is one.hw.intra_node_link
    assert link_for(two.hw, two.dep) is two.hw.inter_node_link
    t1 = api.evaluate(make_query(**BASE, nodes=1))
    t2 = api.evaluate(make_query(**BASE, nodes=2))
    none = api.evaluate(make_query(**BASE))
    assert float(t2.tpot_s) > float(t1.tpot_s) == pytest.approx(float(none.tpot_s))


def test_nvl72_keeps_two_trays_on_nvlink():
    q = dict(BASE, gpu="gb200")
    assert float(api.evaluate(make_query(**q, nodes=2)).tpot_s) == pytest.approx(
        float(api.evaluate(make_query(**q)).tpot_s))


def test_cli_predict_and_serve_take_nodes_and_refuse_bad_ones(capsys):
    base = ["predict", "--model", "llama-3.1-70b", "--gpu", "h100-sxm", "--tp", "8", "--batch",
            "8", "--prompt-tokens", "512", "--output-tokens", "16"]
    assert cli_main(base + ["--nodes", "2"]) == 0
    capsys.readouterr()
    assert cli_main(base + ["--nodes", "3"]) == 2
    err = capsys.readouterr().err.strip()
    assert "do not divide evenly over --nodes 3" in err and "\n" not in err
    serve = ["serve", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--tp", "2", "--nodes",
             "2", "--prompt-tokens", "256", "--output-tokens", "8", "--concurrency", "2"]
    assert cli_main(serve) == 0
    capsys.readouterr()
    size = ["size", "--model", "llama-3.1-8b", "--rate", "1", "--prompt-tokens", "256",
            "--output-tokens", "16", "--ttft-slo-s", "2", "--tpot-slo-s", "0.2", "--nodes", "1"]
    assert cli_main(size) == 2                      # needs one GPU in --gpus
    assert "exactly one GPU" in capsys.readouterr().err


@given(nodes=st.one_of(st.integers(-3, 40), st.floats(allow_nan=True), st.text(max_size=3),
                       st.none(), st.booleans()),
       tp=st.sampled_from([1, 2, 8, 16]), pp=st.sampled_from([1, 2]),
       gpu=st.sampled_from(["h100-sxm", "gb200", "apple-m2-max"]))
def test_random_and_invalid_nodes_give_a_result_or_a_clean_error(nodes, tp, pp, gpu):
    try:
        r = api.evaluate(make_query(**dict(BASE, gpu=gpu, tp=tp, pp=pp), nodes=nodes))
    except PerfModelError as exc:
        assert str(exc) and "\n" not in str(exc)
        return
    assert np.isfinite(float(r.tpot_s)) and float(r.tpot_s) > 0
