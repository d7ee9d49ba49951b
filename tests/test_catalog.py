"""The model catalog: every YAML loads, look-ups are exact, parameter counts match the
published figures and `perfmodel models` lists them (spec files and config.json import:
test_catalog_import.py)."""

import argparse
import json
from pathlib import Path

import pytest

from perfmodel.core.catalog import catalog_dir, list_models, load_model, load_spec_file
from perfmodel.cli import catalog as cli_catalog
from perfmodel.core.errors import UnknownIdError
from perfmodel.core.params import count_params, indexer_matrices
from perfmodel.core.specs import ModelSpec

MODELS = list_models()
YAML_FILES = sorted(catalog_dir().glob("*.yaml"))

# Fields a config.json determines (the rest, like name and source, is catalog prose).
ARCH_FIELDS = ["num_layers", "d_model", "num_heads", "num_kv_heads", "head_dim", "ffn_dim",
               "vocab_size", "tied_embeddings", "gated_mlp", "qkv_bias", "max_context",
               "sliding_window", "sliding_window_layers", "moe", "mla"]


# gpt-oss model card (arXiv:2508.10925) Table 1: "active" counts the unembedding but not the
# embedding table; count_params counts both, so the embedding is taken out for the comparison.
# Mistral Large 3's '39B active' language model matches the same way (39.01B without the
# embedding, 39.95B with it).
ACTIVE_EXCLUDES_EMBEDDING = {"gpt-oss-20b", "gpt-oss-120b", "mistral-large-3"}
# Headline active figures that match without both vocabulary tables (embedding and lm_head):
# GLM-4.5 32B (33.6 with them), GLM-5 40B (41.8), MiniMax-M2/M2.5 10B (11.0).
ACTIVE_EXCLUDES_EMBEDDING_AND_HEAD = {"glm-4.5", "glm-5", "minimax-m2", "minimax-m2.5"}
# DeepSeek-V3.2's card repeats V3's 37B activated; its DSA indexer (0.85B) comes on top.
ACTIVE_EXCLUDES_INDEXER = {"deepseek-v3.2"}
# Active figures published only as a whole number of billions ('17B activated') cover +-0.5B.
ACTIVE_WHOLE_BILLIONS = {"qwen3.5-122b-a10b", "qwen3.5-397b-a17b"}


def by_id(ident: str) -> ModelSpec:
    return load_model(ident)


# --------------------------------------------------------------------------- catalog files


def test_catalog_size_and_order():
    assert len(MODELS) >= 25
    ids = [m.id for m in MODELS]
    assert ids == sorted(ids)
    assert len(set(ids)) == len(ids)
    repos = [m.hf_repo.lower() for m in MODELS if m.hf_repo]
    assert len(set(repos)) == len(repos)


@pytest.mark.parametrize("path", YAML_FILES, ids=[p.stem for p in YAML_FILES])
def test_every_catalog_file_loads(path: Path):
    spec = load_spec_file(path)
    assert isinstance(spec, ModelSpec)
    assert spec.id == path.stem == spec.id.lower()
    assert spec.hf_repo and "/" in spec.hf_repo
    assert "huggingface.co/" in spec.source  # where the config values come from
    assert spec.name


@pytest.mark.parametrize("m", MODELS, ids=[m.id for m in MODELS])
def test_short_id_and_hf_repo_resolve(m: ModelSpec):
    assert load_model(m.id) == m
    assert load_model(m.id.upper()) == m
    assert load_model(m.hf_repo) == m
    assert load_model(m.hf_repo.lower()) == m
    assert load_model(f"  {m.hf_repo.upper()} ") == m


def test_unknown_id_lists_close_ids():
    with pytest.raises(UnknownIdError) as exc:
        load_model("llama-3.1-8")
    assert "llama-3.1-8b" in exc.value.close
    assert "llama-3.1-8b" in str(exc.value)


@pytest.mark.parametrize("query", ["llama", "mixtral", "qwen3", "gpt-4", "", "8b"])
def test_lookup_is_exact_never_a_substring(query: str):
    with pytest.raises(UnknownIdError):
        load_model(query)


def test_yaml_is_cached():
    assert load_model("llama-3.1-8b") is load_model("meta-llama/Llama-3.1-8B")
    path = catalog_dir() / "mixtral-8x7b.yaml"
    assert load_spec_file(path) is load_spec_file(path)


# --------------------------------------------------------------------------- parameter counts

PUBLISHED = [m for m in MODELS if m.published_params]
PUBLISHED_ACTIVE = [m for m in MODELS if m.published_active_params]


@pytest.mark.parametrize("m", PUBLISHED, ids=[m.id for m in PUBLISHED])
def test_total_params_match_published(m: ModelSpec):
    assert "params:" in m.source, "the published figure needs its citation in `source`"
    total = count_params(m).total
    assert total == pytest.approx(m.published_params, rel=0.02), f"{m.id}: {total / 1e9:.2f}B"


