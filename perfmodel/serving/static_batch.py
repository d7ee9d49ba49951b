"""Static batching in the step-level scheduler (hf-eager, torch-*): when idle, the engine
takes every waiting request up to what fits, prefills them together at the longest prompt,
decodes until the longest output ends and returns them all together; nobody joins a running
batch (serving/scheduler.py holds the state and the continuous-batching loop)."""

from __future__ import annotations

import numpy as np

from perfmodel.serving.sim_state import Trace


def run_static(sim) -> Trace:
    """Run a scheduler._Sim's requests to completion in static batches."""
    while sim.finished < sim.n:
        sim._tick()
        sim._release()
        if not sim.waiting:
            sim.t = max(sim.t, sim.pending[0][0])
            continue
        batch = [sim.waiting.popleft() for _ in range(min(len(sim.waiting), sim.pol.max_seqs))]
        b = np.asarray(batch, dtype=int)
        pm, om = float(sim.prompt[b].max()), float(sim.out[b].max())
        sim.tr.max_running = max(sim.tr.max_running, b.size)
        pre = sim.cost.step_s(0, 0.0, [pm] * b.size, [0.0] * b.size, b.size)
        sim.tr.segments.append((sim.t, pre, 1, 0, pm * b.size, len(sim.waiting), 0.0))
        sim.t += pre
        sim.tr.first_s[b] = sim.t
        if om > 1:
            sim.budget.spend_decode(int(om) - 1)
            dur = sim.cost.decode_run_s(b.size, pm, int(om) - 1)
            sim.tr.segments.append((sim.t, float(dur.sum()), int(om) - 1, b.size, 0.0,
                                    len(sim.waiting), 0.0))
            sim.tr.itl_values.append(dur)
            sim.tr.itl_weights.append(b.size)
            sim.t += float(dur.sum())
        for i in batch:
            sim._finish(i, sim.t)
    return sim.tr
