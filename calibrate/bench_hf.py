"""Hugging Face generate() on a randomly initialised LlamaForCausalLM, for calibrate/bench.py
(section hf; its records join e2e). torch + the standard library, and transformers when it is
importable (the section is skipped otherwise). The record fields are documented in bench.py.
"""
from __future__ import annotations

import gc
import statistics
import time

import torch

from bench_e2e import FULL_PLAN, QUICK_PLAN, e2e_record
from bench_hostbound import ClockSampler
from bench_model import BF16, LLAMA_8B, TINY


def build_hf(shape, device):
    from transformers import LlamaConfig, LlamaForCausalLM
    cfg = LlamaConfig(vocab_size=shape["vocab_size"], hidden_size=shape["d_model"],
                      intermediate_size=shape["ffn_dim"], num_hidden_layers=shape["num_layers"],
                      num_attention_heads=shape["num_heads"],
                      num_key_value_heads=shape["num_kv_heads"], head_dim=shape["head_dim"],
                      max_position_embeddings=8192, rope_theta=shape["rope_theta"],
                      tie_word_embeddings=False)
    with torch.device(device):
        try:
            model = LlamaForCausalLM._from_config(cfg, dtype=BF16)
        except TypeError:  # transformers < 4.56 names it torch_dtype
            model = LlamaForCausalLM._from_config(cfg, torch_dtype=BF16)
    return model.to(device=device, dtype=BF16).eval()


def hf_generator(ctx, model, batch, prompt):
    """gen(n): seconds of one generate() of n new tokens (greedy, fixed length), synced."""
    ids = torch.randint(0, model.config.vocab_size, (batch, prompt), device=ctx.device)
    mask = torch.ones_like(ids)

    def gen(n):
        ctx.timer.sync()
        t0 = time.perf_counter()
        model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=n, min_new_tokens=n,
                       do_sample=False, pad_token_id=0)
        ctx.timer.sync()
        return time.perf_counter() - t0
    return gen


def hf_rounds(gens: dict, new: int, rounds: int) -> dict:
    """Interleaved rounds over the configs (as bench_hostbound.measure_rounds): each round
    warms a config up with one generate(4) (discarded), then times generate(1) twice (median)
    and generate(new) once. Per round: prefill = t(1), decode = (t(new) - t(1)) / (new - 1).
    Returns {config: {"prefill": [per round], "decode": [...], "windows": [...]}}."""
    out = {k: {"prefill": [], "decode": [], "windows": []} for k in gens}
    for _ in range(rounds):
        for key, gen in gens.items():
            gen(4)
            gc.collect()
            gc.disable()  # as in bench.Timer
            try:
                t0 = time.time()
                t_one = statistics.median(gen(1) for _ in range(2))
                t_new = gen(new)
                out[key]["windows"].append((t0, time.time()))
            finally:
                gc.enable()
            out[key]["prefill"].append(t_one)
            out[key]["decode"].append((t_new - t_one) / (new - 1))
    return out


def summary(rs: list[float], windows, clocks) -> dict:
    got = [clocks.window(a, b) for a, b in windows] if clocks is not None else []
    sms = [g[0] for g in got if g[0] is not None]
    mems = [g[1] for g in got if g[1] is not None]
    return {"seconds": statistics.median(rs), "reps": len(rs), "rounds_s": rs,
            "spread": max(rs) / min(rs) - 1.0,
            "sm_clock_mhz": statistics.median(sms) if sms else None,
            "mem_clock_mhz": statistics.median(mems) if mems else None}


