"""Runtime models from application inputs and runtime features (seeds 000 and 003).

* :mod:`.inputs` — application key and inputs from a job script (``extract_inputs``);
* :mod:`.report` — runtime-feature protocol (``report``, ``parse_feature_lines``);
* :mod:`.trees`, :mod:`.ann`, :mod:`.linear`, :mod:`.startup_steps`, :mod:`.transfer` — learners (sklearn API);
* :mod:`.selection`, :mod:`.evaluation` — CV model selection and configuration-split scoring;
* :mod:`.active` — which runs to do next (ensemble CoV with a minimum distance);
* :mod:`.service` — per-application models as the daemon serves them (``ApplicationModels``);
* :mod:`.compiled`, :mod:`.compiled_ann`, :mod:`.artifacts` — fitted learners as plain arrays
  (pickle-free artifacts, numpy inference on the hot path).
"""
