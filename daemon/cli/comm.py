"""`hpcpredict comm ...`: communication-time models (seed 004).

  simulate      SimGrid-simulated benchmark/pattern records on a fat tree or dragonfly
  bench-ingest  turn contrib/commbench raw output (JSON lines) into records CSV
  train         fit the class A/B/C GBRTs and the baselines, write MODEL_DIR
  evaluate      MMRE / Pred25 / RCC per model and pattern (table, or --json)
"""
from __future__ import annotations

import json
import sys

PATTERN_CHOICES = ("benchmark", "halo3d", "halo4d", "lulesh1", "lulesh2", "lulesh3")


def register(subparsers) -> None:
    parser = subparsers.add_parser("comm", help="communication-time models: simulate, train, evaluate")
    sub = parser.add_subparsers(dest="comm_command", metavar="SUBCOMMAND")
    parser.set_defaults(handler=lambda args: parser.print_help() or 2)

    sim = sub.add_parser("simulate", help="simulate benchmark/pattern records with SimGrid (simulated data)")
    sim.add_argument("--fabric", required=True, choices=("fattree", "dragonfly"))
    sim.add_argument("--shape", required=True, help="SimGrid topo_parameters, e.g. '3;8,4,4;1,4,2;1,1,1'")
    sim.add_argument("--pattern", required=True, choices=PATTERN_CHOICES)
    sim.add_argument("--points", type=int, required=True)
    sim.add_argument("--seed", type=int, default=0)
    sim.add_argument("--background", type=int, default=0, metavar="K", help="bursty background streams")
    sim.add_argument("--iterations", type=int, default=0, help="iterations per point (default 5 with background, else 1)")
    sim.add_argument("--max-ranks", type=int, default=256)
    sim.add_argument("--repeats", type=int, default=2, help="allocations per configuration")
    sim.add_argument("--peers", default="1-4", metavar="MIN-MAX", help="benchmark PM range (paper: 1-4)")
    sim.add_argument("--out", required=True, metavar="DATA.csv")
    sim.add_argument("--append", action="store_true", help="append to DATA.csv")
    sim.add_argument("--topology-out", metavar="TOPOLOGY.json", help="write the fabric's placement JSON")
    sim.set_defaults(handler=_simulate)

    ing = sub.add_parser("bench-ingest", help="contrib/commbench JSON lines -> records CSV")
    ing.add_argument("raw", nargs="+", metavar="RAW.jsonl")
    ing.add_argument("--out", required=True, metavar="DATA.csv")
    ing.set_defaults(handler=_ingest)

    tr = sub.add_parser("train", help="train class A/B/C GBRT models and baselines")
    tr.add_argument("data", metavar="DATA.csv")
    tr.add_argument("--topology", metavar="TOPOLOGY.json", help="placement JSON (enables class C)")
    tr.add_argument("--out", required=True, metavar="MODEL_DIR")
    tr.add_argument("--tune-iter", type=int, default=4, help="random-search candidates per class (0 = defaults)")
    tr.add_argument("--seed", type=int, default=0)
    tr.set_defaults(handler=_train)

    ev = sub.add_parser("evaluate", help="MMRE, Pred25, RCC per model and pattern")
    ev.add_argument("--model", required=True, metavar="MODEL_DIR")
    ev.add_argument("--data", required=True, metavar="TEST.csv")
    ev.add_argument("--topology", metavar="TOPOLOGY.json")
    ev.add_argument("--plots", metavar="PREFIX", help="write PREFIX-<model>.png scatter plots")
    ev.add_argument("--title", default="", help="plot title (say 'simulated' for SimGrid data)")
    ev.add_argument("--json", action="store_true")
    ev.set_defaults(handler=_evaluate)


def _placement(path):
    if not path:
        return None
    from ...topology.placement import Placement

    return Placement.load(path)


def _simulate(args) -> int:
    from rich.progress import Progress

    from ..lab.comm import fabric_placement, plan_points, simulate
    from ..comm.records import write_records

    from ..errors import InvalidRequest

    try:
        low, _, high = args.peers.partition("-")
        peers = (int(low), int(high or low))
    except ValueError as error:
        raise InvalidRequest("peers", f"expected MIN-MAX, got {args.peers!r}") from error
    points = plan_points(args.fabric, args.shape, args.pattern, args.points, args.seed,
                         max_ranks=args.max_ranks, repeats=args.repeats, peers=peers)
    placement = fabric_placement(args.fabric, args.shape)
    with Progress(transient=True, disable=not sys.stderr.isatty()) as progress:
        task = progress.add_task(f"simulating {args.pattern} (SimGrid)", total=len(points))
        records = simulate(args.fabric, args.shape, points, background=args.background,
                           iterations=args.iterations, seed=args.seed,
                           progress=lambda k: progress.advance(task, k))
    write_records(args.out, records, append=args.append)
    if args.topology_out:
        placement.save(args.topology_out)
    print(f"wrote {len(records)} simulated records to {args.out}")
    return 0


def _ingest(args) -> int:
    from contextlib import ExitStack

    from ..lab.comm import ingest_lines
    from ..comm.records import write_records
    from ..errors import ParseError

    records = []
    with ExitStack() as stack:
        for path in args.raw:
            try:
                stream = stack.enter_context(open(path, encoding="utf-8"))
            except OSError as error:
                raise ParseError(f"cannot read: {error.strerror}", source=path) from error
            records.extend(ingest_lines(stream, source=path))
    write_records(args.out, records)
    print(f"wrote {len(records)} records to {args.out}")
    return 0


def _train(args) -> int:
    from pathlib import Path

    from ..comm.records import read_records
    from ..lab.comm.training import train_model_set

    records = read_records(args.data)
    manifest = train_model_set(records, _placement(args.topology), Path(args.out),
                               tune_iter=args.tune_iter, seed=args.seed)
    classes = ", ".join(f"{c} ({len(v['features'])} features)" for c, v in manifest["classes"].items())
    print(f"trained on {len(records)} records: classes {classes}; baselines {', '.join(manifest['baselines'])}")
    print(f"wrote {args.out}")
    return 0


def _evaluate(args) -> int:
    from pathlib import Path

    from ..lab.comm.evaluation import evaluate, predict_all, scatter_plots
    from ..comm.records import read_records
    from ..comm.served import CommModelSet

    model_set = CommModelSet.load(Path(args.model))
    records = read_records(args.data)
    placement = _placement(args.topology)
    result = evaluate(model_set, records, placement)
    if args.plots:
        predictions, measured, patterns = predict_all(model_set, records, placement)
        scatter_plots(predictions, measured, patterns, args.plots, args.title or "communication time")
    if args.json:
        print(json.dumps(result, indent=1))
        return 0
    print(f"{'model':18} {'pattern':10} {'n':>5} {'MMRE %':>8} {'Pred25 %':>9} {'RCC':>6}")
    for model, per in result.items():
        for pattern, s in per.items():
            print(f"{model:18} {pattern:10} {s['n']:5d} {100 * s['mmre']:8.2f} {100 * s['pred25']:9.2f} {s['rcc']:6.3f}")
    return 0
