#!/usr/bin/env python3
"""Fit perfmodel's link model to a bench_nccl.py run and check the TP decode prediction.

    python calibrate/fit_link.py calibrate/data/raw-nccl-h200x2-20261129.json \
        --gpu h200-sxm --out calibrate/profiles/h200-sxm-x2-link.yaml

Model (perfmodel/core/parallel.py allreduce_s, evaluated by calling it):
    t(b) = 2(p-1)/p * b / (link_bw * eff.link_fraction) + 2*ceil(log2 p) * latency
with link_bw the hardware_db intra_node_link bandwidth. eff.link_fraction and latency are fitted by
least squares on log t over the message sizes (every size weighs the same, whatever its time).
Two curves are fitted:
  eager:  torch dist.all_reduce called from Python, 8 KiB .. 512 MiB (host launch included);
  device: all-reduces captured in a CUDA graph up to 4 MiB, eager above (where the host is
          hidden behind the transfer): the cost a graph-captured decode step pays.
The profile gets the device fit: perfmodel charges host launch cost separately (launch_s).
"""
from __future__ import annotations

import argparse
import datetime
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from perfmodel.api import resolve  # noqa: E402
from perfmodel.core.efficiency import default_efficiency  # noqa: E402
from perfmodel.core.errors import PerfModelError  # noqa: E402
from perfmodel.core.hardware import load_gpu  # noqa: E402
from perfmodel.analysis.calibration.stats import ratio_errors  # noqa: E402
from perfmodel.core.parallel import allreduce_hops, allreduce_s  # noqa: E402
from perfmodel.core.predict import request_times  # noqa: E402
from perfmodel.core.profile import Profile, save_profile  # noqa: E402
from perfmodel.core.specs import Efficiency, LinkSpec  # noqa: E402
from perfmodel.core.units import MS, US  # noqa: E402


def allreduce_points(raw: dict, curve: str) -> tuple[np.ndarray, np.ndarray]:
    """(bytes, seconds) of the all-reduce records for 'eager' or 'device' (see docstring)."""
    eager = {r["bytes"]: r["seconds"] for r in raw["allreduce"]["records"]}
    if curve == "device":
        graph = {r["bytes"]: r["seconds"] for r in raw.get("allreduce_graph", {}).get("records", [])}
        eager = {**eager, **graph}   # graph where measured (small sizes), eager above
    sizes = sorted(eager)
    return np.array(sizes, dtype=float), np.array([eager[s] for s in sizes], dtype=float)


def model_s(nbytes, p: int, link_bw: float, eff: float, latency_s: float):
    """perfmodel.core.parallel.allreduce_s with the link's figures as arguments."""
    link = LinkSpec.model_construct(name="fitted", bandwidth_bytes_per_s=link_bw,
                                    latency_s=latency_s)
    return allreduce_s(np.asarray(nbytes, dtype=float), p, link, Efficiency.model_construct(link=eff))


def fit_allreduce(nbytes, seconds, p: int, link_bw: float) -> tuple[float, float]:
    """(eff.link_fraction <= 1, latency_s >= 0) minimising sum (log model - log measured)^2.

    t = a*b + c is fitted on a log grid of (a, c), refined four times around the best point;
    eff = a_lo / a with a_lo the model's seconds per byte at eff = 1, latency = c / hops.
    """
    b, t = np.asarray(nbytes, float), np.asarray(seconds, float)
    a_lo = float(model_s(1.0, p, link_bw, 1.0, 0.0))      # eff = 1: the fastest allowed slope
    la = np.log(a_lo) + np.linspace(0, np.log(100), 201)  # eff from 1 down to 0.01
    lc = np.log(t.min()) + np.linspace(-np.log(1e4), np.log(2), 201)
    for _ in range(5):
        A, C = np.meshgrid(np.exp(la), np.exp(lc), indexing="ij")
        cost = ((np.log(A[..., None] * b + C[..., None]) - np.log(t)) ** 2).sum(-1)
        i, j = np.unravel_index(np.argmin(cost), cost.shape)
        a, c = float(A[i, j]), float(C[i, j])
        da, dc = (la[1] - la[0]) * 2, (lc[1] - lc[0]) * 2
        la = np.linspace(max(np.log(a) - da, np.log(a_lo)), np.log(a) + da, 81)
        lc = np.linspace(np.log(c) - dc, np.log(c) + dc, 81)
    return a_lo / a, c / allreduce_hops(p)


errors = ratio_errors   # RMS of log ratio, median and max |pred/meas - 1| (one definition)


def decode_comparison(raw: dict, gpu: str, profile: Profile | None) -> list[dict]:
    """Predicted (torch-graph engine, llama-3.1-8b) vs measured graph decode steps."""
    rows = []
    for part in ("decode_tp", "decode_1gpu"):
        recs = {(r["batch"], r["context"], r["mode"]): r for r in raw.get(part, {}).get("records", [])}
        for (B, S, mode), r in sorted(recs.items()):
            if mode != "graph":
                continue
            sc, _, _ = resolve("llama-3.1-8b", gpu, engine="torch-graph", tp=r["tp"], profile=profile)
            rt = request_times(sc, B, S, 2, context=S)
            comm = sum(float(o.time_s) for o in rt.step.ops if o.kind == "comm")
            nocomm = recs.get((B, S, "graph_nocomm"))
            rows.append({"tp": r["tp"], "batch": B, "context": S, "measured_s": r["seconds"],
                         "predicted_s": float(rt.decode_step_s), "predicted_comm_s": comm,
                         "measured_comm_s": r["seconds"] - nocomm["seconds"] if nocomm else None})
    return rows


