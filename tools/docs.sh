#!/usr/bin/env bash
# The docs site, built into _site/ (open _site/index.html), set up first as tools/demo.sh does.
#   bash tools/docs.sh                 build the pages from the outputs saved in the notebooks
#   bash tools/docs.sh --execute [NB]  first run the pages (all, or nbs/NB.ipynb ...) in a Jupyter kernel, saving outputs
#   bash tools/docs.sh --check         build, check the notebooks behind the pages, then open every page in headless
#                                      Chromium, check it, screenshot it (no Chromium: exit 77, skipped, saying how to install it)
# The published site is Quarto's, built by the GitHub workflow from the same notebooks.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh dev
exec .venv/bin/python tools/render_docs.py "$@"
