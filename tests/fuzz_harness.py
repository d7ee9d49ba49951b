"""In-process fuzzing of `perfmodel.cli.main` (issue 17): the commands and their options are
read from the argparse parser, so a command added to cli/__init__.py COMMANDS is fuzzed
without editing this file.

A call passes when it exits 0 with parseable output (valid JSON when it asked for JSON; no
'nan'/'inf' token anywhere) or exits 2 with exactly one line on stderr, within CALL_LIMIT_S.
Anything else (another exit code, an exception escaping main, a timeout) is a failure.

Used by tests/test_fuzz_cli.py (the `ci` profile) and scripts/fuzz_cli.py (>= 20,000 calls).
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import dataclasses
import io
import json
import math
import re
import signal
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from hypothesis import strategies as st
from pydantic import BaseModel

from perfmodel.cli import build_parser, main

CALL_LIMIT_S = 10.0
"""The issue's bound: every command finishes in under 10 s on any input. Measured as the
process's CPU time (SIGPROF), because the test machine is shared (2 cores, ~8 users) and wall
time there says more about the neighbours than about perfmodel; a wall-clock guard of
WALL_LIMIT_S still catches a call that hangs without computing."""
WALL_LIMIT_S = 60.0

SKIP_COMMANDS = {
    ("calibrate", "run"): "runs calibrate/bench.py (torch) in a subprocess: a benchmark, not a parse",
}
SKIP_OPTIONS = {
    "--help": "prints help and exits 0 (argparse)",
    "--write-docs": "rewrites README.md and docs/ in the checkout",
    "--fit-intervals": "rewrites the committed interval table",
}
PREFER = {"data": 0.97, "prompt": 0.95, "output": 0.95}
"""Options given more often than other optional ones: `validate` without --data runs the whole
committed table (seconds per call), which would take most of a deep run's time."""
OUTPUT_DESTS = {"out", "profile_out", "raw_out"}
"""Options naming a file to write: always a path in the harness's temporary folder."""

ROOT = Path(__file__).resolve().parent.parent
_NAN_INF = re.compile(r"(?<![A-Za-z0-9_])-?(nan|inf)(?![A-Za-z0-9_])")
"""Python's spelling of a non-finite float in text (JSON's NaN/Infinity fail json.loads)."""


@dataclass(frozen=True)
class Option:
    flag: str | None          # None: a positional
    dest: str
    takes_value: bool
    required: bool
    choices: tuple[str, ...] = ()
    type_name: str = ""       # the argparse type's name: int, positive_float, int_list, ...
    group: int | None = None  # index of its mutually exclusive group, if any


@dataclass(frozen=True)
class Command:
    path: tuple[str, ...]
    options: tuple[Option, ...]
    required_groups: tuple[int, ...] = ()

    @property
    def name(self) -> str:
        return " ".join(self.path)


def commands() -> list[Command]:
    """Every leaf subcommand of the parser, with its options."""
    out: list[Command] = []

    def walk(parser: argparse.ArgumentParser, path: tuple[str, ...]) -> None:
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if subs:
            for name, sub in subs[0].choices.items():
                walk(sub, path + (name,))
            return
        if path in SKIP_COMMANDS:
            return
        opts = []
        groups = {id(a): i for i, g in enumerate(parser._mutually_exclusive_groups)
                  for a in g._group_actions}
        required = tuple(i for i, g in enumerate(parser._mutually_exclusive_groups) if g.required)
        for a in parser._actions:
            if isinstance(a, argparse._HelpAction):
                continue
            flag = next((s for s in a.option_strings if s.startswith("--")), None) \
                if a.option_strings else None
            if flag in SKIP_OPTIONS:
                continue
            opts.append(Option(flag=flag, dest=a.dest, takes_value=a.nargs != 0,
                               required=bool(a.required) or not a.option_strings,
                               choices=tuple(str(c) for c in (a.choices or ())),
                               type_name=getattr(a.type, "__name__", ""),
                               group=groups.get(id(a))))
        out.append(Command(path, tuple(opts), required))

    walk(build_parser(), ())
    return out


