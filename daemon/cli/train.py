"""`hpcpredict train` and `hpcpredict publish`: make new model versions the daemon serves.

``train`` fits the walltime model on the store's history and publishes it; models trained by
other commands (``comm train``, runtime/scaling tooling) are published with ``publish``.
Both ask a running daemon to reload unless ``--no-reload``.
"""
from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from rich.console import Console

from .common import changing_models, config_of, print_json, reload_daemon, run_as_data_owner, socket_of
from ..errors import HpcPredictError, ModelNotFound
from ..model_kinds import SITE_KEY, model_kind_names
from ..registry import ModelRegistry
from ..runtime.derived import DerivedInputs
from ..store import open_store


def register(subparsers) -> None:
    parser = subparsers.add_parser("train", help="train the walltime model on stored history and publish it")
    parser.add_argument("-M", "--cluster", default=None,
                        help="train on this cluster's jobs only and publish the model for it (default: one "
                             "model shared by every cluster)")
    parser.add_argument("--no-reload", action="store_true", help="do not ask a running daemon to reload")
    parser.add_argument("--force", action="store_true",
                        help="publish even when the new model is worse than the serving one on the jobs that "
                             "ended since that one was trained (a deliberate change)")
    parser.add_argument("--json", action="store_true")
    parser.set_defaults(handler=_train)
    runtime = subparsers.add_parser(
        "train-runtime", help="train an application's runtime model from its runs (CSV) and publish it",
        description="Fit the runtime model of one application from DATA.csv (one row per run: "
                    "input columns, the runtime column, optional `rep`/`config`) and publish it beside the "
                    "other applications' models; --from-store takes the runs from the store instead (the "
                    "application's COMPLETED jobs with the runtime features they reported). The learner "
                    "(log-linear, start-up + steps, Gaussian process, extra-trees, boosted trees, ANN ensemble or a "
                    "blend) is "
                    "chosen by cross-validation on these runs unless --learner names one.")
    runtime.add_argument("data", metavar="DATA.csv", nargs="?",
                         help="the runs; omit with --from-store")
    runtime.add_argument("--from-store", action="store_true",
                         help="train on the application's COMPLETED jobs in the store instead of DATA.csv: their "
                              "inputs and the runtime features they reported (target runtime_s)")
    runtime.add_argument("-M", "--cluster", default=None, help="with --from-store: this cluster's jobs only")
    runtime.add_argument("--target", help="the runtime column (seconds); runtime_s with --from-store")
    runtime.add_argument("--application", required=True, help="application key jobs are matched on")
    runtime.add_argument("--alias", action="append", default=[], metavar="INPUT=FIELD",
                         help="map a model input to a request field (nodes, ntasks, cpus_per_task)")
    runtime.add_argument("--derive", action="append", default=[], metavar="NAME=EXPRESSION",
                         help="an input computed from the others, stored with the model and computed for every "
                              "job, e.g. 'grid=box**3*cutoff**1.5' (repeatable; + - * / **, sqrt log exp abs "
                              "min max floor ceil round_up)")
    runtime.add_argument("--learner", metavar="NAME",   # checked when run: the learners load scipy
                         default="auto", help="a servable learner, or auto (default): by cross-validation on DATA.csv, the blend unless "
                                              "a single learner (the simplest that no richer one beats "
                                              "clearly) beats it clearly")
    runtime.add_argument("--pool", choices=("agreeing", "all"), default="agreeing",
                         help="with --from-store: pool the runs of the users whose runs agree (default; a user "
                              "whose runs disagree gets a model of her own runs, served for her jobs only), or "
                              "of every user (the admin vouches for every user's runs of this application)")
    runtime.add_argument("--force", action="store_true",
                         help="publish even when the new model's cross-validated error is worse than the "
                              "serving one's (a deliberate change)")
    runtime.add_argument("--no-reload", action="store_true")
    runtime.set_defaults(handler=_train_runtime)
    publish = subparsers.add_parser("publish", help="publish a trained model folder as a new version")
    publish.add_argument("kind", choices=model_kind_names())
    publish.add_argument("folder")
    publish.add_argument("--key", default=SITE_KEY, help="application or cluster the model is for")
    publish.add_argument("--no-reload", action="store_true")
    publish.set_defaults(handler=_publish)
    rollback = subparsers.add_parser(
        "rollback", help="serve an earlier published model version again (admin)",
        description="Make the daemon serve an earlier published version of a model: VERSION, or the one "
                    "published before the serving one. `hpcpredict status --json` and the models directory "
                    "list the versions kept ([models] keep_versions).")
    rollback.add_argument("kind", choices=model_kind_names())
    rollback.add_argument("version", nargs="?", help="default: the version published before the serving one")
    rollback.add_argument("--key", default=SITE_KEY, help="application or cluster the model is for")
    rollback.add_argument("--no-reload", action="store_true")
    rollback.set_defaults(handler=_rollback)


def _train(args) -> int:
    from ..lab.refresh import train_and_publish   # the lab, on the command that runs it (cli/main.py)

    config = config_of(args)
    run_as_data_owner(config)
    with Console(stderr=True).status("training the walltime model on the stored history..."):
        artifact, count = train_and_publish(config, args.cluster, force=args.force)
    if args.json:
        print_json({"kind": artifact.kind, "version": artifact.version, "jobs": count, "path": str(artifact.path)})
    else:
        print(f"trained walltime model on {count} jobs: version {artifact.version}")
    return 0 if args.no_reload else reload_daemon(socket_of(args, config), artifact)


