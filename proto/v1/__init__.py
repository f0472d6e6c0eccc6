"""Generated gRPC stubs of hpcpredict.v1 (see proto/generate.py)."""
