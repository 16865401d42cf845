#!/usr/bin/env bash
# Set up (idempotent) and run the whole test suite: every notebook with nbdev's test runner, plus the
# checks that the library and README are in step with the notebooks. Ends with `N passed, N failed`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh dev
exec .venv/bin/python tools/run_tests.py "$@"
