"""Run Extra-P 4.2.5 (the reference implementation) on benchmark tasks; runs in ITS OWN venv.

Extra-P pins numpy < 2, so it is not a project dependency. Set-up (documented in
benchmarks/README.md, section "Scaling models"):

    python3 -m venv /tmp/extrap-venv
    /tmp/extrap-venv/bin/pip install extrap==4.2.5 "numpy<2"

usage: /tmp/extrap-venv/bin/python extrap_driver.py TASKS.json RESULTS.json [median|mean]

TASKS.json: [{"id": ..., "lines": [jsonl lines], "eval_points": [{"x1": ..}, ..]}, ...]
RESULTS.json: [{"id": ..., "lead": {"x1": [i, j]}, "predictions": [..], "model": "...", "seconds": s}]
Extra-P's default modeler (multi-parameter modeler over the basic single-parameter modeler)
is used with the median of repetitions (seed 001's protocol, as `extrap --median`) or, with
"mean", Extra-P's own default. Note: in 4.2.5 ``ModelGenerator(use_measure=...)`` does not
reach the modeler, so the measure is set on the modeler(s) explicitly below.
"""
import json
import os
import sys
import tempfile
import time
import warnings

warnings.filterwarnings("ignore")

from extrap.entities.measurement import Measure  # noqa: E402
from extrap.fileio.file_reader.jsonlines_file_reader import read_jsonlines_file  # noqa: E402
from extrap.modelers.model_generator import ModelGenerator  # noqa: E402


def lead_exponents(function, names):
    lead = {}
    for term in getattr(function, "compound_terms", []):
        pairs = getattr(term, "parameter_term_pairs", None)
        if pairs is None:          # single-parameter function: CompoundTerm of parameter 0
            pairs = [(0, term)]
        for index, compound in pairs:
            i = sum(float(s.exponent) for s in compound.simple_terms if s.term_type == "polynomial")
            j = sum(float(s.exponent) for s in compound.simple_terms if s.term_type == "logarithm")
            name = names[index]
            if name not in lead or (i, j) > tuple(lead[name]):
                lead[name] = [i, j]
    return lead


def main(tasks_path, results_path, measure_name="median"):
    measure = {"median": Measure.MEDIAN, "mean": Measure.MEAN}[measure_name]
    tasks = json.load(open(tasks_path))
    results = []
    for task in tasks:
        with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as handle:
            handle.write("\n".join(task["lines"]) + "\n")
            path = handle.name
        started = time.process_time()
        try:
            experiment = read_jsonlines_file(path)
            generator = ModelGenerator(experiment, use_measure=measure)
            generator.modeler.use_measure = measure
            single = getattr(generator.modeler, "single_parameter_modeler", None)
            if single is not None:
                single.use_measure = measure
            generator.model_all()
            model = next(iter(generator.models.values()))
            function = model.hypothesis.function
            names = [str(p) for p in experiment.parameters]
            predictions = []
            for point in task["eval_points"]:
                values = [point[n] for n in names]
                predictions.append(float(function.evaluate(values if len(values) > 1 else values[0])))
            results.append({"id": task["id"], "lead": lead_exponents(function, names),
                            "predictions": predictions, "model": function.to_string(*experiment.parameters),
                            "seconds": time.process_time() - started})
        except Exception as error:  # report and go on: one failed task must not end the run
            results.append({"id": task["id"], "error": repr(error)})
        finally:
            os.unlink(path)
    json.dump(results, open(results_path, "w"))


if __name__ == "__main__":
    main(*sys.argv[1:4])
