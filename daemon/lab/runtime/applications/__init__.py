"""Per-application declarations: what each code's cost follows (derived inputs) and how many
iterations its report says a run took; one module per application.

A sweep's CSV is recorded with a JSON beside it that names the derived inputs the sweep
declared (:func:`declared_derived`), so a table is read with the same derived inputs it was
evaluated with.
"""
from __future__ import annotations

import json
from pathlib import Path

from ....runtime.derived import DerivedInputs


def declared_derived(path: Path) -> DerivedInputs:
    """The derived inputs the sweep that made ``path`` declared (``derived_inputs`` in its JSON)."""
    provenance = Path(path).with_suffix(".json")
    if not provenance.exists():
        return DerivedInputs()
    return DerivedInputs.from_json(json.loads(provenance.read_text()).get("derived_inputs"))
