#!/usr/bin/env bash
# Create the project's virtual environment (.venv) and install fastaccum into it, with the CPU build
# of torch. Idempotent: a second run with unchanged pyproject.toml/constraints.txt installs nothing.
# Usage: bash tools/setup.sh [EXTRAS]    e.g. `bash tools/setup.sh dev` for the test dependencies.
set -euo pipefail
cd "$(dirname "$0")/.."
extras=${1:-}
[ -x .venv/bin/python ] || python3 -m venv .venv
stamp=".venv/.installed-${extras:-base}-$(cat pyproject.toml constraints.txt | sha1sum | cut -c1-12)"
if [ ! -f "$stamp" ]; then
  .venv/bin/python -m pip install -q --upgrade pip
  .venv/bin/python -m pip install -q -c constraints.txt "torch==2.13.0" -e ".${extras:+[$extras]}"
  touch "$stamp"
fi
