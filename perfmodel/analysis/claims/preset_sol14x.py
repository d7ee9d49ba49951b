"""Preset `gpt-5.6-sol-14x`: seed 003_db1e9b8be85cdb76.txt, "Inference sped up 14x? A
reproducible check from quantization to continuous batching".

The source repeats an unsourced "14x" with no metric and no baseline, lists six sources of
speed-up (a smaller or MoE model, FP16 -> FP8/INT4, graph compilation, continuous batching
with paged KV, speculative decoding, special hardware), and gives a test recipe: a Hugging
Face transformers `generate` baseline against a vLLM server, 80 requests at concurrency 8,
128 output tokens. The preset checks the source's numbers, runs the recipe through the
model on every metric, and searches the lever combinations that reach 14x on each metric.
"""

from __future__ import annotations

from perfmodel.analysis.claims import quantities as q
from perfmodel.analysis.claims.attribute import attribute
from perfmodel.analysis.claims.explain import explain
from perfmodel.analysis.claims.metrics import evaluate
from perfmodel.analysis.claims.presets import PresetReport, Rows, ratio_text, register
from perfmodel.analysis.claims.scenario import Scenario, metric_info, revise
from perfmodel.core.units import GB

SEED = "003_db1e9b8be85cdb76.txt"
MODEL = "qwen2.5-7b"
ASSUMPTIONS = [
    "the recipe's model Qwen/Qwen2.5-7B-Instruct = qwen2.5-7b, in FP16 as the script loads it",
    "the GPU is not named: one h100-sxm (a common serving card)",
    "the prompt '请用三句话解释什么是 KV Cache。' with the chat template = 32 tokens; "
    "max_tokens 128 = 128 output tokens",
    "HF baseline: transformers generate, one request at a time (hf-eager, batch 1)",
    "vLLM server: continuous batching and paged KV at concurrency 8, 80 requests in total "
    "(the closed loop the model simulates)",
    "'14x' is checked on every metric, since the source does not say which",
]
HF = Scenario(name="HF transformers generate", model=MODEL, gpu="h100-sxm", weights="fp16",
              activations="fp16", kv="fp16", engine="hf-eager", batch=1, prompt_tokens=32,
              output_tokens=128, requests=80)
VLLM = revise(HF, name="vLLM server, concurrency 8", engine="vllm", batching="continuous",
              paged_kv=True, batch=None, concurrency=8)
VLLM_1 = revise(HF, name="vLLM, one request", engine="vllm", batching="continuous", paged_kv=True)
HEADLINE = "output_tok_s_total"
METRICS = ("decode_tok_s_per_user", "ttft_s", "e2e_s", "output_tok_s_total", "usd_per_mtok")


@register("gpt-5.6-sol-14x", "'GPT-5.6 Sol sped up 14x': which metric, which baseline")
def build(*, search: bool = True) -> PresetReport:
    r = Rows()
    for fmt, src in (("fp16", 2.0), ("fp8", 1.0), ("int4", [0.6, 0.8])):
        per = q.weight_bytes_per_param(MODEL, fmt)
        r.add("precision", f"weights in {fmt} per 1B parameters", "GB", src, per,
              f"model {per:.3g} GB per 1B parameters of {MODEL}: matmul weights at {fmt} "
              "(group scales included), embeddings and lm_head at 16 bits")
    w = q.weight_bytes(HF) / GB
    r.add("precision", "a 7B model in FP16", "GB", 14, w,
          f"{ratio_text(14, w)}: {MODEL} has 7.6B parameters, 1.1B of them in embeddings")
    v1 = evaluate(VLLM_1)
    v4 = evaluate(revise(VLLM_1, name="vLLM, INT4 weights", weights="int4"))
    gain = v4.value("decode_tok_s_per_user") / v1.value("decode_tok_s_per_user")
    r.add("precision", "INT4 weights: decode speed-up at batch 1", "x", 2.0, gain,
          f"{ratio_text(2.0, gain)}; batch-1 decode is {v1.regimes['decode_tok_s_per_user']}-bound"
          " and INT4 kernels stream below the 16-bit rate")
    hf, trt = evaluate(HF), evaluate(revise(HF, name="TensorRT-LLM", engine="trtllm"))
    g = trt.value("decode_tok_s_per_user") / hf.value("decode_tok_s_per_user")
    r.add("graph compilation", "HF eager -> compiled engine (TensorRT-LLM), one request", "x", 2.0,
          g, f"{ratio_text(2.0, g)}; HF eager generate is {hf.regimes['decode_tok_s_per_user']}-"
          "bound: Python and kernel launches, not the GPU, set its pace", kind="at_least")
    recipe = {m: attribute(HF, VLLM, m) for m in METRICS}
    thr = recipe[HEADLINE]
    r.add("recipe", "vLLM at concurrency 8 vs the HF script: throughput", "x", [2.0, 9.0],
          thr.total, f"model {thr.total:.3g}x where the source expects 'several times'; "
          "order-averaged split: " + ", ".join(f"{k} {v:.2f}x" for k, v in thr.shapley.items()))
    for m, att in recipe.items():
        unit = metric_info(m)[0]
        r.add("recipe reaches 14x?", m, "x", 14.0, att.total,
              f"model {att.total:.3g}x: {att.baseline_value:.4g} -> {att.improved_value:.4g} "
              f"{unit}" + ("" if metric_info(m)[1] else " (lower is better)"), kind="at_least")
    explanations = []
    if search:
        explanations = [explain("14x", m, HF, max_levers=4, inverse=False) for m in METRICS]
    by_metric = {e.metric: e for e in explanations}
    head = by_metric.get(HEADLINE)
    verdict = ("; ".join(f"{e.metric}: {e.verdict}" for e in explanations)
               if explanations else "not searched")
    return PresetReport(
        id="gpt-5.6-sol-14x", title="'GPT-5.6 Sol sped up 14x': which metric, which baseline",
        seed=SEED, summary=r.summary(), metric=HEADLINE, total=thr.total, factors=thr.factors,
        shapley=thr.shapley, combinations=head.combinations if head else [],
        verdict=f"14x against the HF baseline, per metric: {verdict}",
        source_vs_model=r.rows, explanations=explanations,
        assumptions=ASSUMPTIONS + thr.assumptions, warnings=thr.warnings)
