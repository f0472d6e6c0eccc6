"""Scaling models: measurements, modelers, fitting (the served advice is in daemon/scaling/)."""
