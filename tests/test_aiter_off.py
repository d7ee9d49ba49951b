"""vLLM with and without AITER on AMD Instinct (docs/amd.md "AITER off"): the decode-step
arithmetic of Qwen3.5-122B-A10B that reads vllm-project/vllm issue #56945's batch-1 figures
(MI325X, one GPU, fp8 KV: 98 / 98 / 97 tok/s with VLLM_ROCM_USE_AITER=1 and
ROCM_AITER_UNIFIED_ATTN, 57 / 49 / 26 without, at ~200 / ~2k / ~12k prompt tokens).
Expected values are hand calculations from the model's config and the issue's numbers."""

from perfmodel.api import evaluate, make_query
from perfmodel.core.catalog import load_model
from perfmodel.core.ops import kv_bytes_per_token_layer, ops
from perfmodel.core.precision import Precision

MODEL = "qwen3.5-122b-a10b"
FP8_KV = Precision.of("fp8-b128", "fp8", None)


def test_full_attention_layers_and_kv_bytes_per_token():
    """48 layers, full_attention_interval 4 -> 12 softmax-attention layers; each caches
    K and V of 2 heads x 256 at 1 byte: 2 * 2 * 256 = 1024 B per token per layer, 12288 B per
    token over the 12 layers (the Gated DeltaNet layers keep a fixed-size state instead)."""
    m = load_model(MODEL)
    assert m.num_full_attention_layers == 12
    assert kv_bytes_per_token_layer(m, FP8_KV) == 1024.0


def test_decode_step_reads_the_context_kv_once():
    """Batch 1 at 12000 cached tokens reads (12000 + 1) tokens x 12 layers x 1024 B =
    147,468,288 B of KV in the attention op: the 145 MB that the issue's non-AITER run spends
    21 ms more on between ~200 and ~12k tokens (1/26 - 1/57 s)."""
    att = [o for o in ops(load_model(MODEL), FP8_KV, 1, 1, 12000) if o.name == "attention"]
    assert len(att) == 1
    assert float(att[0].cost.kv_read_bytes) == 12001 * 12 * 1024


def _decode_step_s(gpu: str, context: int) -> float:
    q = make_query(model=MODEL, gpu=gpu, weights="fp8-b128", kv="fp8", engine="vllm", batch=1,
                   prompt_tokens=context, output_tokens=2, context_tokens=context)
    return float(evaluate(q).decode_step_s)


def test_default_prices_the_aiter_path_flat_in_context():
    """The default AMD rates are the AITER path's: from ~200 to ~12k tokens the issue's AITER
    run goes from 98 to 97 tok/s, at most 1/96.5 - 1/98.5 s = 0.21 ms longer (integer tok/s
    rounding), while its non-AITER run goes 57 -> 26 tok/s, 1/26 - 1/57 = 20.9 ms longer."""
    grow = _decode_step_s("mi325x", 12000) - _decode_step_s("mi325x", 200)
    assert 0.0 < grow <= 1 / 96.5 - 1 / 98.5
    assert grow < 0.05 * (1 / 26 - 1 / 57)



def _assumptions(gpu: str, engine: str) -> list[str]:
    from perfmodel.core.resolve import resolve
    return resolve("llama-3.3-70b", gpu, weights="fp8", kv="fp8", engine=engine, tp=8)[2]


def test_amd_predictions_say_they_price_the_aiter_path():
    """On a chip whose fp8 GEMMs are priced from aiter's tables the prediction says so, names
    the engine's switch, and (vLLM) that its default is off; elsewhere nothing is said."""
    vllm = [a for a in _assumptions("mi355x", "vllm") if "AITER" in a]
    assert len(vllm) == 1 and "VLLM_ROCM_USE_AITER=1" in vllm[0] and "default is off" in vllm[0]
    sglang = [a for a in _assumptions("mi300x", "sglang") if "AITER" in a]
    assert len(sglang) == 1 and "SGLANG_USE_AITER=1" in sglang[0]
    for gpu, engine in (("h200-sxm", "vllm"), ("mi250x", "vllm"), ("mi355x", "trtllm")):
        assert not [a for a in _assumptions(gpu, engine) if "AITER" in a], (gpu, engine)
