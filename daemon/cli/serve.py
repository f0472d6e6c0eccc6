"""`hpcpredict serve`: run the daemon in the foreground (same as `hpcpredictd`)."""


def register(subparsers) -> None:
    parser = subparsers.add_parser("serve", help="run the daemon in the foreground (= hpcpredictd)")
    parser.set_defaults(handler=_serve)


def _serve(args) -> int:
    from ..server import main

    argv = []
    if args.config:
        argv += ["--config", args.config]
    if args.socket:
        argv += ["--socket", args.socket]
    return main(argv)
