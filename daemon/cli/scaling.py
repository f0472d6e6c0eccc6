"""`hpcpredict scaling ...`: fit PMNF scaling models, node-count advice, APMT, pretraining.

    hpcpredict scaling fit DATA.jsonl [--modeler NAME] [--predict-at POINTS.csv] --json
    hpcpredict scaling modelers                    # the registered modelers (NAME and what it does)
    hpcpredict scaling fit DATA.jsonl --save-model DIR --application NAME   # for node advice
    hpcpredict scaling advise MODEL.json --nodes 8 --ntasks-per-node 32 --time 3600
    hpcpredict scaling apmt RUNS.json [--predict-at 64 128] [--json]
    hpcpredict scaling pretrain [--output PATH]    # regenerates the adaptive modeler's weights
"""
from __future__ import annotations

import json
from pathlib import Path


def register(subparsers) -> None:
    parser = subparsers.add_parser("scaling", help="scaling models (Extra-P PMNF), node-count advice, APMT")
    commands = parser.add_subparsers(dest="scaling_command", metavar="SUBCOMMAND")
    parser.set_defaults(handler=lambda args: parser.print_help() or 2)

    fit = commands.add_parser("fit", help="fit PMNF models to Extra-P JSON Lines measurements")
    fit.add_argument("data", type=Path, help="Extra-P JSON Lines file")
    fit.add_argument("--modeler", default="regression", metavar="NAME",
                     help="a registered modeler (default: regression; `hpcpredict scaling modelers` lists them)")
    fit.add_argument("--adapt-samples", type=int, default=300, metavar="N",
                     help="adaptive modeler: synthetic samples per class for domain adaptation")
    fit.add_argument("--predict-at", type=Path, default=None, metavar="POINTS.csv",
                     help="CSV with a header naming the parameters; one point per row")
    fit.add_argument("--negative-exponents", choices=("auto", "yes", "no"), default="auto",
                     help="allow x^-k terms (strong scaling); auto: when the data shrink with x")
    fit.add_argument("--save-model", type=Path, default=None, metavar="DIR",
                     help="also write a scaling model JSON for node advice into DIR")
    fit.add_argument("--application", default=None, help="application name for --save-model")
    fit.add_argument("--callpath", default=None, help="callpath for --save-model (default: the only/first one)")
    fit.add_argument("--metric", default="time", help="metric for --save-model (runtime in seconds)")
    fit.add_argument("--scaling-parameter", default="p", help="'p' (processes) or 'nodes'")
    fit.add_argument("--json", action="store_true", help="one JSON object")
    fit.set_defaults(handler=_fit)

    modelers = commands.add_parser("modelers", help="list the registered scaling modelers")
    modelers.set_defaults(handler=_modelers)

    advise = commands.add_parser("advise", help="node-count advice from a saved scaling model")
    advise.add_argument("model", type=Path, help="scaling model JSON (from fit --save-model)")
    advise.add_argument("--nodes", type=int, required=True, help="requested node count")
    advise.add_argument("--ntasks-per-node", type=int, default=1)
    advise.add_argument("--time", type=float, default=0.0, help="requested time limit in seconds")
    advise.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                        help="value of another model parameter (repeatable)")
    advise.add_argument("--policy", choices=("least-node-hours", "meets-request"), default="least-node-hours")
    advise.add_argument("--tolerance", type=float, default=0.10)
    advise.add_argument("--candidates", type=int, nargs="+", default=None)
    advise.add_argument("--json", action="store_true")
    advise.set_defaults(handler=_advise)

    apmt = commands.add_parser("apmt", help="APMT decomposition from perf-stat and MPI profiles of a few runs")
    apmt.add_argument("runs", type=Path, help="JSON manifest listing runs (see hpcpredict.daemon.lab.scaling.apmt)")
    apmt.add_argument("--predict-at", type=int, nargs="*", default=[], metavar="P")
    apmt.add_argument("--json", action="store_true")
    apmt.set_defaults(handler=_apmt)

    pretrain = commands.add_parser("pretrain", help="regenerate the adaptive modeler's pretrained weights")
    pretrain.add_argument("--output", type=Path, default=None, help="default: the shipped artifact path")
    pretrain.add_argument("--samples-per-class", type=int, default=1000)
    pretrain.add_argument("--epochs", type=int, default=30)
    pretrain.add_argument("--seed", type=int, default=0)
    pretrain.set_defaults(handler=_pretrain)


