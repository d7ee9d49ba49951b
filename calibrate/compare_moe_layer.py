#!/usr/bin/env python3
"""Side by side: calibrate/bench_moe_layer.py's measured decoder layer (one GPU's share, H200)
and this model's op list for the same layer (vLLM preset, fp8, prompt step of T tokens, S = 0).

    python calibrate/compare_moe_layer.py calibrate/data/moe-layer-h200-sxm-20261202b.json

Per (model, tp, T), microseconds per layer:
  routed experts: measured gate_up + down (the Triton fused kernel and, inside the bench, a
      plain-torch 1x128 activation quant: an upper bound on the engines' one quant kernel)
      against the model's experts op;
  router: measured fp32/bf16 gate GEMM (+ upcast) against the model's router (+ router_upcast) ops;
  attention: SDPA flash against the model's attention op;
  layer GPU: the measured ops' sum (plain-torch small ops: norms, rope, quant, top-k, align,
      combine are unfused, so this is an upper bound) against the model's layer without the
      TP all-reduces (the bench runs one GPU);
  kernels: the layer's CUDA kernels in the bench (torch.profiler) and the model's kernels per
      layer for the vLLM preset (engine count, MoE ops scaled at the dense fusion rate);
      "ratio" is MoE layer / the dense Llama-3.1-70B layer of the same run, measured and model.
"""
from __future__ import annotations

import json
import sys

from perfmodel import api
from perfmodel.core import predict
from perfmodel.core.host_cost import _kernel_scale

DENSE = "llama-3.1-70b"


def model_layer(model: str, tp: int, T: int) -> dict:
    sc, _, _ = api.resolve(api.make_query(model=model, gpu="h200-sxm", weights="fp8", kv="fp8",
                                          engine="vllm", tp=tp))
    est = predict.step(sc, 1, T, 0, prefill=True)
    L = sc.model.num_layers
    per = {o.name: float(o.time_s) / L for o in est.ops if o.name not in
           ("embedding", "lm_head", "final_norm", "sampling") and "allreduce" not in o.name}
    kscale = _kernel_scale(sc.model, sc.engine, sc.attention or sc.engine.attention)
    return {"ops": per, "layer_s": sum(per.values()), "kernels": sc.engine.kernels_per_layer
            if sc.model.moe is None else kscale * _op_kernels(sc) / L}


def _op_kernels(sc) -> float:
    from perfmodel.core.ops import ops
    return sum(float(o.cost.kernels) for o in ops(sc.model, sc.precision, 1.0, 1.0, 0.0)
               if o.per_layer)


def main(path: str) -> int:
    recs = json.load(open(path))["records"]
    dense_k = {r["T"]: r["kernels"]["total"] for r in recs if r["model"] == DENSE and r["kernels"]}
    dense_model_k = model_layer(DENSE, 8, 1024)["kernels"]
    print(f"{'model':16s} {'tp':>2s} {'T':>5s} | experts meas/model | router meas/model | "
          f"attention meas/model | layer GPU meas/model | kernels meas (ratio) / model (ratio)")
    for r in recs:
        m = model_layer(r["model"], r["tp"], r["T"])
        o, mo = r["ops_s"], m["ops"]
        exp = (o.get("gate_up", 0) + o.get("down", 0), mo.get("experts", mo.get("mlp_up", 0)
                                                                + mo.get("mlp_down", 0)))
        rt = (o.get("router", 0.0), mo.get("router", 0.0) + mo.get("router_upcast", 0.0))
        k = r["kernels"]["total"] if r["kernels"] else float("nan")
        kr = k / dense_k.get(r["T"], float("nan"))
        print(f"{r['model']:16s} {r['tp']:2d} {r['T']:5d} | {1e6 * exp[0]:6.0f} / {1e6 * exp[1]:6.0f} "
              f"| {1e6 * rt[0]:5.0f} / {1e6 * rt[1]:5.0f} | {1e6 * o['attention']:5.0f} / "
              f"{1e6 * mo['attention']:5.0f} | {1e6 * r['ops_sum_s']:6.0f} / {1e6 * m['layer_s']:6.0f} "
              f"| {k:4.0f} ({kr:.2f}) / {m['kernels']:5.1f} ({m['kernels'] / dense_model_k:.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else
                  "calibrate/data/moe-layer-h200-sxm-20261202b.json"))
