"""What the model lacks for a row it gets wrong: general rules on the row's features
(metric, what bounds the step, precision, GPU memory type, engine era, assumptions), never a
look-up of the row itself."""

from __future__ import annotations

import re

from perfmodel.core.engines import ENGINES
from perfmodel.core.hardware import load_gpu
from perfmodel.core.units import US
from perfmodel.analysis.validation.mapping import Target

OFF = 0.25   # rows further off than this get a diagnosis


def diagnose(t: Target, predicted: float, bound: str, fits: bool) -> str:
    """One sentence for a row whose prediction is more than 25% off, else ''."""
    measured = t.measurement.measured or predicted
    ratio = measured / predicted
    if abs(ratio - 1) <= OFF and abs(1 / ratio - 1) <= OFF:
        return ""
    metric = t.measurement.metric
    time_like = metric in ("ttft_ms", "tpot_ms", "e2e_latency_s")
    slower = (ratio > 1) == time_like    # the real system was slower than modelled
    hw = load_gpu(t.gpu)
    text = " ".join((t.measurement.framework, t.measurement.notes)).lower()
    hints: list[str] = []
    if bound.startswith("capacity") and not slower and any("KV precision" in a for a in t.assumptions):
        hints.append("max throughput is capacity-limited and the KV precision is not stated "
                     "(16-bit assumed); an FP8 KV cache holds twice the sequences")
    elif bound.startswith("capacity"):
        hints.append("max throughput at the modelled capacity: the engine's batch, token "
                     "budget or memory share differs from the preset")
    elif metric == "max_batch":
        hints.append("capacity searched by powers of two (one step is 2x); the engine's "
                     "memory fraction and KV precision are not stated")
    elif bound == "communication" and not slower:
        hints.append("small-message all-reduce is modelled with 2*ceil(log2 p) latency hops "
                     "(tree/doubling); NVSwitch one-shot/custom all-reduce needs about two")
    elif bound == "compute" and slower and t.weights.name in ("fp8", "fp4"):
        hints.append(f"one GEMM efficiency for every dtype: {t.weights.name} GEMMs reach a "
                     "smaller share of their peak than bf16 (power-limited clocks, scaling)")
    elif bound == "compute" and not slower and hw.memory_type.startswith("gddr"):
        hints.append("fp16-accumulate tensor-core rate of GeForce/workstation cards (2x the "
                     "fp32-accumulate peak in hardware_db) is not modelled")
    elif slower and re.search(r"\b20(19|2[0-3])\b|v0\.[0-6]\b", text):
        hints.append("the engine preset describes the current release; this older release "
                     "had more per-step CPU/scheduler overhead")
    elif slower and 1 / min(ratio, 1 / ratio) > 1.5 and ENGINES[t.engine].launch_s > 0:
        hints.append(f"kernels are issued one by one from Python: this host's launch cost is "
                     f"above the preset's {ENGINES[t.engine].launch_s / US:.0f} us per kernel "
                     "(a calibrated profile fits it)")
    elif bound == "memory" and not slower:
        hints.append(f"achieved bandwidth above the default {hw.memory_type} efficiency "
                     "(fused low-bit kernels stream closer to peak)")
    elif bound == "memory" and slower:
        hints.append("achieved bandwidth below the default efficiency (kernel tails, "
                     "scheduler, sampling or serving front-end not in the preset)")
    elif bound == "overhead":
        hints.append("per-token CPU overhead of this framework differs from the preset")
    if not fits:
        hints.append("the memory model says this configuration does not fit, so the engine "
                     "used less memory than modelled")
    hints += [a for a in t.assumptions if "mixed weight formats" in a or "power cap" in a]
    word = "slower" if slower else "faster"
    what = f"{bound}-bound" if bound in ("compute", "memory", "communication", "overhead") else bound
    return f"measured {word} than modelled ({ratio:.2f}x, {what}): " + "; ".join(
        hints or ["no single missing effect identified"])
