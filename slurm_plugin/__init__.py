"""hpcpredict's edges into Slurm (installed by ``contrib/slurm/install-hooks.sh``).

- ``job_submit.lua``       JobSubmitPlugins=lua: Predict at submission, site policy, fail-open.
- ``prolog_slurmctld.py``  PrologSlurmctld: PredictAtAllocation on the chosen nodes.
- ``task_prolog.sh/.py``   TaskProlog: the walltime suggestion in the job's output, and
                           ``HPCPREDICT_FEATURES_FILE`` in its environment.
- ``task_epilog.sh/.py``   TaskEpilog: removes that file when the job wrote nothing into it.
- ``epilog_slurmctld.py``  EpilogSlurmctld: ReportRuntimeFeatures (the job's features file),
                           then ReportOutcome (state from sacct when it answers).
- ``features_file.py``     where a job's runtime-features file lives; reading it safely.
- ``hookclient.py``        the scripts' standard-library client of the local socket.
- ``slurmjob.py``          how those scripts read a job (never from text a user wrote), and
                           pure helpers to build their requests.

The scripts run under the system ``/usr/bin/python3`` with the standard library only; the
admin guide is ``contrib/slurm/ADMIN.md``. The socket they speak to is the daemon's
(``hpcpredict.daemon.listeners.local_socket``); the two packages do not import each other.
"""
