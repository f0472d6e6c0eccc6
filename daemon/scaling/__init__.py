"""Scaling models as the daemon serves them: stored ScalingModel files and node-count advice
(:mod:`.advice`); measurements, modelers and fitting are in daemon/lab/scaling/."""
