"""Markdown tables (for benchmarks/README.md) from `hpcpredict comm evaluate --json` results.

    .venv/bin/python benchmarks/comm/make_table.py results-fattree.json results-dragonfly.json
"""
import json
import sys

MODELS = ("classA", "classB", "classC", "alpha-beta", "alpha-beta-gamma", "single-variable")
PATTERNS = ("halo3d", "halo4d", "lulesh1", "lulesh2", "lulesh3", "all")

for path in sys.argv[1:]:
    with open(path, encoding="utf-8") as stream:
        result = json.load(stream)
    print(f"\n`{path}` (SIMULATED) — MMRE % / Pred25 % / RCC\n")
    print("| model | " + " | ".join(PATTERNS) + " |")
    print("|---|" + "---|" * len(PATTERNS))
    for model in MODELS:
        if model not in result:
            continue
        cells = []
        for pattern in PATTERNS:
            s = result[model].get(pattern)
            cells.append(f"{100 * s['mmre']:.1f} / {100 * s['pred25']:.1f} / {s['rcc']:.3f}" if s else "–")
        name = f"**{model}**" if model == "classC" else model
        print(f"| {name} | " + " | ".join(cells) + " |")
