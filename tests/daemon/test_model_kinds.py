"""Model kinds registered by name: the registry and the engine find them only through it."""
import doctest

import pytest

from hpcpredict.daemon import model_kinds
from hpcpredict.daemon.errors import ConfigError, ModelArtifactError
from hpcpredict.daemon.model_kinds import ModelKind, get_model_kind, register_model_kind
from hpcpredict.daemon.registry import ModelRegistry


def test_docstring_examples():
    failures, tried = doctest.testmod(model_kinds)
    assert tried > 0 and failures == 0


def test_unknown_kind_is_a_config_error_listing_the_known_kinds(tmp_path):
    with pytest.raises(ConfigError, match=r"unknown model kind 'weather' \(known: comm, runtime, scaling, "
                                          r"topology, walltime\)"):
        get_model_kind("weather")
    (tmp_path / "m").mkdir()
    with pytest.raises(ModelArtifactError, match="known: comm"):
        ModelRegistry(tmp_path / "models").publish("weather", tmp_path / "m")


def test_a_name_registers_once():
    with pytest.raises(ValueError, match="already registered"):
        @register_model_kind("walltime")
        class Again(ModelKind):
            @staticmethod
            def load(folder):
                return None

            @staticmethod
            def place(slots, key, model):
                pass
    assert get_model_kind("walltime") is model_kinds.WalltimeKind


@pytest.mark.parametrize("name", ["walltime", "comm", "topology"])
def test_publish_validates_with_the_kinds_loader(name, tmp_path):
    """A folder without the kind's files is refused by its loader before CURRENT moves (runtime and
    scaling folders hold one model per application, so an empty one is a valid empty set)."""
    (tmp_path / "empty").mkdir()
    registry = ModelRegistry(tmp_path / "models")
    with pytest.raises(ModelArtifactError, match=f"refusing to publish {name} model"):
        registry.publish(name, tmp_path / "empty")
    assert registry.entries() == []
