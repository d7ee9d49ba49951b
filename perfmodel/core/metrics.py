"""The one table of metric names: each name means one thing everywhere (the model's
results, validation rows, measured runs, claims), and the web Definitions page and tooltips
list them from here."""

from __future__ import annotations

METRICS: dict[str, tuple[str, str, str]] = {   # name -> (label, display unit, definition)
    "ttft_s": ("TTFT", "ms", "Time to first token: request arrival to the first output token "
               "= the engine's per-request overhead + prefill of the whole batch's prompts."),
    "tpot_s": ("TPOT", "ms", "Time per output token: (E2E - TTFT) / (output tokens - 1); the "
               "mean decode step over the growing context (not the worst case)."),
    "itl_s": ("ITL", "ms", "Inter-token latency: the gap between two consecutive output tokens "
              "of one request. Its mean equals TPOT; measured ITL also shows its spread."),
    "e2e_s": ("E2E", "s", "End-to-end latency: request arrival to the last output token "
              "= TTFT + the sum of the decode steps."),
    "decode_tok_s_per_user": ("Decode tok/s per user", "tok/s", "Output tokens per second one "
                              "request sees while decoding = 1 / TPOT."),
    "output_tok_s_total": ("Aggregate output tok/s", "tok/s", "All users' output tokens per "
                           "second of wall time, prefill included: batch x output / E2E for a "
                           "batch, request rate x output tokens in steady serving, output "
                           "tokens / wall time when measured."),
    "decode_tok_s_total": ("Aggregate decode tok/s", "tok/s", "All users' tokens per second "
                           "while decoding = batch / TPOT (prefill excluded)."),
    "goodput_rps": ("Goodput", "req/s", "The largest Poisson request rate at which requests "
                    "still meet the TTFT and TPOT targets (SLOs); requests that miss either do not "
                    "count."),
    "fits": ("Fits", "", "The configuration can run: per-GPU memory (weights + KV cache at "
             "prompt + output tokens + activation peak + reserve) is within the engine's usable "
             "share of the device; at a serving concurrency, also within the engine's running-"
             "sequence cap and token budget (perfmodel/serving/batching.py)."),
    "knee": ("Knee", "concurrency", "The first concurrency after which doubling it raises "
             "aggregate output tok/s by less than 10% (per doubling) while E2E latency grows "
             "(perfmodel/serving/knee.py)."),
    "mbu": ("MBU", "%", "Memory-bandwidth utilisation: bytes moved per decode step / (step time x "
            "the datasheet's peak bandwidth)."),
    "mfu": ("MFU", "%", "Model FLOPs utilisation: FLOPs per decode step / (step time x the "
            "datasheet's dense peak FLOP/s of the compute dtype)."),
    "bound": ("Bound", "", "What limits the decode step: 'memory' (bytes / bandwidth dominates), "
              "'compute' (FLOPs / peak dominates), 'communication' (TP/PP/EP collectives) or "
              "'overhead' (the CPU cannot issue kernels fast enough to keep the GPU busy)."),
    "memory": ("Memory per GPU", "GB", "Weights + KV cache (batch x context, rounded to the "
               "engine's KV blocks) + activation peak + runtime reserve, against the engine's "
               "usable share of device memory (decimal GB, 1 GB = 10^9 bytes)."),
    "prefill_tok_s": ("Prefill tok/s", "tok/s", "Prompt tokens processed per second during prefill."),
    "roofline_floor_s": ("Roofline floor", "ms", "max(bytes / peak bandwidth, FLOPs / fastest peak): "
                         "no implementation can take a decode step in less time."),
    "max_batch": ("Max batch", "sequences", "Largest batch whose weights + KV + activations + "
                  "reserve fit at this prompt + output length."),
    "spec_tokens": ("Tokens per target step", "tokens", "Speculative decoding: mean tokens one "
                    "target step yields, E = (1 - alpha^(gamma+1)) / (1 - alpha) with per-token "
                    "acceptance alpha and gamma draft tokens (Leviathan et al. 2023)."),
    "spec_speedup": ("Speculative speed-up", "x", "E x plain decode step / (verification of gamma+1 "
                     "tokens + drafting + proposer overhead); below 1 past the break-even batch."),
    "usd_per_mtok": ("$ per million tokens", "USD", "GPU price per hour x GPUs / (3600 x output "
                     "tok/s) x 10^6."),
}


def definition(name: str) -> str:
    """The definition of one metric name (KeyError for an unknown one)."""
    return METRICS[name][2]
