"""Walltime from job history, as the daemon serves it: our online model (:mod:`.model`, with
its per-user history index :mod:`.features` and the predictor interface and baselines
:mod:`.predictors`) and its artifact (:mod:`.persist`: save and load).

Fitting, evaluation and trace reading are the lab's (:mod:`hpcpredict.daemon.lab.history`).
"""
