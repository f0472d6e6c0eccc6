"""The `hpcpredict` command line: one module per command group, each with `register(subparsers)`."""