# ------------------------------------------------------------------ hostile files


def _ids() -> dict[str, list[str]]:
    from perfmodel.core.catalog import list_models
    from perfmodel.core.engines import ENGINES
    from perfmodel.core.hardware import list_gpus
    from perfmodel.core.specs import PRECISION_NAMES
    return {"model": [m.id for m in list_models()], "gpu": [g.id for g in list_gpus()],
            "engine": sorted(ENGINES), "precision": list(PRECISION_NAMES) + ["int4-g64"]}


def make_files(folder: Path) -> dict[str, list[str]]:
    """Hostile and extreme-but-valid files; returns kind -> paths."""
    folder.mkdir(parents=True, exist_ok=True)

    def w(name: str, text: str) -> str:
        (folder / name).write_text(text)
        return str(folder / name)

    hostile = [
        str(folder / "missing.yaml"), str(folder), "/dev/null", "",
        w("garbage.yaml", "\x00\x01{[: :}\n\t- -"),
        w("deep.yaml", "a: " + "[" * 3000 + "]" * 3000),
        w("deep40.yaml", "a: " + "[" * 40 + "]" * 40),
        w("deep.json", "[" * 200_000 + "]" * 200_000),
        w("deepobj.json", '{"a":' * 5000 + "1" + "}" * 5000),
        w("python.yaml", "kind: !!python/object/apply:os.system ['true']\n"),
        w("list.yaml", "- 1\n- 2\n"),
        w("laughs.yaml", "a: &a [x,x,x,x,x,x,x,x,x,x]\n" + "".join(
            f"{c}: &{c} [{', '.join(['*' + p] * 10)}]\n" for p, c in zip("abcdefg", "bcdefgh"))),
        w("huge.yaml", "x: 1\n" + "k: v\n" * 450_000),
        w("garbage.json", '{"schema_version": 1, "levels": [nan, Infinity, 1e999]}'),
        w("empty.csv", ""),
    ]
    hw_src = (ROOT / "hardware_db" / "h100-sxm.yaml").read_text()
    tiny = re.sub(r"(bytes_per_s:\s*)[0-9.eE+]+", r"\g<1>1.0e-300", hw_src)
    slow = re.sub(r"(?m)^(\s+(fp32|tf32|bf16|fp16|fp8|int8|fp4|int4):\s*)[0-9.eE+]+",
                  r"\g<1>1.0e-300", hw_src)
    big = re.sub(r"(bytes_per_s:\s*)[0-9.eE+]+", r"\g<1>1.0e300", hw_src)
    padded = hw_src + "".join(f"pad{i}: {i}\n" for i in range(15_000))   # ~230 kB
    hwdir = folder / "hwdir"
    hwdir.mkdir(exist_ok=True)
    (hwdir / "tiny.yaml").write_text(tiny.replace("id: h100-sxm", "id: fuzz-tiny"))
    (hwdir / "slow.yaml").write_text(slow.replace("id: h100-sxm", "id: fuzz-slow"))
    gpu_files = [w("gpu_tiny.yaml", tiny.replace("id: h100-sxm", "id: fuzz-tiny")),
                 w("gpu_big.yaml", big.replace("id: h100-sxm", "id: fuzz-big")),
                 w("gpu_slow.yaml", slow.replace("id: h100-sxm", "id: fuzz-slow")),
                 w("gpu_padded.yaml", padded.replace("id: h100-sxm", "id: fuzz-pad"))]
    profiles = sorted(str(p) for p in (ROOT / "calibrate" / "profiles").glob("*.yaml"))[:2]
    profiles.append(w("profile_extreme.yaml",
                      "kind: perfmodel-profile\ngpu: h100-sxm\n"
                      "engines: {vllm: {cpu_overhead_per_step_s: 1.0e-300}}\n"))
    scenarios = sorted(str(p) for p in (ROOT / "examples").glob("*.yaml"))
    real = ROOT / "data" / "public_measurements.csv"
    tables = []
    rows = list(csv.DictReader(io.StringIO(real.read_text(encoding="utf-8"))))[:3]
    for name, change in (("huge_len", {"input_len": "99999999999999999999999", "output_len": "7"}),
                         ("huge_batch", {"batch_or_concurrency": "1e300"}),
                         ("tiny_value", {"value": "1e-320"}),
                         ("neg", {"input_len": "-5", "value": "-1"})):
        buf = io.StringIO()
        wr = csv.DictWriter(buf, fieldnames=list(rows[0]))
        wr.writeheader()
        wr.writerows({**r, **change} for r in rows)
        tables.append(w(f"table_{name}.csv", buf.getvalue()))
    return {"hostile": hostile, "gpu": gpu_files, "hwdir": [str(hwdir)], "profile": profiles,
            "scenario": scenarios, "table": tables}


