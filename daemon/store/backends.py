"""Which store the config names: ``[store] backend`` = SQLite (the embedded default,
:mod:`.sqlite`) or PostgreSQL (:mod:`.postgres`, a shared server).

Its own module so that neither backend imports the other: the PostgreSQL store implements
:class:`~.sqlite.Store`, and only this opener knows both.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import StoreError
from .sqlite import SQLiteStore, Store
from .postgres import PostgresStore

if TYPE_CHECKING:
    from ..config import Config


def open_store(config: Config, *, lazy: bool = False, journal: bool = False) -> Store:
    """Build the store named by the config (``[store] backend``: SQLite, the default, or
    PostgreSQL); ``lazy``: see :class:`SQLiteStore`; ``journal``: the daemon's own store, which
    keeps the prediction rows within their retention and, on SQLite, a prediction journal (one
    process only: the files are locked; the PostgreSQL store needs none)."""
    if getattr(config.store, "backend", "sqlite") == "postgres":
        if not config.store.dsn:
            raise StoreError("[store] backend = postgres needs [store] dsn (a libpq connection string)")
        store: Store = PostgresStore(config.store.dsn, lazy=lazy)
    else:
        store = SQLiteStore(config.store.path, synchronous=config.store.synchronous,
                            busy_timeout_ms=config.store.busy_timeout_ms, lazy=lazy,
                            journal_bytes=config.store.journal_mib << 20 if journal else 0)
    if journal:   # the daemon's store: it also keeps the prediction rows within their retention
        store.start_retention(config.store.keep_predictions_days, config.store.keep_predictions)
    return store
