"""`perfmodel claim` and `perfmodel attribute`: check a claimed speed-up, attribute a ratio
between two scenario files to levers, or run a seed document's preset. Formatting only:
every number comes from perfmodel.analysis.claims."""

from __future__ import annotations

from perfmodel.cli import HELP
from perfmodel.analysis.claims.attribute import attribute, check_pair
from perfmodel.analysis.claims.explain import MAX_LEVERS, MAX_SEARCH_LEVERS, explain, parse_claim
from perfmodel.analysis.claims.inverse import ASSUMPTIONS, solve
from perfmodel.analysis.claims.presets import list_presets, run_preset
from perfmodel.analysis.claims.scenario import METRICS, fill, load_scenario
from perfmodel.cli.common import positive_int, print_json, print_table, str_list
from perfmodel.core.errors import PerfModelError

DEFAULT_METRIC = "decode_tok_s_per_user"


def register(sub) -> None:
    p = sub.add_parser("claim", help=HELP["claim"])
    p.add_argument("--preset", default=None, help="built-in preset id (see --list-presets)")
    p.add_argument("--list-presets", action="store_true", help="list the presets and exit")
    p.add_argument("--no-search", action="store_true",
                   help="preset: skip the lever-combination search")
    p.add_argument("--claim", default=None, help="claimed factor: 14x, 2.5, 50%%")
    p.add_argument("--metric", choices=list(METRICS), default=None,
                   help=f"metric of the claim (default {DEFAULT_METRIC})")
    p.add_argument("--from", dest="baseline", default=None, help="baseline scenario YAML/JSON")
    p.add_argument("--to", dest="improved", default=None,
                   help="improved scenario: check the claim for this pair")
    p.add_argument("--solve", choices=list(ASSUMPTIONS), default=None,
                   help="only solve this free assumption for the claim")
    p.add_argument("--side", choices=["improved", "baseline"], default="improved",
                   help="where the solved assumption applies")
    p.add_argument("--max-levers", type=positive_int, default=MAX_LEVERS,
                   help=f"largest lever combination searched (1..{MAX_SEARCH_LEVERS})")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=run_claim)

    a = sub.add_parser("attribute", help=HELP["attribute"])
    a.add_argument("--from", dest="baseline", required=True, help="baseline scenario YAML/JSON")
    a.add_argument("--to", dest="improved", required=True, help="improved scenario YAML/JSON")
    a.add_argument("--metric", choices=list(METRICS), default=None,
                   help=f"metric (default: the scenarios' stated metric, else {DEFAULT_METRIC})")
    a.add_argument("--order", type=str_list, default=None,
                   help="comma-separated lever order for the ordered factors")
    a.add_argument("--json", action="store_true", help="print one JSON object")
    a.set_defaults(func=run_attribute)


def _metric(args, *scenarios) -> tuple[str, list[str]]:
    if args.metric is not None:
        return args.metric, []
    stated = [s.metric for s in scenarios if s.metric is not None]
    if stated:
        return stated[0], []
    return DEFAULT_METRIC, [f"metric = {DEFAULT_METRIC} (default: no --metric given and the "
                            "scenarios state none)"]


def run_claim(args) -> int:
    if args.list_presets:
        rows = [{"preset": k, "title": t} for k, t in list_presets()]
        print_json({"presets": rows}) if args.json else print_table(rows)
        return 0
    if args.preset is not None:
        if args.claim or args.baseline or args.improved:
            raise PerfModelError("--preset runs on its own; leave out --claim, --from and --to")
        rep = run_preset(args.preset, search=not args.no_search)
        return _print_preset(rep, args.json)
    if args.claim is None or args.baseline is None:
        raise PerfModelError("give --preset ID, or --claim and --from (and optionally --to)")
    claim = parse_claim(args.claim)
    base = load_scenario(args.baseline)
    imp = load_scenario(args.improved) if args.improved else None
    metric, notes = _metric(args, *(s for s in (base, imp) if s is not None))
    if args.solve is not None:
        res = solve(claim, metric, base, imp, assumption=args.solve, side=args.side)
        notes = notes + fill(base)[1] + (fill(imp)[1] if imp is not None else [])
        if args.json:
            print_json({"metric": metric, "claim": claim, "inverse": res, "assumptions": notes})
        else:
            print(res.statement)
            _notes(notes, [])
        return 0
    if imp is not None:
        att = check_pair(claim, metric, base, imp)
        return _print_attribution(att.model_copy(update={"assumptions": notes + att.assumptions}),
                                  args.json)
    ex = explain(claim, metric, base, max_levers=args.max_levers)
    ex = ex.model_copy(update={"assumptions": notes + ex.assumptions})
    if args.json:
        print_json(ex)
        return 0
    print(f"claim {ex.claim:.3g}x on {ex.direction}")
    print(f"baseline {ex.baseline}: {ex.baseline_value:.4g} {ex.unit}; claimed "
          f"{ex.claimed_value:.4g} {ex.unit}")
    print(f"verdict: {ex.verdict}: {ex.reason}")
    print(ex.physics.statement)
    for line in ex.lever_notes:
        print(f"lever note: {line}")
    _print_combinations(ex.combinations)
    _print_steps(ex.factors, ex.shapley)
    for i in ex.inverse:
        print(f"inverse ({i.assumption}, {i.side}): {i.statement}")
    _notes(ex.assumptions, ex.warnings)
    return 0