# ------------------------------------------------------------------ values

GOOD_SHARE = 0.9
"""Share of option values drawn from plausible values, so calls reach the model's arithmetic;
the rest are hostile (numbers, strings, files)."""
PLAUSIBLE_SHARE = 0.4
"""Share of calls whose every value is plausible (ids, small counts, real files), so that the
model's arithmetic is reached, not only its input checks."""
NUMBERS = ["0", "-1", "1", "2", "8", "64", "1024", "4096", "131072", "1e308", "-1e308", "1e-9",
           "5e-324", "nan", "inf", "-inf", "0.5", "0.99", "1.0", "99999999999999999999999999",
           str(2**63), "1_000", "0x10", "3.", "-0"]
STRINGS = ["", " ", "é", "模型", "\u202e", "None", "null", "[]", "{}", "a,b,,", ",", "x" * 300,
           "../../etc/passwd", "14x", "50%", "-5x", "1e309x", "nan%", "bf16/", "/fp8", "int4-g0",
           "int4-g-1", "fp8,bf16"]


@dataclass
class Pools:
    ids: dict[str, list[str]]
    files: dict[str, list[str]]
    tmp: Path
    _presets: list[str] = field(default_factory=list)

    def for_option(self, cmd: Command, opt: Option, *, plausible: bool = False
                   ) -> st.SearchStrategy[str]:
        """A value for the option: with plausible=True always one of its plausible values."""
        if opt.dest in OUTPUT_DESTS:
            return st.sampled_from([str(self.tmp / "out" / "o.yaml"), str(self.tmp / "out.json")])
        good = self._good(cmd, opt)
        if plausible:
            return st.sampled_from(good)
        hostile = st.one_of(st.sampled_from(NUMBERS), st.sampled_from(STRINGS),
                            st.sampled_from(self.files["hostile"]),
                            st.text(max_size=12))
        return st.tuples(st.floats(0, 1), st.sampled_from(good), hostile).map(
            lambda t: t[1] if t[0] < GOOD_SHARE else t[2])

    def _good(self, cmd: Command, opt: Option) -> list[str]:
        d = opt.dest.lower()
        if opt.choices:
            return list(opt.choices)
        ids, files = self.ids, self.files
        if "hardware" in d:
            return files["hwdir"]
        if d == "ids":      # `gpus ID...`
            return ids["gpu"] + files["gpu"]
        if d == "price":
            return ["h100-sxm=2.5", "a10=0", "h100-sxm=nan", "nope=1", "h100-sxm=1e308", "=", "a10"]
        if d == "order":
            from perfmodel.analysis.claims.levers import LEVER_NAMES
            return list(LEVER_NAMES) + [",".join(LEVER_NAMES), ",".join(LEVER_NAMES[::-1])]
        if "accept" in d:
            return ["0", "0.5", "0.9", "0.999999", "1e-12", "1", "2", "9"]
        if d in ("model", "models", "draft", "predict_model"):
            return ids["model"][:40] + ["meta-llama/Llama-3.1-8B"]
        if d in ("gpu", "gpus", "gpu_name"):
            return ids["gpu"] + files["gpu"] * 4 + ["fuzz-tiny", "fuzz-slow", "h100-sxm,h200-sxm"]
        if d in ("engine", "engines", "framework"):
            return ids["engine"]
        if d in ("weights", "kv", "activations", "draft_weights", "quantization"):
            return ids["precision"]
        if d == "precisions":
            return ids["precision"] + ["bf16/fp8", "fp8,int4", "int4/fp8"]
        if "profile" in d or d == "base":
            return files["profile"]
        if d in ("baseline", "improved") or "scenario" in d:
            return files["scenario"]
        if d in ("data", "raw", "run", "path", "file"):
            return files["table"] + files["scenario"] + files["profile"]
        if d == "preset":
            return self.presets()
        if d in ("claim",):
            return ["14x", "2", "50%", "1.01x", "1000x"]
        if d in ("acceptance",):
            return ["0", "0.5", "0.9", "0.999999", "1e-12"]
        if d == "url":
            return ["http://127.0.0.1:9/v1", "ftp://x", "http://"]
        kind = opt.type_name
        if kind in ("fraction", "ratio"):
            return ["0.25", "0.5", "1", "0.9"]
        if d in ("tp", "pp", "ep", "gamma", "max_levers", "limit", "new_tokens", "gpu_count",
                 "max_gpus", "samples"):
            return ["1", "2", "4", "8", "1", "1"]
        if "list" in kind:
            return ["1,2,4", "8", "1,1000000", "3,5"]
        if "int" in kind:
            return ["1", "2", "8", "64", "256", "1024", "4096", "8192", "32768", "131072"]
        if "float" in kind:
            return ["1", "0.05", "0.5", "2", "10", "1e-9", "1e9", "1e300"]
        return ["1", "2", "8", "64", "1024", "0.5", "1e-9", "1e9", "1,2,4", "x"]

    def presets(self) -> list[str]:
        if not self._presets:
            from perfmodel.analysis.claims.presets import list_presets
            self._presets = [p for p, _ in list_presets()]
        return self._presets


