"""`hpcpredict status`: model versions, data volume, recent accuracy, faults (admin)."""


def register(subparsers) -> None:
    parser = subparsers.add_parser("status", help="daemon status: models, data, accuracy, faults (admin)")
    parser.add_argument("--json", action="store_true")
    parser.set_defaults(handler=_status)


def _status(args) -> int:
    from .common import config_of, message_dict, print_json, shown, socket_of
    from ..client import admin_client
    from ..timefmt import human
    from ...proto.v1 import hpcpredict_pb2 as pb

    config = config_of(args)
    with admin_client(socket_of(args, config)) as client:
        status = client.call("GetStatus", pb.StatusRequest())
    if args.json:
        print_json(message_dict(status))
        return 0
    print(f"hpcpredictd {status.version}, up {human(status.uptime_s)}, store {status.store}")
    if status.build.commit:
        print(shown(f"build: {status.build.version} commit {status.build.commit}"))
    print(f"jobs in history: {status.jobs}  outcomes reported: {status.outcomes}  predictions: {status.predictions}")
    print(f"requests: {status.requests}  answered by fallback: {status.fallbacks}")
    if status.policy_mode:   # daemon/policy: the mode resolved against the controller, and why
        size = f", {status.total_cpus} CPUs on {status.total_nodes} nodes" if status.total_cpus else ""
        print(shown(f"policy mode {status.policy_mode}: {status.policy_reason}"))
        if status.policy_mode != "bound" and not status.policy_reason.startswith("[policy] mode"):
            # soft/auto: what was read of the controller (bound and advise do not read it)
            print(shown(f"controller: Slurm {status.slurm_release or 'unknown'}, planning rule "
                        f"{status.planning_rule or 'unknown'}{size}"))
    recent = status.recent_accuracy
    if recent:   # StoreLookups.recent_accuracy: the same accuracy as the metrics and `report`
        print(f"accuracy of the last {int(recent['n'])} outcomes a model predicted: {recent['accuracy']:.3f} "
              f"(mean min(predicted, actual)/max); ran past the bound: {recent['bound_exceeded_rate']:.3f}")
    if not any(not model.bundled for model in status.models):
        print("models: none published by this site (recent-history model and fallbacks answer)")
    for model in status.models:
        origin = "  bundled example, not trained on this site" if model.bundled else ""
        print(shown(f"model {model.kind:9} {model.key:20} {model.version}  ({model.created}){origin}"))
    for fault in status.faults:
        print(shown(f"FAULT {fault}"))   # fault messages quote paths and what callers sent
    return 0