def run_attribute(args) -> int:
    base, imp = load_scenario(args.baseline), load_scenario(args.improved)
    metric, notes = _metric(args, base, imp)
    att = attribute(base, imp, metric, order=args.order)
    return _print_attribution(att.model_copy(update={"assumptions": notes + att.assumptions}),
                              args.json)


def _print_attribution(att, as_json: bool) -> int:
    if as_json:
        print_json(att)
        return 0
    print(f"{att.baseline} -> {att.improved}: {att.total:.4g}x on {att.direction}")
    print(f"  {att.baseline_value:.4g} -> {att.improved_value:.4g} {att.unit}")
    _print_steps(att.factors, att.shapley)
    for c in att.caveats:
        print(f"caveat: {c}")
    print(f"verdict: {att.verdict}")
    for i in att.inverse:
        print(f"inverse ({i.assumption}): {i.statement}")
    _notes(att.assumptions, att.warnings)
    return 0


def _print_combinations(combos) -> None:
    """System optimizations and model changes (another model answers) in one table, told
    apart by the 'kind' column."""
    print_table([{"factor": c.factor, "stretch": c.stretch, "verdict": c.verdict,
                  "kind": ("changes the model: " + ", ".join(c.changes_output)
                           if c.changes_output else "system"),
                  "moves": " + ".join(c.moves)} for c in combos])


def _print_steps(factors, shapley) -> None:
    if not factors:
        print("no levers differ")
        return
    print_table([{"lever": s.lever + (" (changes the model)" if s.changes_output else ""),
                  "factor": s.factor, "shapley": shapley.get(s.lever, 1.0),
                  "regime before": s.regime_before, "regime after": s.regime_after,
                  "change": s.change} for s in factors])


def _print_preset(rep, as_json: bool) -> int:
    if as_json:
        print_json(rep)
        return 0
    print(f"{rep.title}  (seed {rep.seed})")
    bound = {"at_least": ">=", "at_most": "<="}
    print_table([{"step": r.step, "quantity": r.quantity, "unit": r.unit,
                  "source": bound.get(r.kind, "") + _num(r.source), "model": _num(r.model),
                  "verdict": r.verdict} for r in rep.source_vs_model])
    print()
    for r in rep.source_vs_model:
        print(f"- {r.step}, {r.quantity}: {r.why}")
    if rep.source_checks:
        print("\nthe source against its own figures:")
        print_table([{"step": c.step, "quantity": c.quantity, "unit": c.unit,
                      "stated": _num(c.stated), "its figures give": _num(c.implied),
                      "check": "consistent" if c.consistent else "contradicts itself"}
                     for c in rep.source_checks])
        for c in rep.source_checks:
            print(f"- {c.step}, {c.quantity}: {c.why}")
    print()
    print(f"headline: {rep.total:.3g}x on {rep.metric}")
    _print_steps(rep.factors, rep.shapley)
    print(f"verdict: {rep.verdict}")
    if rep.combinations:
        _print_combinations(rep.combinations[:8])
    for ex in rep.explanations:
        best = ex.combinations[0] if ex.combinations else None
        how = (f"e.g. {' + '.join(best.moves)} ({best.factor:.3g}x)" if best else ex.reason)
        print(f"{ex.claim:.3g}x on {ex.metric}: {ex.verdict}; {how}")
    print(rep.summary)
    _notes(rep.assumptions, rep.warnings)
    return 0


def _num(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, list):
        return "-".join(f"{x:.3g}" for x in v)
    return f"{v:.4g}"


def _notes(assumptions, warnings) -> None:
    for a in assumptions:
        print(f"assumed: {a}")
    for w in warnings:
        print(f"warning: {w}")