def hf_kernels_per_token(ctx, model, prompt, new) -> int | None:
    """CUDA kernel (+ memcpy, memset) events of generate(new) minus generate(1), per extra
    token: what one decode step of generate() launches. torch.profiler (CUPTI) is started
    only here, after every timed run of the bench (it may slow later launches)."""
    if not ctx.cuda:
        return None
    try:
        from torch.autograd import DeviceType
        from torch.profiler import ProfilerActivity, profile
        ids = torch.randint(0, model.config.vocab_size, (1, prompt), device=ctx.device)

        def count(n):
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                model.generate(input_ids=ids, attention_mask=torch.ones_like(ids),
                               max_new_tokens=n, min_new_tokens=n, do_sample=False, pad_token_id=0)
                ctx.timer.sync()
            return sum(1 for e in prof.events() if e.device_type == DeviceType.CUDA)
        with torch.inference_mode():
            count(2)
            return round((count(new) - count(1)) / (new - 1))
    except Exception as exc:  # optional; never fail the run for it
        ctx.log(f"[hf_generate] kernel count unavailable: {type(exc).__name__}: {exc}"[:200])
        return None


def hf_details(model) -> dict:
    import transformers
    cfg = model.config
    return {"engine": "hf-eager", "scope": "whole model", "compiled": False, "cuda_graphs": False,
            "transformers_version": transformers.__version__,
            "attn_implementation": getattr(cfg, "_attn_implementation", None),
            "cache": "generate() default (DynamicCache)", "decoding": "greedy, fixed length",
            "attention": f"transformers attn_implementation={getattr(cfg, '_attn_implementation', None)!r}",
            "what": "LlamaForCausalLM(config).generate(): eager PyTorch, the library's defaults"}


def run_hf(ctx) -> dict:
    shape = TINY if ctx.quick else LLAMA_8B
    plan = QUICK_PLAN if ctx.quick else FULL_PLAN
    records, skipped = [], []
    try:
        import transformers
        transformers.logging.set_verbosity_error()
        model = build_hf(shape, ctx.device)
    except Exception as exc:
        reason = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
        skipped.append({"what": "hf_generate", "reason": reason})
        ctx.log(f"[hf_generate] skipped: {reason}")
        return {"model": shape, "records": records, "skipped": skipped}
    new = plan["hf_new"]
    gens = {(B, P): hf_generator(ctx, model, B, P) for B, P in plan["hf_configs"]}
    clocks = ClockSampler(ctx.cuda)
    try:
        with torch.inference_mode():
            res = hf_rounds(gens, new, ctx.args.rounds)
    except Exception as exc:
        res = {}
        skipped.append({"what": "hf_generate", "reason": f"{type(exc).__name__}: {exc}"[:300]})
    for (B, prompt), r in res.items():
        dec_m = summary(r["decode"], r["windows"], clocks)
        pre_m = summary(r["prefill"], r["windows"], clocks)
        dec = e2e_record(shape, "hf_generate", "bf16", "decode", B, prompt, None, 1, dec_m)
        dec["generated_tokens"] = new
        pre = e2e_record(shape, "hf_generate", "bf16", "prefill", B, 0, prompt, prompt, pre_m)
        pre["generated_tokens"] = 1
        for rec, m in ((dec, dec_m), (pre, pre_m)):
            rec.update({k: m[k] for k in ("rounds_s", "spread", "sm_clock_mhz", "mem_clock_mhz")})
        records += [dec, pre]
        ctx.log(f"[hf_generate B={B} prompt={prompt}] {dec_m['seconds'] * 1e3:.2f} ms/token "
                f"(spread {dec_m['spread']:.0%}), generate(1) {pre_m['seconds'] * 1e3:.1f} ms "
                f"(spread {pre_m['spread']:.0%}); SM {dec_m['sm_clock_mhz']} MHz")
    clocks.stop()
    prompt = plan["hf_configs"][1][1]   # kernels per token: B=1, the second config's prompt
    details = hf_details(model)
    details["kernels_per_token"] = hf_kernels_per_token(ctx, model, prompt, min(new, 8))
    for r in records:
        if r["phase"] == "decode":
            r["kernels"] = details["kernels_per_token"]
    ctx.log(f"[hf_generate] {details['kernels_per_token']} kernels per generated token")
    del model
    ctx.free_memory()
    return {"model": shape, "modes": {"hf_generate": details}, "records": records, "skipped": skipped}

