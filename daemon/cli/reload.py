"""`hpcpredict reload`: make the running daemon reload its models (admin)."""
from __future__ import annotations

from .common import config_of, message_dict, print_json, socket_of
from ..client import reload_models


def register(subparsers) -> None:
    parser = subparsers.add_parser("reload", help="make the daemon reload published models (admin)")
    parser.add_argument("--json", action="store_true")
    parser.set_defaults(handler=_reload)


def _reload(args) -> int:
    reply = reload_models(socket_of(args, config_of(args)))
    if args.json:
        print_json(message_dict(reply))
    else:
        for model in reply.models:
            print(f"serving {model.kind:9} {model.key:20} {model.version}")
        for error in reply.errors:
            print(f"refused: {error}")
    return 1 if reply.errors else 0
