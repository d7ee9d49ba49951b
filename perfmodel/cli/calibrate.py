"""`perfmodel calibrate ...`: measure this machine and fit a profile.

    perfmodel calibrate run [--device cuda|cpu] [--quick] [--out RAW.json] [--gpu ID]
    perfmodel calibrate fit RAW.json [--gpu ID] [--out calibrate/profiles/<id>.yaml]

Sub-commands register in SUBCOMMANDS (each a function taking the `calibrate` sub-parsers
and setting its own `func`); add new ones there. Formatting only: the fit is
perfmodel.analysis.calibration.fit_profile.
"""

from __future__ import annotations

import datetime
import importlib.util
import subprocess
import sys
from pathlib import Path

from perfmodel.cli import HELP
from perfmodel.analysis.calibration import FitReport, fit_profile, read_raw
from perfmodel.analysis.calibration.report import summary_rows
from perfmodel.cli.common import check_out_path, print_json, print_table
from perfmodel.core.errors import PerfModelError
from perfmodel.core.profile import Profile, load_profile, save_profile

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "calibrate" / "bench.py"
PROFILE_DIR = Path("calibrate") / "profiles"
INSTALL_HINT = "pip install '.[calibrate]'"
PREFERRED_ENGINES = ("torch-graph", "torch-compile", "torch-eager", "hf-eager")


def register(sub) -> None:
    p = sub.add_parser("calibrate", help=HELP["calibrate"],
                       description=__doc__.split("\n\n")[0])
    csub = p.add_subparsers(dest="calibrate_command", required=True, parser_class=type(p))
    for add in SUBCOMMANDS:
        add(csub)


# ----------------------------------------------------------------------------- fit

def _add_fit_args(p) -> None:
    p.add_argument("--gpu", default=None,
                   help="hardware_db id or YAML of the card (default: from the raw env's GPU name; "
                        "a CPU run builds its own spec)")
    p.add_argument("--hardware-dir", default=None, help="extra folder of hardware YAML files")
    p.add_argument("--profile-out", "--out", dest="profile_out", default=None, metavar="PATH",
                   help="profile YAML to write (default calibrate/profiles/<gpu id>.yaml)")
    p.add_argument("--base", default=None, metavar="PROFILE",
                   help="profile of the same card whose link fit (efficiency.link_fraction, link_latency_s) "
                        "is carried over, e.g. calibrate/profiles/h200-sxm-x2-link.yaml")
    p.add_argument("--json", action="store_true", help="print one JSON object")


def register_fit(csub) -> None:
    p = csub.add_parser("fit", help="fit a profile to a calibrate/bench.py raw JSON",
                        description="Fit efficiencies and engine parameters to a raw result; "
                                    "writes the profile YAML and a report beside it.")
    p.add_argument("raw", help="raw JSON written by calibrate/bench.py")
    _add_fit_args(p)
    p.set_defaults(func=run_fit)


def run_fit(args) -> int:
    return fit_and_write(args.raw, args)


def fit_and_write(raw_path: str | Path, args) -> int:
    check_out_path(args.profile_out, "--profile-out")
    raw = read_raw(raw_path)
    base = load_profile(args.base) if args.base else None
    profile, report = fit_profile(raw, args.gpu, hardware_dir=args.hardware_dir, base=base)
    extra = {"raw": Path(raw_path).name, **({"base": Path(args.base).name} if base else {})}
    profile = profile.model_copy(update={"meta": {**profile.meta, **extra}})
    out = Path(args.profile_out) if args.profile_out else PROFILE_DIR / f"{profile.gpu}.yaml"
    written = write_outputs(profile, report, out)
    if args.json:
        print_json({"profile": profile, "report": report,
                    "written": [str(w) for w in written]})
        return 0
    print_report(report)
    print("wrote " + ", ".join(str(w) for w in written))
    hw = [w for w in written if w.parent.name == "hardware"]
    gpu = str(hw[0]) if hw else profile.gpu
    engine = next((e for e in PREFERRED_ENGINES if e in profile.engines), "vllm")
    print(f"use it: perfmodel predict --gpu {gpu} --profile {out} --engine {engine} --model ...")
    return 0


