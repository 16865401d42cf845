#!/usr/bin/env bash
# Set up (idempotent) and run the benchmarks: bench/bench.py, with fastxtend 0.1.7 for the comparison.
# Writes bench/results/ (results.md, results.json, charts), which the docs' Benchmarks page shows.
# Usage: bash tools/bench.sh [--quick] [--no-ddp] [--out DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh dev
.venv/bin/python -c 'import fastxtend' 2>/dev/null || .venv/bin/python -m pip install -q -c constraints.txt "fastxtend==0.1.7"
exec .venv/bin/python bench/bench.py "$@"
