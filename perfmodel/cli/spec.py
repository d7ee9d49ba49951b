"""`perfmodel spec`: speculative decoding speed-up, optimal gamma, break-even batch, and the
acceptance a claimed speed-up needs. Formatting only; the numbers come from
perfmodel.analysis.speculative."""

from __future__ import annotations

import argparse

from perfmodel.cli import HELP
from perfmodel.cli.common import (nonneg_int, positive_float, positive_int, print_json,
                                  print_notes, print_table)
from perfmodel.cli.memory import add_target_args
from perfmodel.analysis.drafts import METHODS
from perfmodel.analysis.speculative import speculative_estimate
from perfmodel.core.units import GB, ms


def _number(text: str) -> float:
    """Any float; the model checks the range and says what is wrong."""
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None


def register(sub) -> None:
    p = sub.add_parser("spec", help=HELP["spec"])
    add_target_args(p)
    p.add_argument("--method", required=True, choices=METHODS,
                   help="draft model, EAGLE(-3) head, Medusa heads, n-gram lookup, MTP module")
    p.add_argument("--draft", default=None, help="draft model id (method draft)")
    p.add_argument("--draft-weights", default=None,
                   help="drafter weight precision (default: the target's)")
    p.add_argument("--activations", default=None, help="matmul input precision (default from weights)")
    p.add_argument("--gamma", type=positive_int, default=None,
                   help="draft tokens per step (tree depth); default 4, MTP 1")
    p.add_argument("--tree-tokens", type=positive_int, default=None,
                   help="tokens verified per sequence for a tree (default gamma+1)")
    acc = p.add_mutually_exclusive_group()
    acc.add_argument("--acceptance", type=_number, default=None,
                     help="per-token acceptance alpha in [0, 1)")
    acc.add_argument("--mean-accepted-tokens", type=_number, default=None,
                     help="mean tokens per target step, bonus token included (tau)")
    p.add_argument("--target-speedup", type=positive_float, default=None,
                   help="solve for the acceptance that reaches this speed-up")
    p.add_argument("--batch", type=positive_int, required=True)
    p.add_argument("--context", type=nonneg_int, required=True, help="tokens already in the KV cache")
    p.add_argument("--ep", type=positive_int, default=1, help="expert-parallel degree")
    p.add_argument("--profile", default=None, help="calibrated profile YAML")
    p.set_defaults(func=run)


def run(args) -> int:
    r = speculative_estimate(
        args.model, args.gpu, method=args.method, draft=args.draft, gamma=args.gamma,
        acceptance=args.acceptance, mean_accepted_tokens=args.mean_accepted_tokens,
        batch=args.batch, context=args.context, weights=args.weights, kv=args.kv,
        activations=args.activations, draft_weights=args.draft_weights, engine=args.engine,
        tp=args.tp, pp=args.pp, ep=args.ep, tree_tokens=args.tree_tokens,
        target_speedup=args.target_speedup, profile=args.profile,
        hardware_dir=args.hardware_dir)
    if args.json:
        print_json(r)
        return 0
    print(f"{r.model} on {r.gpu} x{args.tp * args.pp}, {r.engine}, {r.precision}; {r.method} "
          f"({r.drafter}, {r.draft_precision}), batch {r.batch}, context {r.context}")
    print(f"gamma {r.gamma}, {r.verify_tokens} tokens verified, acceptance {r.acceptance:.3f} "
          f"({r.acceptance_source}) -> {r.tokens_per_step:.2f} tokens per target step")
    print_table([
        {"part": "plain decode step", "ms": ms(r.baseline_step_s)},
        {"part": f"verification (T={r.verify_tokens}, {r.verify_bound}-bound)", "ms": ms(r.verify_step_s)},
        {"part": "drafting", "ms": ms(r.draft_step_s)},
        {"part": "per-step overhead (proposer, research bookkeeping)", "ms": ms(r.overhead_s)},
        {"part": "speculative step", "ms": ms(r.spec_step_s)},
        {"part": "TPOT speculative / plain", "ms": f"{ms(r.tpot_s):.4g} / {ms(r.baseline_tpot_s):.4g}"},
    ])
    print(f"dominant term: {r.dominant_term} ({r.dominant_note})")
    print(f"speed-up: {r.speedup:.3f}x   optimal gamma: {r.optimal_gamma} "
          f"({r.optimal_speedup:.3f}x)   break-even batch: {r.breakeven_batch} ({r.breakeven_note})")
    print("speed-up by batch: " + ", ".join(f"{p.batch}:{p.speedup:.2f}{'' if p.fits else '*'}"
                                            for p in r.batch_curve) + "   (* does not fit)")
    print(f"drafter memory: {r.draft_weight_bytes / GB:.2f} GB weights, "
          f"{r.draft_kv_bytes_per_token:.0f} B KV per token; fits: {r.fits}")
    if r.target_speedup is not None:
        need = ("none" if r.required_acceptance is None else
                f"alpha {r.required_acceptance:.3f} (tau {r.required_tokens_per_step:.2f})")
        print(f"for {r.target_speedup:g}x: {need} - {r.required_note}")
    print_notes(r)
    return 0
