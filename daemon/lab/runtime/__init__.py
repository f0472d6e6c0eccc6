"""The runtime-from-inputs learners: fitting, selection, evaluation (their served forms are in daemon/runtime/).

* :mod:`.learners` — learners registered by name (``register_learner``, ``make_learner``);
* :mod:`.loglinear`, :mod:`.startup_steps`, :mod:`.gaussian_process`, :mod:`.trees`, :mod:`.boosting`,
  :mod:`.ann`, :mod:`.blend`, :mod:`.linear`, :mod:`.transfer` — learners (scikit-learn API);
* :mod:`.model` — input encoder + learner (``RuntimeModel``); :mod:`.dataset` — run tables;
* :mod:`.packing` — a fitted learner packed into its artifact (``save_application_model``);
* :mod:`.selection`, :mod:`.evaluation`, :mod:`.accuracy` — CV model selection and
  configuration-split scoring; :mod:`.training` — what ``train-runtime`` publishes;
* :mod:`.active` — which runs to do next (ensemble CoV with a minimum distance).
"""
