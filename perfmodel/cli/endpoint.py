"""`perfmodel bench-endpoint`: load-test an OpenAI-compatible server at doubling concurrency."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from perfmodel.cli import HELP
from perfmodel.cli.common import (add_query_args, check_out_path, int_list, nonneg_float,
                                  positive_float, positive_int, print_json, print_table,
                                  to_jsonable)
from perfmodel.analysis.endpoint import BenchmarkRun, EndpointConfig, PredictSpec, run_benchmark
from perfmodel.core.errors import PerfModelError
from perfmodel.core.units import GiB, fmt_seconds, ms

BAR_WIDTH = 30
LAYOUT_ARGS = ("activations", "tp", "pp", "ep", "dp", "nodes")
EPILOG = """\
metrics (per request, then p50/p90/p99 per level):
  TTFT  request sent -> first non-empty streamed content chunk
  TPOT  (E2E - TTFT) / (output tokens - 1)
  E2E   request sent -> end of the stream
  output tok/s, requests/s: successful requests' tokens / level wall time
  Output tokens come from the server's usage (stream_options.include_usage) when it sends
  it, else one per content chunk; prompt lengths are approximate (one word per token).
knee:
  the first level C_i whose step to C_i+1 raises output tok/s by less than 10 % per doubling
  of concurrency ((ratio) ** (1 / log2(C_i+1 / C_i))) while E2E p50 grows: past it, more
  concurrency mostly buys queueing. 'not reached' when every step still scales.
--predict:
  pred_*: the model's request at batch = concurrency (api.evaluate); sim_*: the level
  replayed by the serving simulation, each successful request with its own lengths at the
  level's concurrency, as `perfmodel serve --trace run.json` replays a saved run.
bounds:
  requests <= 10000 per level, concurrency <= 1024, --max-seconds for the whole sweep,
  --timeout per request; a failing or slow server yields recorded errors, not a hang.
  The API key is read from the variable named by --api-key-env and never printed.
