"""The daemon's listeners: where calls come in, each with its own rule for who is calling.

- :mod:`.local_socket`: the local socket (a Unix socket, JSON lines; the caller named by the
  kernel, SO_PEERCRED), where Slurm's hooks, the CLI and users call (:class:`LocalSocketServer`);
- :mod:`.remote`: the remote listener (TCP; the caller named by MUNGE, frames of
  :mod:`hpcpredict.daemon.remote_wire`) for users on other hosts (:class:`RemoteServer`,
  the credentials it accepted :class:`SeenCredentials`);
- :mod:`.grpc_adapter`: gRPC on a Unix socket for trusted tools (:func:`grpc_server`, its health
  :func:`set_serving`);
- :mod:`.metrics`: the counters the service keeps (:class:`Metrics`) and the Prometheus endpoint
  that serves them (:class:`MetricsServer`, :func:`start_metrics_server`);
- :mod:`.connections`: the one-thread ``selectors`` loop the local socket, the remote listener
  and the metrics endpoint share (internal).

:mod:`hpcpredict.daemon.server` (``hpcpredictd``) starts them. MUNGE's client
(:mod:`hpcpredict.daemon.munge`) and the remote frames (:mod:`hpcpredict.daemon.remote_wire`)
stay beside the CLI's client, which speaks them too and must not import grpc or
prometheus_client. The rest of the project imports from here, not from the modules
(tests/daemon/test_layering.py).
"""
from .grpc_adapter import grpc_server, set_serving
from .local_socket import LocalSocketServer
from .metrics import Metrics, MetricsServer, start_metrics_server
from .remote import RemoteServer, SeenCredentials

__all__ = ["LocalSocketServer", "Metrics", "MetricsServer", "RemoteServer", "SeenCredentials", "grpc_server",
           "set_serving", "start_metrics_server"]
