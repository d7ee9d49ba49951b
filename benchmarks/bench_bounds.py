"""Work bounds of issue 17, measured side by side in one run (process CPU seconds):
attribution's Shapley budget, the claim search budget, and sizing's early exit for a
target no engine can meet. Each case runs bounded, then with the bound lifted.

    PYTHONPATH=. .venv/bin/python benchmarks/bench_bounds.py [--quick]
"""

from __future__ import annotations

import argparse
import math
import time
from contextlib import contextmanager

from perfmodel.analysis import sizing
from perfmodel.analysis.claims import attribute as attribution
from perfmodel.analysis.claims import explain as explaining
from perfmodel.analysis.claims.scenario import load_scenario


@contextmanager
def patched(obj, name, value):
    old = getattr(obj, name)
    setattr(obj, name, value)
    try:
        yield
    finally:
        setattr(obj, name, old)


def cpu(fn) -> float:
    t = time.process_time()
    fn()
    return time.process_time() - t


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="skip the slowest unbounded case")
    args = ap.parse_args()
    a = load_scenario("examples/llama70b-fp8-tp4.yaml")
    b = load_scenario("examples/rtx4090-int8-draft.yaml")
    rows = []
    att = lambda: attribution.attribute(a, b, "decode_tok_s_per_user")  # noqa: E731
    bounded = cpu(att)
    with patched(attribution, "MAX_EVALUATIONS", math.inf), \
            patched(attribution, "SHAPLEY_PERMUTATIONS", 256):
        free = cpu(att) if not args.quick else math.nan
    rows.append(("attribute 11 levers", bounded, free))
    ex = lambda: explaining.explain("14x", "decode_tok_s_per_user", a)  # noqa: E731
    bounded = cpu(ex)
    with patched(explaining, "MAX_SEARCH_EVALUATIONS", math.inf):
        free = cpu(ex)
    rows.append(("claim --from 14x", bounded, free))
    sz = lambda: sizing.size("llama-3.1-70b", rate_rps=10, prompt=1000, output=200,  # noqa: E731
                             ttft_slo_s=1.0, tpot_slo_s=1e-9, max_gpus=64,
                             engines=["vllm", "sglang", "trtllm"])
    bounded = cpu(sz)
    print("(sizing's early exit has no switch; unbounded = the same search at a 50 ms target)")
    free = cpu(lambda: sizing.size("llama-3.1-70b", rate_rps=10, prompt=1000, output=200,
                                   ttft_slo_s=1.0, tpot_slo_s=0.05, max_gpus=64,
                                   engines=["vllm", "sglang", "trtllm"]))
    rows.append(("size TPOT 1e-9 s", bounded, free))
    print(f"{'case':24s} {'bounded s':>10s} {'unbounded s':>12s} {'ratio':>7s}")
    for name, bnd, fr in rows:
        print(f"{name:24s} {bnd:10.2f} {fr:12.2f} {fr / bnd:7.1f}")


if __name__ == "__main__":
    main()