"""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "bench-endpoint", help=HELP["bench-endpoint"],
        description=("Stream requests to an OpenAI-compatible server at each concurrency level and "
                     "record TTFT, TPOT, E2E, throughput, the knee of the curve and the experiment "
                     "record. Prompt lengths are approximate (one word per token) unless the "
                     "server reports usage."),
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--url", required=True, help="API base URL, e.g. http://127.0.0.1:8000/v1 (http/https only)")
    p.add_argument("--model", required=True, help="model id as listed by {url}/models")
    p.add_argument("--api", choices=["completions", "chat"], default="completions")
    p.add_argument("--concurrency", type=int_list, default=[1, 2, 4, 8, 16],
                   help="comma-separated levels (default 1,2,4,8,16; each <= 1024)")
    p.add_argument("--requests", type=positive_int, default=80, help="requests per level (<= 10000)")
    p.add_argument("--prompt-tokens", type=positive_int, default=512, help="approximate prompt length")
    p.add_argument("--max-tokens", type=positive_int, default=128, help="max output tokens per request")
    p.add_argument("--temperature", type=nonneg_float, default=0.0)
    p.add_argument("--ignore-eos", action="store_true", help="send ignore_eos=true (vLLM, SGLang)")
    p.add_argument("--timeout", type=positive_float, default=120.0, help="seconds per request")
    p.add_argument("--max-seconds", type=positive_float, default=1800.0, help="wall-time limit of the sweep")
    p.add_argument("--api-key-env", metavar="VAR", help="environment variable holding the API key")
    p.add_argument("--framework", help="serving framework (else guessed from /models owned_by)")
    p.add_argument("--framework-version")
    p.add_argument("--quantization", help="e.g. fp8, awq-int4, q4_k_m (recorded only)")
    p.add_argument("--gpu-name", help="GPU model serving the endpoint (else nvidia-smi, if here)")
    p.add_argument("--gpu-count", type=positive_int)
    p.add_argument("--samples", type=int, default=2, help="outputs kept per level for a spot check")
    p.add_argument("--out", type=Path, help="write the full run (JSON) to this file")
    p.add_argument("--json", action="store_true", help="print the run as one JSON object")
    p.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    g = p.add_argument_group("prediction beside each level (--predict)")
    g.add_argument("--predict", action="store_true", help="add the performance model's estimate")
    g.add_argument("--predict-model", help="catalog model id (default: --model)")
    g.add_argument("--gpu", help="hardware id of the serving GPU, e.g. h100-sxm")
    g.add_argument("--engine", default="vllm", help="engine preset id (default vllm)")
    g.add_argument("--weights", default="bf16", help="weight precision id (default bf16)")
    g.add_argument("--kv", help="KV-cache precision id")
    add_query_args(g, LAYOUT_ARGS)      # the serving deployment's layout, as `predict` takes it
    p.set_defaults(func=run)


def config_from_args(args: argparse.Namespace) -> EndpointConfig:
    return EndpointConfig(
        url=args.url, model=args.model, api=args.api, concurrency=tuple(args.concurrency),
        requests=args.requests, prompt_tokens=args.prompt_tokens, max_tokens=args.max_tokens,
        temperature=args.temperature, ignore_eos=args.ignore_eos, request_timeout_s=args.timeout,
        max_seconds=args.max_seconds, api_key_env=args.api_key_env, framework=args.framework,
        framework_version=args.framework_version, quantization=args.quantization,
        gpu_name=args.gpu_name, gpu_count=args.gpu_count, samples_per_level=args.samples)


class _Bar:
    """One progress line per level on stderr (redrawn in place on a terminal)."""

    def __init__(self) -> None:
        self.tty = sys.stderr.isatty()

    def __call__(self, concurrency: int, done: int, planned: int, failed: int) -> None:
        if not self.tty and done < planned:
            return
        filled = BAR_WIDTH * done // max(planned, 1)
        line = (f"concurrency {concurrency:>4} [{'#' * filled}{'.' * (BAR_WIDTH - filled)}] "
                f"{done}/{planned} failed {failed}")
        sys.stderr.write(("\r" if self.tty else "") + line + ("\n" if done >= planned else ""))
        sys.stderr.flush()


def predict_from_args(args: argparse.Namespace) -> PredictSpec | None:
    if not args.predict:
        return None
    if not args.gpu:
        raise PerfModelError("--predict needs --gpu (a hardware id, e.g. h100-sxm)")
    layout = {k: getattr(args, k) for k in LAYOUT_ARGS if getattr(args, k, None) is not None}
    return PredictSpec(model=args.predict_model or args.model, gpu=args.gpu, engine=args.engine,
                       weights=args.weights, kv=args.kv, **layout)


def run(args: argparse.Namespace) -> int:
    cfg = config_from_args(args)
    predict = predict_from_args(args)
    if args.out is not None and not args.out.parent.is_dir():
        raise PerfModelError(f"--out directory {str(args.out.parent)!r} does not exist")
    check_out_path(args.out, "--out")   # before the load test, not after it
    result = run_benchmark(cfg, progress=None if args.no_progress else _Bar(), predict=predict)
    if args.out is not None:
        args.out.write_text(json.dumps(to_jsonable(result), indent=2, allow_nan=False) + "\n")
    if args.json:
        print_json(result)
    else:
        print_run(result)
    return 0


def _ms(v: float | None) -> float | str:
    return ms(v) if v is not None else "-"


def print_run(result: BenchmarkRun) -> None:
    rec = result.record
    print(f"{rec.endpoint}  model {rec.model}  api {rec.api}  framework {rec.framework or '?'}"
          f"  date {rec.date}")
    rows = []
    for lv in result.levels:
        s = lv.stats
        rows.append({
            "conc": lv.concurrency, "sent": s.requests_sent, "ok": s.ok, "failed": s.failed,
            "errors": ",".join(f"{k}:{v}" for k, v in s.errors.items()) or "-",
            "ttft_p50_ms": _ms(s.ttft_p50_s), "ttft_p90_ms": _ms(s.ttft_p90_s),
            "ttft_p99_ms": _ms(s.ttft_p99_s), "tpot_p50_ms": _ms(s.tpot_p50_s),
            "tpot_p90_ms": _ms(s.tpot_p90_s), "e2e_p50_ms": _ms(s.e2e_p50_s),
            "e2e_p90_ms": _ms(s.e2e_p90_s), "out_tok_s": s.output_tok_s, "req_s": s.requests_s,
            "gpu_mem_gib": lv.gpu_peak_memory_bytes / GiB if lv.gpu_peak_memory_bytes else "-",
        })
        if lv.prediction is not None:
            pr = lv.prediction
            rows[-1].update({"pred_ttft_ms": ms(pr.ttft_s), "pred_tpot_ms": ms(pr.tpot_s),
                             "pred_e2e_ms": ms(pr.e2e_s), "pred_tok_s": pr.output_tok_s_total})
            sim = pr.simulated
            rows[-1].update({"sim_ttft_p50_ms": _ms(sim.get("ttft_p50_s")),
                             "sim_tpot_p50_ms": _ms(sim.get("tpot_p50_s")),
                             "sim_tok_s": sim.get("output_tok_s_total", "-")})
    print_table(rows)
    knee = result.knee
    print(f"knee: {knee.concurrency if knee.concurrency is not None else 'not reached'} ({knee.reason})")
    print(f"total: {rec.total_requests} requests ({rec.total_ok} ok), {rec.total_output_tokens} output "
          f"tokens in {fmt_seconds(rec.total_time_s)}; input tokens {rec.input_tokens_min}-"
          f"{rec.input_tokens_max} ({rec.input_tokens_source}); tokens counted from "
          f"{', '.join(sorted({lv.stats.tokens_source or '-' for lv in result.levels}))}")
    if result.predict is not None:
        p = result.predict
        print(f"predicted: {p.model} on {p.gpu}, engine {p.engine}, weights {p.weights}"
              f"{', kv ' + p.kv if p.kv else ''} (batch = concurrency; ratios in the JSON)")
    if result.stopped_early:
        print(f"stopped early: {result.stopped_early}")
