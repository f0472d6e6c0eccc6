"""`hpcpredict train` and `hpcpredict publish`: make new model versions the daemon serves.

``train`` fits the walltime model on the store's history and publishes it; models trained by
other commands (``comm train``, runtime/scaling tooling) are published with ``publish``.
Both ask a running daemon to reload unless ``--no-reload``.
"""
from __future__ import annotations

from ..model_kinds import SITE_KEY, model_kind_names


def register(subparsers) -> None:
    parser = subparsers.add_parser("train", help="train the walltime model on stored history and publish it")
    parser.add_argument("--no-reload", action="store_true", help="do not ask a running daemon to reload")
    parser.add_argument("--json", action="store_true")
    parser.set_defaults(handler=_train)
    runtime = subparsers.add_parser(
        "train-runtime", help="train an application's runtime model from its runs (CSV) and publish it",
        description="Fit the runtime model of one application from DATA.csv (one row per run: "
                    "input columns, the runtime column, optional `rep`/`config`) and publish it beside the "
                    "other applications' models. The learner (log-linear, extra-trees, boosted trees or ANN "
                    "ensemble) is chosen by cross-validation on these runs unless --learner names one.")
    runtime.add_argument("data", metavar="DATA.csv")
    runtime.add_argument("--target", required=True, help="the runtime column (seconds)")
    runtime.add_argument("--application", required=True, help="application key jobs are matched on")
    runtime.add_argument("--alias", action="append", default=[], metavar="INPUT=FIELD",
                         help="map a model input to a request field (nodes, ntasks, cpus_per_task)")
    runtime.add_argument("--learner", choices=("auto", "log-linear", "extra-trees", "boosted-trees", "ann"),
                         default="auto", help="auto (default): the simplest learner that no richer one beats "
                                              "by cross-validation on DATA.csv")
    runtime.add_argument("--no-reload", action="store_true")
    runtime.set_defaults(handler=_train_runtime)
    publish = subparsers.add_parser("publish", help="publish a trained model folder as a new version")
    publish.add_argument("kind", choices=model_kind_names())
    publish.add_argument("folder")
    publish.add_argument("--key", default=SITE_KEY, help="application or cluster the model is for")
    publish.add_argument("--no-reload", action="store_true")
    publish.set_defaults(handler=_publish)


def train_and_publish(config):
    """Train the walltime model on every stored job and publish it; returns the Artifact."""
    import tempfile
    from pathlib import Path

    from ..errors import HpcPredictError
    from ..history import save_model, train_model
    from ..registry import ModelRegistry
    from ..store import open_store

    store = open_store(config)
    try:
        records = list(store.iter_jobs())
    finally:
        store.close()
    if not records:
        raise HpcPredictError("the store has no job history: run `hpcpredict ingest TRACE` first")
    model = train_model(records)
    with tempfile.TemporaryDirectory() as tmp:
        save_model(model, Path(tmp))
        registry = ModelRegistry(config.models.dir, owner=config.models.owner)
        return registry.publish("walltime", tmp, metadata={"jobs": len(records)}), len(records)


def _train(args) -> int:
    from .common import config_of, print_json, reload_daemon, socket_of

    from rich.console import Console

    config = config_of(args)
    with Console(stderr=True).status("training the walltime model on the stored history..."):
        artifact, count = train_and_publish(config)
    if args.json:
        print_json({"kind": artifact.kind, "version": artifact.version, "jobs": count, "path": str(artifact.path)})
    else:
        print(f"trained walltime model on {count} jobs: version {artifact.version}")
    return 0 if args.no_reload else reload_daemon(socket_of(args, config), artifact)


def _train_runtime(args) -> int:
    import shutil
    import tempfile
    from pathlib import Path

    from .common import config_of, reload_daemon, socket_of
    from ..errors import HpcPredictError, ModelNotFound
    from ..registry import ModelRegistry
    from ..runtime.training import train_application

    aliases = {}
    for item in args.alias:
        name, sep, field = item.partition("=")
        if not sep or field not in ("nodes", "ntasks", "cpus_per_task"):
            raise HpcPredictError(f"--alias {item!r}: expected INPUT=nodes|ntasks|cpus_per_task")
        aliases[name] = field
    config = config_of(args)
    registry = ModelRegistry(config.models.dir, owner=config.models.owner)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "runtime"
        try:  # every application's model lives in one artifact: start from the served one
            shutil.copytree(registry.current("runtime").model_path, folder)
        except ModelNotFound:
            folder.mkdir()
        shutil.rmtree(folder / args.application, ignore_errors=True)
        from rich.console import Console

        with Console(stderr=True).status(f"training the runtime model of {args.application}..."):
            learners = None if args.learner == "auto" else {args.learner: {}}
            variants = train_application(Path(args.data), target=args.target, application=args.application,
                                         directory=folder, input_aliases=aliases or None, learners=learners)
        artifact = registry.publish("runtime", folder, metadata={"trained": args.application})
    print(f"trained runtime model of {args.application}: version {artifact.version}")
    for name, meta in variants.items():
        scores = ", ".join(f"{learner} {'n/a' if v is None else f'{100 * v:.1f} %'}"
                           for learner, v in meta["cv_mape_by_learner"].items())
        print(f"  {name}: {meta['learner']} (cross-validated MAPE: {scores})")
        print(f"    {meta['selection']['reason']}")
    return 0 if args.no_reload else reload_daemon(socket_of(args, config), artifact)


def _publish(args) -> int:
    from .common import config_of, reload_daemon, socket_of
    from ..registry import ModelRegistry

    config = config_of(args)
    artifact = ModelRegistry(config.models.dir, owner=config.models.owner).publish(args.kind, args.folder, key=args.key)
    print(f"published {artifact.kind} model {artifact.key} version {artifact.version}")
    return 0 if args.no_reload else reload_daemon(socket_of(args, config), artifact)