def _train_runtime(args) -> int:
    from ..lab.runtime import train_application, worse_than_serving   # (cli/main.py: the lab where it runs)
    from ..runtime.artifacts import SERVABLE

    if args.learner not in ("auto", *SERVABLE):
        raise HpcPredictError(f"--learner {args.learner!r}: not a servable learner (one of auto, {', '.join(SERVABLE)})")
    aliases = {}
    for item in args.alias:
        name, sep, field = item.partition("=")
        if not sep or field not in ("nodes", "ntasks", "cpus_per_task"):
            raise HpcPredictError(f"--alias {item!r}: expected INPUT=nodes|ntasks|cpus_per_task")
        aliases[name] = field
    if args.from_store == bool(args.data):
        raise HpcPredictError("train-runtime: give DATA.csv or --from-store (one of them)")
    if args.data and not args.target:
        raise HpcPredictError("train-runtime: --target names the runtime column of DATA.csv")
    try:
        derived = DerivedInputs.parse(args.derive)
    except ValueError as error:
        raise HpcPredictError(f"--derive: {error}") from None
    config = config_of(args)
    run_as_data_owner(config)
    registry = ModelRegistry(config.models.dir, owner=config.models.owner,
                             keep_versions=config.models.keep_versions)
    with tempfile.TemporaryDirectory() as tmp:
        data, target = (Path(args.data), args.target) if args.data else _runs_from_store(config, args, Path(tmp))
        folder = Path(tmp) / "runtime"
        serving: Path | None = None
        try:  # every application's model lives in one artifact: start from the served one
            serving = registry.current("runtime").model_path
            shutil.copytree(serving, folder)
        except ModelNotFound:
            folder.mkdir()
        shutil.rmtree(folder / args.application, ignore_errors=True)
        with Console(stderr=True).status(f"training the runtime model of {args.application}..."):
            learners: dict[str, dict] | None = None if args.learner == "auto" else {args.learner: {}}
            variants = train_application(data, target=target, application=args.application,
                                         directory=folder, input_aliases=aliases or None, learners=learners,
                                         derived=derived, pool=args.pool)
        _print_variants(args.application, variants)
        refused = worse_than_serving(serving, folder, args.application)
        if refused and not args.force:
            raise HpcPredictError("not published: the new model is worse than the serving one ("
                                  + "; ".join(refused) + "); --force publishes it")
        artifact = registry.publish("runtime", folder, metadata={"trained": args.application})
    for line in refused:
        print(f"published although worse (--force): {line}")
    print(f"trained runtime model of {args.application}: version {artifact.version}")
    return 0 if args.no_reload else reload_daemon(socket_of(args, config), artifact)


def _print_variants(application: str, variants: dict[str, dict]) -> None:
    agreement = next((meta["agreement"] for meta in variants.values() if "agreement" in meta), None)
    if agreement is not None:
        pooled = ", ".join(agreement["pooled_users"]) or "none"
        print(f"{application}: pooled model of the users {pooled}")
        for user, why in agreement["kept_out"].items():
            own = any(name.startswith(f"{user}/") for name in variants)
            print(f"  {user} kept out of the pooled model ({why}): "
                  f"{'served a model of her own runs' if own else 'too few runs for a model of her own'}")
    for name, meta in variants.items():
        scores = ", ".join(f"{learner} {'n/a' if v is None else f'{100 * v:.1f} %'}"
                           for learner, v in meta["cv_mape_by_learner"].items())
        print(f"  {name}: {meta['learner']} (cross-validated MAPE: {scores})")
        print(f"    {meta['selection']['reason']}")


def _runs_from_store(config, args, directory):
    """Write the application's stored runs as a run table in ``directory``: (path, target)."""
    from ..lab.runtime import TARGET, runs_csv

    store = open_store(config)
    try:
        text, count = runs_csv(store.jobs_by_submit(with_inputs=True, cluster=args.cluster), args.application)
    finally:
        store.close()
    if not count:
        raise HpcPredictError(f"the store has no COMPLETED job of application {args.application!r}")
    print(f"{count} stored runs of {args.application}")
    path = directory / "stored-runs.csv"
    path.write_text(text, encoding="utf-8")
    return path, TARGET


def _publish(args) -> int:
    config = config_of(args)
    run_as_data_owner(config)
    registry = ModelRegistry(config.models.dir, owner=config.models.owner, keep_versions=config.models.keep_versions)
    with changing_models(config, "publish"):
        artifact = registry.publish(args.kind, args.folder, key=args.key)
    print(f"published {artifact.kind} model {artifact.key} version {artifact.version}")
    return 0 if args.no_reload else reload_daemon(socket_of(args, config), artifact)


def _rollback(args) -> int:
    config = config_of(args)
    run_as_data_owner(config)
    registry = ModelRegistry(config.models.dir, owner=config.models.owner)
    version = args.version
    with changing_models(config, "rollback"):
        if version is None:
            try:
                serving = registry.current(args.kind, args.key).version
            except ModelNotFound:
                raise HpcPredictError(f"no {args.kind} model {args.key} is published: nothing to roll back") from None
            earlier = [v for v in registry.versions(args.kind, args.key) if v < serving]
            if not earlier:
                raise HpcPredictError(f"{args.kind} model {args.key}: no version older than the serving {serving}")
            version = earlier[-1]
        artifact = registry.make_current(args.kind, version, key=args.key)
    print(f"serving {artifact.kind} model {artifact.key} version {artifact.version} again")
    return 0 if args.no_reload else reload_daemon(socket_of(args, config), artifact)
