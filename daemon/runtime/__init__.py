"""Runtime models from application inputs and runtime features, as the daemon serves them (seeds 000 and 003).

* :mod:`.inputs` — application key and inputs from a job script (``extract_inputs``);
* :mod:`.report` — runtime-feature protocol (``report``, ``parse_feature_lines``);
* :mod:`.served` — per-application models as the daemon serves them (``ApplicationModels``);
* :mod:`.artifacts` — each artifact format's served predictor, registered by format (``unpack``);
* :mod:`.compiled`, :mod:`.compiled_ann` — fitted learners as plain arrays (pickle-free
  artifacts, numpy inference on the hot path);
* :mod:`.encoding`, :mod:`.derived`, :mod:`.values`, :mod:`.conformal` — what a served model
  shares with its fitting: input encoding, derived inputs, value rules, conformal intervals.

Fitting, selection and evaluation (the learners themselves) are the lab's:
:mod:`hpcpredict.daemon.lab.runtime`.
"""
