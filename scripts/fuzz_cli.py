"""Deep fuzz of every `perfmodel` subcommand (issue 17); prints counts by class.

    PYTHONPATH=. .venv/bin/python scripts/fuzz_cli.py --calls 20000 [--seed 1] [--show 3]

Calls are spread evenly over the commands the parser registers (tests/fuzz_harness.py).
Exit code 1 when any call fails (an exception escaping main, exit 2 without exactly one
stderr line, non-finite or invalid-JSON output, or a call over 10 s)."""

from __future__ import annotations

import argparse
import collections
import signal
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from hypothesis import HealthCheck, Phase, given, seed, settings  # noqa: E402

from fuzz_harness import argv_strategy, call, commands, new_pools  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=20_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--show", type=int, default=3, help="failing argv lists shown per class")
    ap.add_argument("--only", default="", help="comma-separated command names")
    ap.add_argument("--max-seconds", type=float, default=float("inf"),
                    help="stop starting calls after this long (also on SIGTERM); the summary "
                         "covers the calls made")
    args = ap.parse_args()
    pools = new_pools()
    cmds = [c for c in commands() if not args.only or c.name in args.only.split(",")]
    counts: collections.Counter[str] = collections.Counter()
    by_cmd: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    failures: dict[str, list[str]] = collections.defaultdict(list)
    slowest: list[tuple[float, str]] = []
    t0 = time.perf_counter()
    per_cmd = max(1, args.calls // len(cmds))
    stop = {"now": False}
    signal.signal(signal.SIGTERM, lambda *_: stop.update(now=True))
    for i, cmd in enumerate(cmds):
        if stop["now"]:
            break
        @settings(max_examples=per_cmd, deadline=None, database=None, phases=[Phase.generate],
                  suppress_health_check=list(HealthCheck), derandomize=False)
        @seed(args.seed * 1000 + i)       # reproducible: the same seed replays the same calls
        @given(argv=argv_strategy(cmd, pools))
        def one(argv):
            if stop["now"] or time.perf_counter() - t0 > args.max_seconds:
                stop["now"] = True
                return
            o = call(argv)
            counts[o.kind] += 1
            by_cmd[cmd.name][o.kind] += 1
            slowest.append((o.seconds, " ".join(argv)[:160]))
            slowest.sort(reverse=True)
            del slowest[5:]
            if o.kind == "failure":
                counts[f"failure: {o.detail}"] += 1
                key = f"{cmd.name}: {o.detail}: {o.stderr.strip().splitlines()[-1][:160] if o.stderr.strip() else ''}"
                if len(failures[key]) < args.show:
                    failures[key].append(" ".join(repr(a) for a in argv))
        one()
        print(f"[{time.perf_counter() - t0:7.0f}s] {cmd.name:18s} {dict(by_cmd[cmd.name])}",
              flush=True)
    total = sum(counts[k] for k in ("result", "clean_error", "failure"))
    if stop["now"]:
        print("\nstopped early (--max-seconds or SIGTERM): the counts cover the calls made")
    print(f"\n{total} calls in {time.perf_counter() - t0:.0f} s: {counts['clean_error']} clean errors, "
          f"{counts['result']} results, {counts['failure']} failures "
          f"({len(failures)} distinct)")
    for k, v in sorted(counts.items()):
        if k.startswith("failure: "):
            print(f"  {v:6d}  {k}")
    for key, examples in sorted(failures.items()):
        print(f"\n{key}")
        for ex in examples:
            print(f"    perfmodel {ex}")
    print("\nslowest calls:")
    for s, a in slowest:
        print(f"  {s:6.2f} s  {a}")
    return 1 if counts["failure"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
