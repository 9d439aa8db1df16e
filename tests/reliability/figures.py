#!/usr/bin/env python3
"""Adds up the figures the reliability suites record (one JSON line per test,
in <build>/reliability-figures.jsonl or $NPC_RELIABILITY_FIGURES):
    tests/reliability/figures.py build/reliability-figures.jsonl
"""
import collections
import json
import sys

totals = collections.Counter()
tests = set()
for path in sys.argv[1:] or ["build/reliability-figures.jsonl"]:
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            record = json.loads(line)
            tests.add(record.get("test"))
            for key, value in record.items():
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    totals[key] += value
print(f"{len(tests)} tests recorded figures")
for key in sorted(totals):
    print(f"{key:32} {totals[key]}")
