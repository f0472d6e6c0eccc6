"""Runtime models from application inputs and runtime features (seeds 000 and 003).

* :mod:`.inputs` — application key and inputs from a job script (``extract_inputs``);
* :mod:`.report` — runtime-feature protocol (``report``, ``parse_feature_lines``);
* :mod:`.loglinear`, :mod:`.startup_steps`, :mod:`.gaussian_process`, :mod:`.trees`, :mod:`.boosting`,
  :mod:`.ann`, :mod:`.blend`, :mod:`.linear`, :mod:`.transfer` — learners (sklearn API);
* :mod:`.selection`, :mod:`.evaluation` — CV model selection and configuration-split scoring;
* :mod:`.active` — which runs to do next (ensemble CoV with a minimum distance);
* :mod:`.service` — per-application models as the daemon serves them (``ApplicationModels``);
* :mod:`.compiled`, :mod:`.compiled_ann`, :mod:`.artifacts` — fitted learners as plain arrays
  (pickle-free artifacts, numpy inference on the hot path).
"""
