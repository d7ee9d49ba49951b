"""Bundled disaggregated levels (perfmodel/serving/disagg_bundle.py): one high-concurrency
closed-loop level simulated request by request and in bundles, side by side in one run:
the time ratio and what bundling changes in the figures (TTFT, TPOT, throughput).

    python benchmarks/bench_disagg_bundle.py
"""

from __future__ import annotations

import time

from perfmodel import api
from perfmodel.serving import disagg_bundle

# the data file's Kimi-K2.5 GB200 TRT-LLM layout (1 prefill worker tp1 dp4 ep4, prefill max
# batch 4; 4 decode workers tp8 ep8) at one of its measured levels
CASE = dict(model="kimi-k2.5", gpu="gb200", weights="fp4-g16", kv="fp8", activations="fp4",
            engine="trtllm", prefill=dict(workers=1, tp=1, ep=4, dp=4, max_batch=4),
            decode=dict(workers=4, tp=8, ep=8), prompt_tokens=1024, output_tokens=1024)
LEVEL = 192


def level(above: int):
    disagg_bundle.BUNDLE_ABOVE_CONCURRENCY = above
    t0 = time.perf_counter()
    p = api.serve_disagg(**CASE, concurrencies=[LEVEL]).points[0]
    return time.perf_counter() - t0, p


def main() -> None:
    default = disagg_bundle.BUNDLE_ABOVE_CONCURRENCY
    t_exact, exact = level(1 << 30)
    t_bundled, bundled = level(default)
    disagg_bundle.BUNDLE_ABOVE_CONCURRENCY = default
    print(f"concurrency {LEVEL}: request by request {t_exact:7.2f} s, bundles above {default} "
          f"{t_bundled:7.2f} s   ratio {t_exact / t_bundled:5.1f}x faster")
    for key in ("ttft_mean_s", "tpot_mean_s", "output_tok_s_total"):
        a, b = getattr(exact, key), getattr(bundled, key)
        print(f"  {key:20s} exact {a:10.4g}  bundled {b:10.4g}  change {100 * (b / a - 1):+5.1f}%")


if __name__ == "__main__":
    main()
