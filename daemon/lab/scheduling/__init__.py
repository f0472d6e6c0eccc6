"""Scheduling replay: what a walltime policy does to the queue of a real trace.

``workload`` turns a trace into jobs and reads the machine size from the SWF header; ``easy``
replays jobs through EASY backfilling with Slurm's ``--time-min`` semantics (pure: it knows
nothing of predictors); ``policies`` sets each job's limits (the users' requests, our hook's
policy through :func:`hpcpredict.daemon.walltime_policy.plan_limits` on the daemon's own
answers, the oracle...);
``scores`` scores a replay (a killed job done at its kill, or, when the replay resubmits
killed jobs, each job from its first submission to its final end, and where a policy's change
comes from); ``hindsight`` is a reference, not a policy: the bound a job's group's runtimes
over the whole trace would give (the ``scheduling_ceiling`` benchmark's ceiling).
"""
