"""The tgi and lmdeploy presets (core/engines_servers.py): their defaults are what the cited
engine files say (the expected values below are typed from those files, not read from the
code), the CLI and API accept them, and the other presets are left as they were.

Sources of the expected values:
- TGI v3 launcher reference, huggingface/text-generation-inference
  docs/source/reference/launcher.md @032fc4c4: MAX_CONCURRENT_REQUESTS [default: 128],
  CUDA_GRAPHS "Default = 1,2,4,8,16,32", CUDA_MEMORY_FRACTION [default: 1.0];
  launcher/src/main.rs (v3) `compute_optimal(...).unwrap_or(4096)` with ComputeType.f16_flop
  ("nvidia-h100-80gb-hbm3" 900e12) and Config.flop; server flash_causal_lm.py
  warmup "Leave 5% for some wiggle room"; models/globals.py flashinfer BLOCK_SIZE = 1;
  backends/v3/src/backend.rs @1d0847a9: a new batch is prefilled on its own, then decodes.
- InternLM/lmdeploy lmdeploy/messages.py @0043859b TurbomindEngineConfig:
  cache_max_entry_count 0.8 ("percentage of FREE GPU memory"), cache_block_seq_len 64,
  max_prefill_token_num 8192, model_format "[hf, awq, gptq]"; lmdeploy/utils.py @726c5fe9
  get_max_batch_size: {'a100': 384, 'a800': 384, 'h100': 1024, 'h800': 1024, 'l20y': 1024,
  'h200': 1024}, else 128.
"""

from __future__ import annotations

import json
import math

import pytest

from perfmodel import api
from perfmodel.analysis.validation.intervals import engine_family
from perfmodel.analysis.validation.names import engine_id
from perfmodel.cli import main
from perfmodel.core.engines import ENGINES, load_engine
from perfmodel.core.engines_servers import tgi_flop_per_token
from perfmodel.core.errors import UnknownIdError
from perfmodel.core.hardware import load_gpu
from perfmodel.core.memory import usable_bytes
from perfmodel.core.resolve import resolve
from perfmodel.core.units import GB


def test_tgi_defaults_are_the_v3_launcher_and_server_defaults():
    e = load_engine("tgi")
    s = e.scheduler
    assert s.max_num_seqs == 128                      # MAX_CONCURRENT_REQUESTS
    assert s.max_num_batched_tokens == 4096           # max_batch_prefill_tokens fallback
    assert e.decode_graph_max_batch == 32             # largest of 1,2,4,8,16,32
    assert e.kv_fraction_of == "free" and e.kv_memory_fraction == 0.95   # 5% wiggle room
    assert e.kv_block_tokens == 1                     # flashinfer page size
    assert (s.mixed_prefill, s.prefill_first, s.overlap_scheduler) == (False, True, False)
    assert e.host_overlap is False                    # the batching loop awaits each forward
    assert e.prefill_graph_max_tokens == 0            # graphs are captured for decode only


def test_lmdeploy_defaults_are_turbomind_engine_config_defaults():
    e = load_engine("lmdeploy")
    s = e.scheduler
    assert e.kv_fraction_of == "free" and e.kv_memory_fraction == 0.8
    assert e.kv_block_tokens == 64
    assert s.max_num_batched_tokens == 8192
    assert s.mixed_prefill and s.chunked_prefill
    assert e.supports_fp8 is False                    # no fp8 model_format


@pytest.mark.parametrize("gpu, seqs", [("a100-sxm-80gb", 384), ("a100-pcie-80gb", 384),
                                       ("h100-sxm", 1024), ("h800", 1024), ("h200-sxm", 1024),
                                       ("l40s", 128), ("b200", 128)])
def test_lmdeploy_max_batch_follows_the_device_name(gpu, seqs):
    assert load_engine("lmdeploy").scheduler.limits(load_gpu(gpu))[0] == seqs


def test_other_presets_keep_their_limits():
    """The new SchedulerSpec.max_num_seqs_by_name is empty elsewhere, and vLLM's A100 rule
    (arg_utils.get_batch_defaults: 256 sequences, 2048 tokens below 70 GiB or on an A100)
    still applies."""
    assert all(not e.scheduler.max_num_seqs_by_name
               for k, e in ENGINES.items() if k not in ("lmdeploy", "lmdeploy-pytorch"))
    assert ENGINES["vllm"].scheduler.limits(load_gpu("a100-sxm-80gb")) == (256, 2048)
    assert ENGINES["vllm"].scheduler.limits(load_gpu("h100-sxm")) == (1024, 8192)


