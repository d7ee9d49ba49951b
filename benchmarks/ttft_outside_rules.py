"""Which aggregated serving rows miss the TTFT band (|error| > 25%), and which doc section
accounts for each (docs/ttft_outside.md). A diagnostic over a `perfmodel validate
--serving-predictor sim --json` result: nothing here feeds a prediction.

Classes:
  a  the measurement is not reproducible by engine physics: a cold first wave, prompt work above
     the fastest GEMM rate measured, a mean TTFT that falls by more than 40% as C or the prompt
     grows (no predictor whose TTFT does not fall can put both rows of such a pair in the band);
  b  a mechanism is named in a doc, but no source prices it;
  c  not investigated yet (a first look is in docs/ttft_outside.md).
The rules are tried in order; the first that matches names the row.
"""

from __future__ import annotations

import re
from collections import defaultdict

from perfmodel.core.catalog import load_model
from perfmodel.core.efficiency import SUSTAINED_CLOCK_FRACTION
from perfmodel.core.hardware import load_gpu
from perfmodel.core.params import count_params

BAND = 0.25
TARGET_SHARE = 0.80
FALL = 0.6
"""A row pair at otherwise equal settings (engine, version, model, GPU, quantization,
parallelism, lengths but the one varied, measurement date) where the mean TTFT at the larger C
(or prompt) is below 0.6 x the smaller one's: a predictor whose TTFT does not fall as C or the
prompt grows cannot put both within 25% (0.75 x meas_small <= pred_small <= pred_large <=
1.25 x meas_large needs meas_large >= 0.6 x meas_small)."""
GEMM_CEILING = {"fp8": 0.74, "bf16": 0.82}
"""The fastest GEMM shape this project timed on an H200, as a share of the datasheet dense peak,
at M = 4096-16384 (calibrate/GEMM_DTYPE_NOTES.md: per-shape medians up to 1463 of 1978.9 TFLOP/s
fp8 per-tensor, 811 of 989.4 bf16); other formats: the datasheet peak itself."""
WAIT_SHARE = 0.5
"""Mean TTFT above half of OSL x the measured TPOT: a request waited for a running one to
finish, the signature of a running-request cap or KV pool (docs/serve.md, "The KV pool at high
concurrency": the mean TTFT grows by about (C / R - 1) x E2E when R of C fit)."""
NO_WARMUP_BEFORE = "2026-01-17"
"""InferenceX PR #480 ("upstream kimbochen/bench_serving, adding warmup", opened 2026-01-17):
the client of earlier runs sent one test request, then the measured ones (docs/deepseek_serving.md,
"Cold server")."""


def measured_date(source: str) -> str:
    m = re.search(r"measured (\d{4}-\d{2}-\d{2})", source)
    return m.group(1) if m else ""


def settings(c: dict, vary: str) -> tuple:
    keep = ("backend", "backend_version", "model_path", "system", "gemm_quant_mode",
            "moe_quant_mode", "isl", "osl", "batch_size", "tp_size", "pp_size",
            "attention_dp_size", "moe_tp_size", "moe_ep_size")
    return tuple(c[k] for k in keep if k != vary) + (measured_date(c["source"]),)


def falling_pairs(csv_rows: list[dict]) -> set[tuple[str, str]]:
    """(smaller, larger) id pairs of aggregated rows at otherwise equal settings whose mean TTFT
    falls below FALL x as C (batch_size) or the prompt (isl) grows."""
    out: set[tuple[str, str]] = set()
    agg = [c for c in csv_rows if c["mode"] == "agg"]
    for vary in ("batch_size", "isl"):
        by = defaultdict(list)
        for c in agg:
            by[settings(c, vary)].append(c)
        for rows in by.values():
            for lo in rows:
                for hi in rows:
                    if (int(hi[vary]) > int(lo[vary]) and float(hi["silicon_ttft_ms"])
                            < FALL * float(lo["silicon_ttft_ms"])):
                        out.add((lo["id"], hi["id"]))
    return out


