#!/usr/bin/env bash
# The vision recipe's own environment (.venv-vision): torchvision does not import beside the CPU build of torch the
# main environment pins, so this one takes torch 2.14.1 and torchvision 0.29.1 together (a build that runs on the CPU).
# Idempotent, like tools/setup.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv-vision/bin/python ] || python3 -m venv .venv-vision
stamp=".venv-vision/.installed-$(cat pyproject.toml tools/setup_vision.sh | sha1sum | cut -c1-12)"
if [ ! -f "$stamp" ]; then
  .venv-vision/bin/python -m pip install -q --upgrade pip
  printf 'torch==2.14.1\ntorchvision==0.29.1\n' > .venv-vision/constraints.txt
  .venv-vision/bin/python -m pip install -q -c .venv-vision/constraints.txt "torch==2.14.1" "torchvision==0.29.1" -e ".[dev]"
  touch "$stamp"
fi