def test_kv_share_is_taken_of_free_memory():
    """80 GB card, 20 GB loaded: TGI may use 20 + 0.95 x 60 = 77 GB, LMDeploy 20 + 0.8 x 60 = 68."""
    hw = load_gpu("a100-sxm-80gb")
    loaded = 20 * GB
    free = hw.memory_bytes - loaded
    assert usable_bytes(hw, load_engine("tgi"), loaded) == pytest.approx(loaded + 0.95 * free)
    assert usable_bytes(hw, load_engine("lmdeploy"), loaded) == pytest.approx(loaded + 0.8 * free)


@pytest.mark.parametrize("engine", ["tgi", "lmdeploy"])
def test_cli_predict_and_serve_accept_the_engine(engine, capsys):
    common = ["--model", "llama-3.1-8b", "--gpu", "a100-sxm-80gb", "--engine", engine, "--json"]
    assert main(["predict", *common, "--batch", "4", "--prompt-tokens", "512",
                 "--output-tokens", "64"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["ttft_s"] > 0 and math.isfinite(out["ttft_s"])
    assert main(["serve", *common, "--prompt-tokens", "512", "--output-tokens", "64",
                 "--concurrency", "1,8", "--num-requests", "16"]) == 0
    text = capsys.readouterr().out
    assert "NaN" not in text and "Infinity" not in text


@pytest.mark.parametrize("engine", ["tgi", "lmdeploy"])
def test_serve_api_gives_finite_points(engine):
    r = api.serve("llama-3.1-8b", "h100-sxm", weights="bf16", engine=engine, prompt_tokens=1024,
                  output_tokens=64, concurrencies=[1, 40], num_requests=40)
    for p in r.points:
        assert math.isfinite(p.ttft_p50_s) and p.ttft_p50_s > 0
        assert math.isfinite(p.tpot_p50_s) and p.tpot_p50_s > 0


def test_tgi_decodes_above_its_graphs_eagerly():
    """Decode batches above 32 leave TGI's captured graphs: the same 32 -> 33 step gains its
    eager issue time on tgi, while vLLM (graphs up to 512) does not change regime there."""
    def tpot(engine, b):
        return api.predict_request("llama-3.2-1b", "h100-sxm", weights="bf16", engine=engine,
                                   batch=b, prompt=128, output=16).tpot_s
    jump_tgi = tpot("tgi", 33) - tpot("tgi", 32)
    jump_vllm = tpot("vllm", 33) - tpot("vllm", 32)
    assert jump_tgi > jump_vllm + 1e-3


def test_unknown_engine_still_a_one_line_error():
    with pytest.raises(UnknownIdError) as exc:
        load_engine("tgl")
    assert "tgi" in str(exc.value) and "\n" not in str(exc.value)


@pytest.mark.parametrize("text, engine", [
    ("TGI v3.0.1", "tgi"), ("Hugging Face TGI 2.0", "tgi"),
    ("text-generation-inference 2.4", "tgi"), ("LMDeploy v0.2.0 (TurboMind)", "lmdeploy"),
    ("Hugging Face transformers", "hf-eager"), ("vLLM 0.5", "vllm")])
def test_framework_names_map_to_the_presets(text, engine):
    assert engine_id(text)[0] == engine


def test_new_presets_are_serving_family():
    assert engine_family("tgi") == engine_family("lmdeploy") == "serving"


def test_tgi_model_flop_is_the_launcher_formula():
    """Llama-3.1-8B (L 32, D 4096, N 32, K 8, H_d 128, F 14336): per layer
    2 x 128 x 4096 x (3 x 32 + 2 x 8) = 117,440,512 plus 6 x 4096 x 14336 = 352,321,536;
    x 32 layers = 15,032,385,536 FLOP per token."""
    sc, _, _ = resolve("llama-3.1-8b", "h100-sxm", engine="tgi")
    assert tgi_flop_per_token(sc.model) == 15_032_385_536


@pytest.mark.parametrize("model, gpu, tp, budget", [
    ("llama-3.1-8b", "h100-sxm", 1, 59_870),      # 900e12 // 15,032,385,536
    ("llama-3.1-8b", "a100-sxm-80gb", 1, 4096),   # "nvidia-a100-sxm4-80gb" not in the table
    ("llama-3.1-8b", "h200-sxm", 1, 4096),        # not in the table
    ("mixtral-8x7b", "h100-sxm", 2, 32_768)])     # 1.8e15 // 2.6e10 = 68k, capped at 32768
def test_tgi_prefill_budget_by_card(model, gpu, tp, budget):
    sc, _, _ = resolve(model, gpu, engine="tgi", tp=tp)
    assert sc.engine.scheduler.limits(sc.hw)[1] == budget


@pytest.mark.parametrize("engine", ["vllm", "sglang", "trtllm", "trtllm-trt", "llama-cpp",
                                    "lmdeploy", "hf-eager"])
def test_resolve_leaves_other_presets_as_they_are(engine):
    sc, _, _ = resolve("llama-3.1-8b", "h100-sxm", engine=engine)
    assert sc.engine == ENGINES[engine]