def falling_rows(csv_rows: list[dict]) -> set[str]:
    """Ids of the aggregated rows in a falling pair (falling_pairs)."""
    return {i for pair in falling_pairs(csv_rows) for i in pair}


def most_inside(pairs: set[tuple[str, str]], limit: int = 20) -> int:
    """The most rows of the pairs that a predictor whose TTFT never falls with C or the prompt
    can put in the band at once: at most one row of each pair, i.e. the largest set of rows
    with no pair inside it (exhaustive per connected group of pairs; a group above `limit`
    rows counts whole, an upper bound)."""
    adj = defaultdict(set)
    for a, b in pairs:
        adj[a].add(b)
        adj[b].add(a)
    seen: set[str] = set()
    total = 0
    for start in adj:
        if start in seen:
            continue
        comp, stack = [], [start]
        while stack:
            x = stack.pop()
            if x not in seen:
                seen.add(x)
                comp.append(x)
                stack.extend(adj[x] - seen)
        if len(comp) > limit:
            total += len(comp)
            continue
        best = 0
        for mask in range(1 << len(comp)):
            chosen = {comp[k] for k in range(len(comp)) if mask >> k & 1}
            if len(chosen) > best and not any(adj[x] & chosen for x in chosen):
                best = len(chosen)
        total += best
    return total


def _fmt(r: dict) -> str:
    """The matmul format of the row's weights: 'W:fp8-b128 ...' -> fp8, 'W:bf16,experts=...' -> bf16."""
    return r["precision"].split()[0][2:].split("-")[0].split(",")[0]


def prompt_share_of_peak(r: dict) -> float:
    """The linear-layer FLOPs of the prompts a closed loop of C requests must have computed per
    second, C / (TTFT + (OSL - 1) TPOT) x ISL x 2 x (active parameters less embedding and
    lm_head), per GPU, over the GPU's datasheet dense peak for the weights' format (bf16 where
    the chip lists none): a lower bound on the prompt work (attention, norms and the lm_head
    left out) against the burst peak."""
    m = load_model(r["model"])
    pc = count_params(m)
    linear = pc.active - pc.by_group.get("embedding", 0.0) - pc.by_group.get("lm_head", 0.0)
    hw = load_gpu(r["gpu"])
    peak = hw.peak_flops_per_s.get(_fmt(r)) or hw.peak_flops_per_s["bf16"]
    rate = r["concurrency"] / (r["measured_ttft_s"]
                               + (r["output_tokens"] - 1) * r["measured_tpot_s"])
    return rate * r["prompt_tokens"] * 2 * linear / r["num_gpus"] / peak


# (rule, class, doc section, predicate over (row, csv row)); the first that matches names the row.
def _v(r, e, v=None, m=None, g=None, w=None):
    return (r["engine"] == e and (v is None or r["engine_version"] == v)
            and (m is None or r["model"] == m) and (g is None or r["gpu"] == g)
            and (w is None or r["precision"].split()[0] == "W:" + w))


def _fast(r):
    return r["predicted_ttft_s"] < r["measured_ttft_s"]


