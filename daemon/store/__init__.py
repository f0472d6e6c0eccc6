"""The job store: where job records, predictions and outcomes live, behind one interface.

- :mod:`.sqlite`: the interface every backend implements (:class:`Store`) and the embedded
  default, SQLite in WAL mode (:class:`SQLiteStore`, its schema steps :data:`MIGRATIONS`);
- :mod:`.postgres`: the same interface on a shared PostgreSQL server (:class:`PostgresStore`,
  for a daemon on both slurmctld hosts or several clusters on one history);
- :mod:`.backends`: the store the config's ``[store] backend`` names (:func:`open_store`: the
  daemon and every command open their store with it);
- :mod:`.journal`: the memory-mapped journal that takes prediction records off Predict's path
  (:class:`JournalFile`; its record codec :func:`encode_row`, :func:`decode_row`);
- :mod:`.rows`: a table row's columns and codecs (:class:`PredictionRow`, :func:`prediction_values`);
- :mod:`.lookups`: the questions every backend answers in the same SQL (``explain``, ``report``,
  the accuracy gauges; a report row's columns :data:`OUTCOME_COLUMNS`).

The rest of the project imports from here, not from the modules (tests/daemon/test_layering.py).
"""
from .backends import open_store
from .journal import JournalFile, decode_row, encode_row
from .lookups import OUTCOME_COLUMNS
from .postgres import PostgresStore
from .rows import PredictionRow, job_from_row, job_values, prediction_values
from .sqlite import MIGRATIONS, SQLiteStore, Store, StoreEvents

__all__ = ["MIGRATIONS", "OUTCOME_COLUMNS", "JournalFile", "PostgresStore", "PredictionRow", "SQLiteStore", "Store", "StoreEvents",
           "decode_row", "encode_row", "job_from_row", "job_values", "open_store", "prediction_values"]
