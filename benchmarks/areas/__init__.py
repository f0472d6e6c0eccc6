"""One module per benchmark area: ``DESCRIPTION`` and ``run(args: list[str]) -> dict``."""