def write_outputs(profile: Profile, report: FitReport, out: Path) -> list[Path]:
    """Profile YAML (atomic), report markdown beside it, and for a CPU run its hardware spec
    in hardware/ beside it (not *.yaml in the profile folder, which holds profiles only)."""
    written = []
    hw = profile.meta.get("hardware")
    if hw:
        import yaml
        hw_path = out.parent / "hardware" / f"{profile.gpu}.yaml"
        _atomic_write(hw_path, yaml.safe_dump(hw, sort_keys=False))
        written.append(hw_path)
    save_profile(profile, out)
    written.append(out)
    report_path = out.with_name(out.stem + ".report.md")
    _atomic_write(report_path, report.to_markdown(f"Calibration fit: {profile.gpu}"))
    written.append(report_path)
    return written


def _atomic_write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text)
    tmp.replace(path)


def print_report(report: FitReport) -> None:
    print(f"calibration fit on {report.gpu} ({report.device}); |predicted / measured - 1|:")
    print_table(summary_rows(report))
    print()
    print_table([{"parameter": p.name, "value": p.value, "datasheet/preset": p.datasheet,
                  "how": p.status} for p in report.params])
    for p in report.kept():
        print(f"note: {p.name} {p.note}")
    for n in report.notes:
        print(f"note: {n}")


# ----------------------------------------------------------------------------- run

def register_run(csub) -> None:
    p = csub.add_parser("run", help="run calibrate/bench.py on this machine, then fit",
                        description="Runs calibrate/bench.py with this Python, then fits.")
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda",
                   help="cuda (default) or cpu (add --quick: full shapes on a CPU take long)")
    p.add_argument("--quick", action="store_true", help="tiny shapes (a smoke test, CI)")
    p.add_argument("--raw-out", dest="raw_out", default=None, metavar="RAW.json",
                   help="raw JSON path (default calibrate/data/raw-<device>-<UTC time>.json)")
    p.add_argument("--sections", default=None, help="passed to bench.py --sections")
    _add_fit_args(p)
    p.set_defaults(func=run_run)


def default_raw_path(device: str) -> Path:
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%d-%H%M%S")
    folder = Path("calibrate") / "data"
    return (folder if folder.is_dir() else Path(".")) / f"raw-{device}-{stamp}.json"


def bench_command(args, raw_out: Path) -> list[str]:
    cmd = [sys.executable, str(BENCH), "--device", args.device, "--out", str(raw_out)]
    if args.quick:
        cmd.append("--quick")
    if args.sections:
        cmd += ["--sections", args.sections]
    return cmd


def run_bench(cmd: list[str]) -> None:
    """Run bench.py, echoing its progress; a failure becomes one PerfModelError line."""
    if importlib.util.find_spec("torch") is None:
        raise PerfModelError(f"calibrate run needs torch in this Python ({sys.executable}); "
                             f"install it with: {INSTALL_HINT}")
    if not BENCH.is_file():
        raise PerfModelError(f"{BENCH} not found (perfmodel installed without its repository?); "
                             "run calibrate/bench.py from a checkout, then `perfmodel calibrate fit`")
    errors = []
    with subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True, cwd=Path.cwd()) as proc:
        for line in proc.stderr:
            sys.stderr.write(line)
            if line.startswith("error:") or "Error" in line.split(":")[0]:
                errors.append(line.strip())
        rc = proc.wait()
    if rc != 0:
        why = errors[-1].removeprefix("error: ") if errors else f"exit code {rc}"
        raise PerfModelError(f"calibrate/bench.py failed: {why}")


def run_run(args) -> int:
    raw_out = Path(args.raw_out) if args.raw_out else default_raw_path(args.device)
    check_out_path(raw_out, "--raw-out")
    check_out_path(args.profile_out, "--profile-out")   # before the benchmark's minutes
    run_bench(bench_command(args, raw_out))
    try:
        return fit_and_write(raw_out, args)
    except PerfModelError as exc:
        raise PerfModelError(f"{exc} (the raw data is kept in {raw_out}; fix the cause and run "
                             f"`perfmodel calibrate fit {raw_out}`)") from None


from perfmodel.cli.calibrate_engine import add_engine_parser  # noqa: E402

SUBCOMMANDS = [register_run, register_fit, add_engine_parser]