@pytest.mark.parametrize("m", PUBLISHED_ACTIVE, ids=[m.id for m in PUBLISHED_ACTIVE])
def test_active_params_match_published(m: ModelSpec):
    assert m.moe is not None and "params:" in m.source
    active = count_params(m).active
    if m.id in ACTIVE_EXCLUDES_EMBEDDING:
        active -= m.vocab_size * m.d_model
    if m.id in ACTIVE_EXCLUDES_EMBEDDING_AND_HEAD:
        active -= 2 * m.vocab_size * m.d_model
    if m.id in ACTIVE_EXCLUDES_INDEXER:
        active -= sum(x.elements for x in indexer_matrices(m))
    slack = 0.5e9 if m.id in ACTIVE_WHOLE_BILLIONS else 0.0
    assert active == pytest.approx(m.published_active_params, rel=0.02, abs=slack), \
        f"{m.id}: {active / 1e9:.2f}B"


def test_every_moe_model_has_a_published_active_figure():
    assert {m.id for m in MODELS if m.moe} == {m.id for m in PUBLISHED_ACTIVE}


@pytest.mark.parametrize("ident, total_b, active_b, cite", [
    ("llama-2-7b", 6.74, None, "huggingface.co/meta-llama/Llama-2-7b-hf model page: 6.74B params"),
    ("llama-3.1-8b", 8.03, None, "meta-llama/Llama-3.1-8B model card: 8.03B"),
    ("llama-3.1-70b", 70.6, None, "meta-llama/Llama-3.1-70B model page: 70.6B"),
    ("mixtral-8x7b", 46.7, 12.9, "mistral.ai/news/mixtral-of-experts: 46.7B total, 12.9B per token"),
    ("mixtral-8x22b", 141, 39, "mistral.ai/news/mixtral-8x22b: 141B total, 39B active"),
    ("deepseek-v3", 671, 37, "DeepSeek-V3 report arXiv:2412.19437: 671B total, 37B activated"),
    ("qwen3-235b-a22b", 235, 22, "Qwen/Qwen3-235B-A22B model card: 235B total, 22B activated"),
    ("qwen3-30b-a3b", 30.5, 3.3, "Qwen/Qwen3-30B-A3B model card: 30.5B total, 3.3B activated"),
    ("gemma-2-9b", 9.24, None, "Gemma 2 report Table 2: 0.918B embedding + 8.324B non-embedding"),
])
def test_spot_values(ident, total_b, active_b, cite):
    c = count_params(by_id(ident))
    assert c.total / 1e9 == pytest.approx(total_b, rel=0.02), cite
    if active_b is not None:
        assert c.active / 1e9 == pytest.approx(active_b, rel=0.02), cite


def test_architecture_details_the_brief_names():
    ds = by_id("deepseek-v3")
    assert (ds.num_layers, ds.moe.num_dense_layers, ds.ffn_dim, ds.vocab_size) == (61, 3, 18432, 129280)
    assert (ds.moe.num_experts, ds.moe.experts_per_token, ds.moe.expert_ffn_dim) == (256, 8, 2048)
    assert (ds.mla.q_lora_rank, ds.mla.kv_lora_rank, ds.mla.qk_nope_head_dim,
            ds.mla.qk_rope_head_dim, ds.mla.v_head_dim) == (1536, 512, 128, 64, 128)
    assert by_id("deepseek-r1").model_dump(include=set(ARCH_FIELDS)) == \
        ds.model_dump(include=set(ARCH_FIELDS))
    g9, g27 = by_id("gemma-2-9b"), by_id("gemma-2-27b")
    assert (g9.head_dim, g27.head_dim, g9.tied_embeddings, g9.sliding_window) == (256, 128, True, 4096)
    assert (g9.sliding_window_layers, g27.sliding_window_layers) == (21, 23)
    mistral = by_id("mistral-7b")
    assert (mistral.sliding_window, mistral.sliding_window_layers) == (4096, 32)
    for q in ("qwen2.5-0.5b", "qwen2.5-7b", "qwen2.5-72b"):
        assert by_id(q).qkv_bias
    for q in ("qwen3-30b-a3b", "qwen3-235b-a22b"):
        assert (by_id(q).num_kv_heads, by_id(q).head_dim) == (4, 128)
    assert by_id("gpt-oss-20b").sliding_window == 128


# --------------------------------------------------------------------------- CLI


def run_cli(argv: list[str]) -> int:
    """Only this module's commands: other command modules may be mid-construction."""
    parser = argparse.ArgumentParser(prog="perfmodel")
    cli_catalog.register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return args.func(args)


def test_models_command_json(capsys):
    assert run_cli(["models", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["models"]
    assert [r["id"] for r in rows] == [m.id for m in MODELS]
    ds = next(r for r in rows if r["id"] == "deepseek-v3")
    assert (ds["attention"], ds["experts"], ds["experts_per_token"]) == ("mla", 256, 8)
    assert ds["active_params"] == count_params(by_id("deepseek-v3")).active


def test_models_command_table(capsys):
    assert run_cli(["models"]) == 0
    out = capsys.readouterr().out
    assert "mixtral-8x7b" in out and "8/2" in out and "46.70B" in out and "12.88B" in out
