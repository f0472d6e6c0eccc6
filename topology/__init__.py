"""Network topology: what the site's fabric tools print -> one placement model.

* :mod:`.placement` — :class:`~.placement.Placement`, node -> ancestors by level (JSON, encode).
* :mod:`.mapping` — MPI rank -> allocation node, as Slurm lays tasks out.
* Parsers (pure text -> data): :mod:`.ibnetdiscover`, :mod:`.ibtools` (ibstat, ibswitches,
  ibhosts), :mod:`.cray` (cnames, xtprocadmin, xtnodestat), :mod:`.slurm_tree`
  (topology.conf, scontrol show topology), :mod:`.sitemap`, :mod:`.hostlist`.
* Builders: :func:`.infiniband.placement_from_fabric`, :func:`.cray.placement_from_xtprocadmin`,
  :func:`.slurm_tree.placement_from_tree`.

Nothing here runs external commands; the CLI (``hpcpredict topology import``) reads files.
"""
