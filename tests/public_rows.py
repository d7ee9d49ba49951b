"""Hand-written public-table rows for the validation tests (`row`: one row with every column of
data/public_measurements.csv) and the report over the shipped table (the module-scoped `report`
fixture)."""

import functools

import pytest

from perfmodel.analysis.validation.run import DEFAULT_TABLE, validate

@pytest.fixture(scope="module")
def report():
    return _shipped_report()


@functools.cache
def _shipped_report():
    """One validate() of the shipped table per session: test_validate.py and
    test_validate_cli.py each import the fixture, and only read the report."""
    return validate(data=[DEFAULT_TABLE], profiles=[])


def row(**over) -> dict:
    base = dict(source_url_or_repo_path="test", source_kind="repo_benchmark",
                gpu="H100 SXM 80GB", num_gpus="1", tensor_parallel="1", model="Llama 3.1 8B",
                params_b="8.0", weight_precision="bf16", kv_precision="bf16",
                framework="vLLM", batch_or_concurrency="batch 1", input_len="512",
                output_len="128", metric="decode_tok_s_per_user", value="100", notes="")
    base.update(over)
    return base

