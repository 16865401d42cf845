#!/usr/bin/env bash
# Set up (idempotent) and run the demo: one large batch vs fastaccum vs fastai's built-in callback.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
exec .venv/bin/fastaccum-demo "$@"
