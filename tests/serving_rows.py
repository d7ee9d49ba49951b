"""Hand-written serving rows for the serving-validation tests: one aggregated row with every
column of the public table (`row`), its mapping (`map_row`), and the whole-file report of the
steady-state predictor (the module-scoped `report` fixture)."""

import functools

import pytest

from perfmodel.analysis.validation.serving_map import Capabilities, map_serving_row
from perfmodel.analysis.validation.serving_run import DEFAULT_SERVING, validate_serving
from perfmodel.analysis.validation.serving_table import rows_from_dicts

@pytest.fixture(scope="module")
def report():
    return _shipped_report()


@functools.cache
def _shipped_report():
    """One steady-state validate_serving() of the shipped file per session:
    test_validate_serving.py and test_validate_serving_cli.py each import the fixture, and
    only read the report."""
    return validate_serving([DEFAULT_SERVING], predictor="steady")


def row(**over) -> dict:
    base = dict(id="t", backend="trtllm", backend_version="1.0", model_path="meta-llama/Llama-3.1-8B",
                system="h100_sxm", precision="", mode="agg", isl="1024", osl="128",
                gemm_quant_mode="", moe_quant_mode="", batch_size="8", tp_size="1", pp_size="1",
                attention_dp_size="1", moe_tp_size="1", moe_ep_size="1",
                silicon_ttft_ms="100", silicon_tpot_ms="10", source="test")
    base.update({k: str(v) for k, v in over.items()})
    return base


def map_row(caps=Capabilities(), **over):
    return map_serving_row(rows_from_dicts("t", [row(**over)])[0], caps)

