"""The README's `.venv/bin/perfmodel ...` examples, run as written (in-process): each exits 0
with output, and its counts of GPUs and models match the catalog. An example written with
`...` takes the flags of the last full example of the same command that it does not set itself
(and not its load, --concurrency/--rate-rps/--trace, when it gives one). Skipped: examples that
need a GPU, a live server, a file the reader makes, or minutes (listed in SKIP)."""

from __future__ import annotations

import re
import shlex

import pytest

from conftest import ROOT
from perfmodel.cli import main

README = (ROOT / "README.md").read_text(encoding="utf-8")
SKIP = {
    "validate": "minutes over the whole measurement file",
    "calibrate run": "needs a CUDA device",
    "calibrate engine": "needs the reader's bench-endpoint run.json",
    "bench-endpoint": "needs a live OpenAI-compatible server",
    "size": "searches every GPU (tens of seconds); tests/test_sizing.py covers it",
    "--trace run.json": "needs the reader's bench-endpoint record",
    "my-card": "needs the reader's own hardware YAML",
}
LOADS = {"--concurrency", "--rate-rps", "--rate", "--trace"}


def _pairs(args: list[str]) -> list[list[str]]:
    out: list[list[str]] = []
    for a in args:
        if a.startswith("--") or not out:
            out.append([a])
        else:
            out[-1].append(a)
    return out


def examples() -> list[tuple[str, list[str]]]:
    """(README line, argv) of every runnable example, `...` filled in."""
    last: dict[str, list[str]] = {}
    out = []
    for line in README.splitlines():
        if not line.startswith(".venv/bin/perfmodel "):
            continue
        text = line.split("  #", 1)[0].replace(".venv/bin/perfmodel ", "", 1).strip()
        words = shlex.split(text)
        sub = " ".join(words[:2]) if words[0] == "calibrate" else words[0]
        if any(k in line.split("  #", 1)[0] for k in ("my-card", "--trace run.json")) or \
                "[" in text or sub in SKIP:
            continue
        if "..." not in words and any(w.startswith("--") for w in words):
            last[words[0]] = words
        if "..." in words:
            own = [w for w in words if w != "..."]
            given = {w for w in own if w.startswith("--")}
            base = last.get(words[0], [])
            keep = [p for p in _pairs(base[1:]) if p[0] not in given
                    and not (p[0] in LOADS and given & LOADS)]
            words = own[:1] + [w for p in keep for w in p] + own[1:]
        out.append((line, words))
    return out


EXAMPLES = examples()


def test_the_readme_examples_are_found():
    names = {argv[0] for _, argv in EXAMPLES}
    assert {"gpus", "models", "memory", "predict", "sweep", "spec", "serve", "claim",
            "attribute", "calibrate"} <= names


@pytest.mark.parametrize("line,argv", EXAMPLES, ids=[" ".join(a)[:60] for _, a in EXAMPLES])
def test_readme_example_runs(line, argv, capsys, tmp_path):
    if argv[:2] == ["calibrate", "fit"]:
        # without --profile-out the example overwrote the shipped calibrate/profiles/h200-sxm.yaml
        # (and dropped its link fit: link_fraction 0.5904 -> 0.75, link_latency_s removed)
        assert "--profile-out" in argv and "--base" in argv, line
    argv = [str(tmp_path / "out.yaml") if a.startswith("/tmp/") else a for a in argv]
    rc = main(argv)
    out, err = capsys.readouterr()
    assert rc == 0, (line, err)
    assert out.strip()


@pytest.mark.parametrize("command,what", [("gpus", "accelerators"), ("models", "architectures")])
def test_readme_counts_match_the_catalog(command, what):
    # README said '54 architectures' after the 55th (Mistral Large 3) was added
    from perfmodel.core.catalog import list_models
    from perfmodel.core.hardware import list_gpus
    stated = int(re.search(rf"perfmodel {command}\s+# (\d+) {what}", README).group(1))
    assert stated == len(list_gpus() if command == "gpus" else list_models())