def argv_strategy(cmd: Command, pools: Pools) -> st.SearchStrategy[list[str]]:
    """Required options (sometimes dropped), optional ones at random, in a random order."""

    @st.composite
    def build(draw) -> list[str]:
        plausible = draw(st.floats(0, 1)) < PLAUSIBLE_SHARE   # a call with no hostile value
        parts: list[list[str]] = []
        # a plausible call gives one option of each exclusive group (argparse's rule)
        chosen = {g: draw(st.sampled_from([o.dest for o in cmd.options if o.group == g]))
                  for g in {o.group for o in cmd.options if o.group is not None}}
        for opt in cmd.options:
            share = PREFER.get(opt.dest, 0.97 if opt.required else 0.35)
            if plausible and opt.group is not None:
                share = 0.0 if chosen[opt.group] != opt.dest else \
                    (1.0 if opt.group in cmd.required_groups else 0.5)
            use = draw(st.floats(0, 1)) < share
            if not use:
                continue
            if not opt.takes_value:
                parts.append([opt.flag])
                continue
            value = draw(pools.for_option(cmd, opt, plausible=plausible))
            parts.append([value] if opt.flag is None else [opt.flag, value])
        order = draw(st.permutations(range(len(parts)))) if parts else []
        flat = [x for i in order for x in parts[i]]
        return list(cmd.path) + flat

    return build()


# ------------------------------------------------------------------ one call


class CallTimeout(BaseException):
    """Raised by the alarm inside a call that ran past CALL_LIMIT_S."""


@dataclass
class Outcome:
    kind: str        # "result", "clean_error" or "failure"
    detail: str      # failure class, e.g. "exit 2 with 3 stderr lines", "RecursionError"
    seconds: float
    stdout: str = ""
    stderr: str = ""


def _alarm(signum, frame):  # noqa: ARG001
    raise CallTimeout("CPU" if signum == signal.SIGPROF else "wall")


