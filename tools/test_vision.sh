#!/usr/bin/env bash
# The vision recipe (nbs/03_vision.ipynb), run in its own environment: set it up (once), then run the notebook's
# `vision` cells with nbdev's test runner. No weights are downloaded: the model starts from random weights.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup_vision.sh
OMP_NUM_THREADS=${OMP_NUM_THREADS:-2} exec .venv-vision/bin/nbdev-test --flags vision nbs/03_vision.ipynb