def report_decode(base: list[dict], fitted: list[dict], prof: Profile) -> None:
    """Step-time errors at TP=2 and of the TP=2 speed-up over 1 GPU; stored in prof.meta."""
    def tp2(rows, key):
        return np.array([r[key] for r in rows if r["tp"] > 1])
    one = {(r["batch"], r["context"]): r for r in base if r["tp"] == 1}
    out = {}
    for name, rows in (("datasheet", base), ("fitted", fitted)):
        meas, pred = tp2(rows, "measured_s"), tp2(rows, "predicted_s")
        pairs = [(one[(r["batch"], r["context"])], r) for r in rows
                 if r["tp"] > 1 and (r["batch"], r["context"]) in one]
        speed_meas = [o["measured_s"] / r["measured_s"] for o, r in pairs]
        speed_pred = [o["predicted_s"] / r["predicted_s"] for o, r in pairs]
        out[name] = {"tp2_step": errors(pred, meas), "tp2_speedup": errors(speed_pred, speed_meas)}
        print(f"TP=2 decode step, {name:9s} link: median |err| {out[name]['tp2_step']['median_abs_rel']:.1%}"
              f" (max {out[name]['tp2_step']['max_abs_rel']:.1%}); speed-up over 1 GPU median |err| "
              f"{out[name]['tp2_speedup']['median_abs_rel']:.1%}")
    prof.meta["decode_check"] = {"engine": "torch-graph", "model": "llama-3.1-8b", **out}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("raw", help="bench_nccl.py JSON")
    ap.add_argument("--gpu", default="h200-sxm", help="hardware_db id of the GPUs")
    ap.add_argument("--out", help="profile YAML to write (link efficiency and latency)")
    args = ap.parse_args(argv)
    try:
        raw = json.loads(Path(args.raw).read_text())
        hw = load_gpu(args.gpu)
        p = int(raw["world_size"])
        link = hw.intra_node_link
        if link is None:
            raise PerfModelError(f"{hw.id} has no intra-node link in hardware_db")
        default = default_efficiency(hw)
        summary = {}
        for curve in ("eager", "device"):
            b, t = allreduce_points(raw, curve)
            eff, lat = fit_allreduce(b, t, p, link.bandwidth_bytes_per_s)
            before = errors(model_s(b, p, link.bandwidth_bytes_per_s, default.link_fraction, link.latency_s), t)
            after = errors(model_s(b, p, link.bandwidth_bytes_per_s, eff, lat), t)
            summary[curve] = {"eff_link": eff, "latency_s": lat, "error_datasheet": before,
                              "error_fitted": after}
            print(f"{curve:6s} all-reduce, {len(b)} sizes: link_fraction {eff:.3f} (default "
                  f"{default.link_fraction}), latency {lat / US:.2f} us (hardware_db {link.latency_s / US:.1f});"
                  f" RMS log error {before['rms_log']:.3f} -> {after['rms_log']:.3f}, max "
                  f"{before['max_abs_rel']:.0%} -> {after['max_abs_rel']:.0%}")
        dev = summary["device"]
        prof = Profile(gpu=hw.id, efficiency=default.model_copy(update={
            "link_fraction": round(dev["eff_link"], 4),
            "source": f"datasheet defaults except link, fitted by calibrate/fit_link.py on {args.raw}"}),
            link_latency_s=float(f"{dev['latency_s']:.3g}"),
            meta={"card": ", ".join(raw["env"]["gpu_names"]), "gpus": p,
                  "driver": (raw["env"].get("driver_version") or [None])[0],
                  "torch": raw["env"]["torch_version"], "nccl": raw["env"]["nccl_version"],
                  "date": raw["env"]["date_utc"][:10], "raw": args.raw,
                  "fitted": "efficiency.link_fraction and link_latency_s only; other efficiencies are defaults",
                  "points": dev["error_fitted"]["points"],
                  "fit_error": {k: {"datasheet": v["error_datasheet"], "fitted": v["error_fitted"],
                                    "eff_link": v["eff_link"], "latency_s": v["latency_s"]}
                                for k, v in summary.items()}})
        print("decode step, torch-graph engine, llama-3.1-8b (ms): tp B S measured | datasheet | "
              "fitted link | comm measured / predicted(fitted)")
        for d, f in zip(decode_comparison(raw, hw.id, None), decode_comparison(raw, hw.id, prof)):
            mc = f"{d['measured_comm_s'] / MS:.3f}" if d["measured_comm_s"] is not None else "-"
            print(f"  {d['tp']} {d['batch']:3d} {d['context']:5d}  {d['measured_s'] / MS:7.3f} | "
                  f"{d['predicted_s'] / MS:7.3f} | {f['predicted_s'] / MS:7.3f} | {mc} / "
                  f"{f['predicted_comm_s'] / MS:.3f}")
        report_decode(decode_comparison(raw, hw.id, None), decode_comparison(raw, hw.id, prof), prof)
        if args.out:
            save_profile(prof, args.out)
            print(f"wrote {args.out} ({datetime.date.today()})")
    except (OSError, KeyError, ValueError, PerfModelError) as exc:
        print(f"error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
