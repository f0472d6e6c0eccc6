"""hpcpredict's benchmark suite: ``python -m benchmarks run AREA`` (see benchmarks/README.md)."""