def _fit(args) -> int:
    from ..errors import InvalidRequest
    from ..scaling.advice import save_scaling_model
    from ..lab.scaling import describe, fit_all, get_modeler, read_jsonlines, read_points_csv, scaling_model

    cls = get_modeler(args.modeler)   # an unknown name: the error lists the registered ones
    if args.adapt_samples < 1:
        raise InvalidRequest("--adapt-samples", "must be >= 1")
    options = {"negative": {"auto": "auto", "yes": True, "no": False}[args.negative_exponents],
               "samples_per_class": args.adapt_samples, "source": str(args.data)}
    modeler = cls(**{key: value for key, value in options.items() if key in cls.OPTIONS})
    sets = read_jsonlines(args.data)
    fits = fit_all(sets, modeler=modeler, source=str(args.data))
    parameters = next(iter(sets.values())).parameters
    points = read_points_csv(args.predict_at, parameters) if args.predict_at else []
    results = [describe(fits[key], sets[key], points) for key in sets]
    saved = None
    if args.save_model:
        if not args.application:
            raise InvalidRequest("--application", "needed with --save-model")
        keys = [k for k in sets if k[1] == args.metric and (args.callpath is None or k[0] == args.callpath)]
        if not keys:
            raise InvalidRequest("--callpath", f"no measurements for callpath {args.callpath!r}, metric {args.metric!r}")
        model = scaling_model(fits[keys[0]], sets[keys[0]], application=args.application,
                              scaling_parameter=args.scaling_parameter)
        saved = str(save_scaling_model(model, args.save_model))
    if args.json:
        print(json.dumps({"data": str(args.data), "models": results, "saved_model": saved}))
        return 0
    for result in results:
        print(f"{result['callpath']} / {result['metric']}: {result['model']}")
        print(f"  modeler {result['modeler']}, noise (rrd) {result['noise']:.1%}, fitted on the "
              f"{result.get('location', 'median')} of repetitions, CV SMAPE {result['cv_smape']:.2f} %")
        for prediction in result["predictions"]:
            where = ", ".join(f"{k}={v:g}" for k, v in prediction["params"].items())
            print(f"  at {where}: {prediction['value']:.6g}")
    if saved:
        print(f"saved {saved}")
    return 0


def _modelers(args) -> int:
    from ..lab.scaling import describe_modelers

    for name, text in describe_modelers():
        print(f"{name:<12} {text}")
    return 0


def _advise(args) -> int:
    from ..errors import InvalidRequest, ModelArtifactError
    from ..scaling.advice import ScalingModel, format_advice_table, node_advice

    try:
        model = ScalingModel.from_dict(json.loads(args.model.read_text(encoding="utf-8")))
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise ModelArtifactError(f"{args.model}: bad scaling model: {error}") from error
    others = {}
    for item in args.param:
        name, sep, value = item.partition("=")
        try:
            others[name.strip()] = float(value)
        except ValueError:
            sep = ""
        if not sep:
            raise InvalidRequest("--param", f"expected NAME=VALUE, got {item!r}")
    rows = node_advice(model, requested_nodes=args.nodes, ntasks_per_node=args.ntasks_per_node,
                       other_params=others, requested_time_s=args.time, candidates=args.candidates,
                       policy=args.policy, tolerance=args.tolerance)
    if args.json:
        print(json.dumps({"application": model.application, "model": model.expression, "policy": args.policy,
                          "rows": [row.__dict__ for row in rows]}))
    else:
        print(f"{model.application}: {model.expression}")
        print("\n".join(format_advice_table(rows)))
    return 0


def _apmt(args) -> int:
    from ..lab.scaling import decompose, load_runs

    runs = load_runs(args.runs)
    result = decompose(runs)
    table = result.to_dict(args.predict_at)
    if args.json:
        print(json.dumps(table))
        return 0
    print(f"APMT from {len(runs)} runs at P = {', '.join(str(r.processes) for r in runs)}")
    for name, fit in table["fits"].items():
        print(f"  {name:<28} {fit['function']:<10} R2={fit['r2']:.3f}")
    for row in table["predictions"]:
        print(f"  P={row['processes']:<6} comp {row['comp_s']:.3g}s  mem {row['mem_s']:.3g}s  "
              f"comm {row['comm_s']:.3g}s  total {row['total_s']:.3g}s")
    return 0


def _pretrain(args) -> int:
    import time

    from ..lab.scaling import PRETRAINED_PATH, pretrain

    output = args.output or PRETRAINED_PATH
    started = time.monotonic()
    weights, meta = pretrain(samples_per_class=args.samples_per_class, epochs=args.epochs, seed=args.seed)
    meta["seconds"] = round(time.monotonic() - started, 1)
    weights.save(output, meta)
    print(f"wrote {output} ({output.stat().st_size} bytes, train accuracy {meta['train_accuracy']:.3f})")
    return 0