RULES = [
    ("cold first wave (unversioned SGLang DeepSeek B200, no warm-up)", "a",
     "deepseek_serving.md, Cold server",
     lambda r, c, f: _v(r, "sglang", "", "deepseek-v3", "b200")
     and measured_date(c["source"]) < NO_WARMUP_BEFORE),
    ("prompt work above the best GEMM rate measured, at the sustained clock", "a",
     "aic_vllm012.md section 3",
     lambda r, c, f: prompt_share_of_peak(r) > GEMM_CEILING.get(_fmt(r), 1.0)
     * SUSTAINED_CLOCK_FRACTION),
    ("vLLM 0.12.0 Llama-3.1-8B FP8: prompt compute partly skipped (prefix cache?)", "b",
     "aic_vllm012.md section 3; aic_recipes.md, Rejected",
     lambda r, c, f: _v(r, "vllm", "0.12.0", "llama-3.1-8b", "h200-sxm")),
    ("mean TTFT falls > 40% as C or the prompt grows", "a", "ttft_outside.md, class a", lambda r, c, f: r["row_id"] in f),
    ("a request waits over half a generation: a running cap or KV pool smaller than simulated",
     "b", "serve.md, The KV pool at high concurrency; host_ceiling.md",
     lambda r, c, f: _fast(r) and r["measured_ttft_s"] > WAIT_SHARE * r["output_tokens"]
     * r["measured_tpot_s"]),
    ("vLLM Llama-3.1-70B H100/H200 at C >= 32: a KV pool smaller than simulated", "b",
     "serve.md, The KV pool at high concurrency",
     lambda r, c, f: _v(r, "vllm", "", "llama-3.1-70b") and r["gpu"] in ("h100-sxm", "h200-sxm")
     and _fast(r) and r["concurrency"] >= 32),
    ("TRT-LLM 1.0.0rc3 Llama-3.1-8B: one generation per wave at C <= 32 (a taken slot)", "b",
     "aic_recipes.md, rc3: one taken slot",
     lambda r, c, f: _v(r, "trtllm", "1.0.0rc3", "llama-3.1-8b") and r["concurrency"] <= 32),
    ("TRT-LLM 1.0.0rc3 Llama-3.1-8B C >= 64: output-rate ceiling", "b", "host_ceiling.md",
     lambda r, c, f: _v(r, "trtllm", "1.0.0rc3", "llama-3.1-8b")),
    ("TRT-LLM 1.0.0rc3 Qwen3-32B fp8: prompt step 1.1-1.4x the op list", "b",
     "aic_recipes.md, rc3: where the rest of the Qwen3-32B gap is",
     lambda r, c, f: _v(r, "trtllm", "1.0.0rc3", "qwen3-32b") and _fast(r)),
    ("TRT-LLM 1.0.0rc3 Qwen3-235B: TTFT longer at ISL 128/256 than 512/1024", "b",
     "moe_floor.md, Qwen3-235B-A22B",
     lambda r, c, f: _v(r, "trtllm", "1.0.0rc3", "qwen3-235b-a22b") and _fast(r)),
    ("vLLM 0.12.0 Qwen3-235B: per-step cost of 0.12.0 on this checkpoint", "b",
     "aic_vllm012.md sections 1-2",
     lambda r, c, f: _v(r, "vllm", "0.12.0", "qwen3-235b-a22b")),
    ("AIC fixed-length loops, ISL <= 1024, over-predicted: simulated waves stay in lock-step",
     "c", "ttft_outside.md, First look",
     lambda r, c, f: r["engine_version"] in ("1.0.0rc3", "0.12.0") and not _fast(r)
     and r["model"] in ("qwen3-32b", "qwen3-235b-a22b") and r["prompt_tokens"] <= 1024),
    ("SGLang Qwen3.5 0.5.9 fp8: prompt rate ~2x on Blackwell, ~300 ms floor on H200", "b",
     "fp8_block.md sections 4-5; hybrid_ttft.md, What is left / Still open",
     lambda r, c, f: _v(r, "sglang", "0.5.9", "qwen3.5-397b-a17b") and _fast(r)),
    ("SGLang Qwen3.5 0.5.10.post1 / nightlies B300/B200 over-predicted: host issue of the GDN "
     "path", "b", "hybrid_ttft.md, Round 14: host side",
     lambda r, c, f: _v(r, "sglang", None, "qwen3.5-397b-a17b") and not _fast(r)),
    ("SGLang 0.5.10.post1 DeepSeek B300: MLA prompt kernel on sm_103", "b",
     "deepseek_serving.md, SGLang 0.5.10.post1 on B300",
     lambda r, c, f: _v(r, "sglang", "0.5.10.post1", "deepseek-v3", "b300")),
    ("DeepSeek TRT-LLM / SGLang 0.5.9: a per-prompt-step intercept (host)", "b",
     "moe_floor.md, Where the DeepSeek gap is; deepseek_serving.md, What is left",
     lambda r, c, f: r["model"] == "deepseek-v3" and r["engine"] in ("trtllm", "sglang")
     and _fast(r)),
    ("SGLang MoE intercept (Qwen3-235B 0.5.6.post2, GLM-5)", "b",
     "moe_floor.md, What is not found; dsa_prefill.md",
     lambda r, c, f: r["engine"] == "sglang" and r["moe"] and _fast(r)),
    ("SGLang GLM-5 nightlies over-predicted: which NSA prompt kernel the image ran", "b",
     "dsa_prefill.md, Figures",
     lambda r, c, f: _v(r, "sglang", None, "glm-5") and not _fast(r)),
    ("vLLM Kimi/MiniMax March-April B200 runs and MiniMax H200: per-step excess of some runs",
     "b", "vllm_moe.md, vmoe / vbw / vep sections",
     lambda r, c, f: r["engine"] == "vllm" and r["model"] in ("kimi-k2.5", "minimax-m2.5")
     and r["engine_version"] not in ("0.19.0",) and r["gpu"] in ("b200", "h200-sxm") and _fast(r)),
    ("vLLM Llama-3.1-70B B200 (0.10.2 import): TP-growing remainder", "b",
     "blackwell_vllm.md, What is left / TP-growing remainder",
     lambda r, c, f: _v(r, "vllm", "", "llama-3.1-70b", "b200")),
    ("TRT-LLM Llama-3.1-70B import, 1k/1k C = 128: batch waiting (which max_num_tokens ran)",
     "b", "aic_recipes.md, The 441 Llama-3.1-70B rows",
     lambda r, c, f: _v(r, "trtllm", "", "llama-3.1-70b") and not _fast(r)
     and r["concurrency"] == 128 and r["prompt_tokens"] == r["output_tokens"] == 1024),
    ("TRT-LLM Llama-3.1-70B import, TP 8 under-predicted: a TP-invariant prompt-step cost", "b",
     "tp_dense.md, What is left",
     lambda r, c, f: _v(r, "trtllm", "", "llama-3.1-70b") and _fast(r)),
    ("SGLang 0.5.1.post1 Qwen3-32B H100 TP 4/8 over-predicted (ring all-reduce, eager issue)",
     "b", "tp_dense.md, What is left",
     lambda r, c, f: _v(r, "sglang", "0.5.1.post1", "qwen3-32b")),
    ("SGLang 0.5.6.post2 Llama-3.1-8B H200: high-C output-rate ceiling, mixed chunks", "b",
     "host_ceiling.md; aic_recipes.md, What the rows say",
     lambda r, c, f: _v(r, "sglang", "0.5.6.post2", "llama-3.1-8b")),
    ("vLLM 0.18/0.19 MiniMax-M2.5 attention-DP rows: placement of a closed-loop burst", "b",
     "vllm_moe.md, busiest-rank step with per-rank limits (adp)",
     lambda r, c, f: _v(r, "vllm", None, "minimax-m2.5") and int(c["attention_dp_size"]) > 1),
    ("TRT-LLM 1.2/1.3 GB200 Qwen3-32B: step cost off (TPOT 0.2-0.5x), repeat runs disagree", "b",
     "aic_recipes.md, Not done; rc3: C = 128 and the GB200 rows",
     lambda r, c, f: _v(r, "trtllm", None, "qwen3-32b", "gb200")),
]


def classify(rows: list[dict], csv_rows: dict[str, dict]) -> dict[str, tuple[str, str, str]]:
    """row_id -> (rule, class, doc) for every aggregated row outside the band. `rows`: the
    aggregated rows of a `perfmodel validate --serving-predictor sim --json` result (dicts);
    `csv_rows`: the serving file's rows by id (their measurement dates and layouts)."""
    falling = falling_rows(list(csv_rows.values()))
    out = {}
    for r in rows:
        if r["ttft_ape"] <= BAND:
            continue
        c = csv_rows[r["row_id"]]
        for name, cls, doc, pred in RULES:
            if pred(r, c, falling):
                out[r["row_id"]] = (name, cls, doc)
                break
        else:
            out[r["row_id"]] = ("not looked at", "c", "-")
    return out
