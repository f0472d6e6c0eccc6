"""Scaling modelers as named plugins with one ``model(measurements)`` method."""
import doctest
import json

import pytest

from hpcpredict.daemon.cli.main import main
from hpcpredict.daemon.errors import ConfigError, InvalidRequest
from hpcpredict.daemon.lab.scaling import modelers
from hpcpredict.daemon.lab.scaling.abstract_modeler import Modeler
from hpcpredict.daemon.lab.scaling.measurements import parse_jsonlines
from hpcpredict.daemon.lab.scaling.modelers import get_modeler, modeler_names, register_modeler


def strong_scaling():
    lines = [json.dumps({"params": {"p": p}, "value": [(30 + 960 / p) * f for f in (0.99, 1.0, 1.01)]})
             for p in (1, 2, 4, 8, 16, 32)]
    return parse_jsonlines(lines)[("<root>", "time")]


def test_docstring_examples():
    failures, tried = doctest.testmod(modelers)
    assert tried > 0 and failures == 0


@pytest.mark.parametrize("name, options", [("regression", {}), ("adaptive", {"samples_per_class": 20})])
def test_every_modeler_finds_the_strong_scaling_term(name, options):
    cls = get_modeler(name)
    assert issubclass(cls, Modeler) and cls.NAME == name
    fit = cls(**options).model(strong_scaling())
    assert fit.modeler == name
    assert "p^(-1)" in fit.function.expression()
    assert fit.function.evaluate({"p": 64.0}) == pytest.approx(30 + 960 / 64, rel=0.05)


def test_unknown_modeler_names_the_known_ones():
    with pytest.raises(InvalidRequest, match=r"unknown modeler 'oracle' \(known: adaptive, regression\)") as error:
        get_modeler("oracle")
    assert isinstance(error.value, ConfigError) and error.value.field == "modeler"


def test_a_second_class_cannot_take_a_registered_name():
    class Impostor(Modeler):
        NAME = "regression"

        def model(self, measurements):
            raise AssertionError("never called")

    with pytest.raises(ValueError, match="already registered"):
        register_modeler(Impostor)
    assert get_modeler("regression") is not Impostor


def test_cli_lists_the_modelers_and_refuses_an_unknown_one(tmp_path, capsys):
    assert main(["scaling", "modelers"]) == 0
    listed = [line.split()[0] for line in capsys.readouterr().out.splitlines()]
    assert listed == sorted(modeler_names())
    data = tmp_path / "runs.jsonl"
    data.write_text(json.dumps({"params": {"p": 1}, "value": [1.0]}) + "\n")
    assert main(["scaling", "fit", str(data), "--modeler", "oracle"]) == 1
    assert "unknown modeler 'oracle' (known: adaptive, regression)" in capsys.readouterr().err
