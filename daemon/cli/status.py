"""`hpcpredict status`: model versions, data volume, recent accuracy, faults (admin)."""


def register(subparsers) -> None:
    parser = subparsers.add_parser("status", help="daemon status: models, data, accuracy, faults (admin)")
    parser.add_argument("--json", action="store_true")
    parser.set_defaults(handler=_status)


def _status(args) -> int:
    from google.protobuf.json_format import MessageToDict

    from .common import config_of, print_json, shown, socket_of
    from ..client import admin_client
    from ..timefmt import human
    from ...proto.v1 import hpcpredict_pb2 as pb

    config = config_of(args)
    with admin_client(socket_of(args, config)) as client:
        status = client.call("GetStatus", pb.StatusRequest())
    if args.json:
        print_json(MessageToDict(status, preserving_proto_field_name=True, always_print_fields_with_no_presence=True))
        return 0
    print(f"hpcpredictd {status.version}, up {human(status.uptime_s)}, store {status.store}")
    print(f"jobs in history: {status.jobs}  outcomes reported: {status.outcomes}  predictions: {status.predictions}")
    print(f"requests: {status.requests}  answered by fallback: {status.fallbacks}")
    for key, value in sorted(status.recent_accuracy.items()):
        print(f"recent {key}: {value:.3f}")
    if not status.models:
        print("models: none published (recent-history model and fallbacks answer)")
    for model in status.models:
        print(shown(f"model {model.kind:9} {model.key:20} {model.version}  ({model.created})"))
    for fault in status.faults:
        print(shown(f"FAULT {fault}"))   # fault messages quote paths and what callers sent
    return 0