def call(argv: list[str], limit_s: float = CALL_LIMIT_S, wall_s: float = WALL_LIMIT_S) -> Outcome:
    """Run the CLI in-process and classify the outcome."""
    out, err = io.StringIO(), io.StringIO()
    old = signal.signal(signal.SIGALRM, _alarm), signal.signal(signal.SIGPROF, _alarm)
    signal.setitimer(signal.ITIMER_PROF, limit_s)
    signal.setitimer(signal.ITIMER_REAL, wall_s)
    t0 = time.perf_counter()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = main(argv)
    except CallTimeout as exc:
        return Outcome("failure", f"timeout ({exc})", time.perf_counter() - t0, out.getvalue(),
                       err.getvalue())
    except BaseException as exc:  # noqa: BLE001 - anything escaping main is the finding
        return Outcome("failure", type(exc).__name__, time.perf_counter() - t0, out.getvalue(),
                       f"{err.getvalue()}{type(exc).__name__}: {exc}")
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old[0])
        signal.signal(signal.SIGPROF, old[1])
    return classify(argv, rc, out.getvalue(), err.getvalue(), time.perf_counter() - t0)


def classify(argv: list[str], rc: int, stdout: str, stderr: str, seconds: float) -> Outcome:
    if rc == 2:
        lines = stderr.strip("\n").splitlines()
        if len(lines) == 1 and lines[0].strip():
            return Outcome("clean_error", "exit 2", seconds, stdout, stderr)
        return Outcome("failure", f"exit 2 with {len(lines)} stderr lines", seconds, stdout, stderr)
    if rc != 0:
        return Outcome("failure", f"exit {rc}", seconds, stdout, stderr)
    if _wants_json(argv):
        try:
            json.loads(stdout, parse_constant=_no_constant)
        except ValueError as exc:
            return Outcome("failure", f"invalid JSON ({str(exc)[:40]})", seconds, stdout, stderr)
    elif _NAN_INF.search(stdout):
        return Outcome("failure", "nan/inf in output", seconds, stdout, stderr)
    return Outcome("result", "exit 0", seconds, stdout, stderr)


def _wants_json(argv: list[str]) -> bool:
    if "--out" in argv:   # a command writing its result to a file prints a summary
        return False
    fmt = [argv[i + 1] for i, a in enumerate(argv[:-1]) if a == "--format"]
    return "--json" in argv or (bool(fmt) and fmt[-1] == "json")


def _no_constant(name: str) -> float:
    raise ValueError(f"{name} is not JSON")


def new_pools() -> Pools:
    tmp = Path(tempfile.mkdtemp(prefix="perfmodel-fuzz-"))
    return Pools(ids=_ids(), files=make_files(tmp / "files"), tmp=tmp)


def assert_clean(argv: list[str], outcome: Outcome) -> None:
    assert outcome.kind != "failure", (
        f"{outcome.detail} after {outcome.seconds:.1f}s: perfmodel {' '.join(map(repr, argv))}\n"
        f"stderr: {outcome.stderr[-2000:]}\nstdout: {outcome.stdout[:500]}")


__all__ = ["CALL_LIMIT_S", "Command", "Outcome", "Pools", "argv_strategy", "assert_clean", "call",
           "commands", "new_pools"]


def assert_finite(obj, path: str = "result") -> None:
    """Every float reachable in a typed API result (pydantic models, dataclasses, dicts,
    lists, float arrays) is finite (tests/test_fuzz_api.py, tests/test_fuzz_api_entry.py)."""
    if isinstance(obj, BaseModel):
        for k in type(obj).model_fields:
            assert_finite(getattr(obj, k), f"{path}.{k}")
    elif dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        for f in dataclasses.fields(obj):
            assert_finite(getattr(obj, f.name), f"{path}.{f.name}")
    elif isinstance(obj, dict):
        for k, v in obj.items():
            assert_finite(v, f"{path}[{k!r}]")
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            assert_finite(v, f"{path}[{i}]")
    elif isinstance(obj, np.ndarray):
        if obj.dtype.kind in "fc":
            assert np.all(np.isfinite(obj)), f"{path} = {obj}"
    elif isinstance(obj, (float, np.floating)):
        assert math.isfinite(obj), f"{path} = {obj}"
