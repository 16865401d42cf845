#!/usr/bin/env bash
# The docs site, built into _site/ (open _site/index.html); the deploy workflow publishes what this builds.
#   bash tools/docs.sh            build the site
#   bash tools/docs.sh --check    build it, then check it as a reader would (tools/check_site.py: headless Chromium;
#                                 without Chromium it exits 77, skipped, saying how to install it)
# How: nbdev stays the source: docs/pages.py puts the pages of nbs/sidebar.yml, in its order, through nbdev's own
# processors for docs (as nbdev-proc-nbs does, but keeping hidden cells to run, and show_doc run in the page's kernel)
# into _pages/; jupyter-cache runs the pages that changed; Sphinx with myst-nb writes the site with sphinx-book-theme
# (docs/conf.py).
# Why Sphinx + myst-nb: a maintained generator from PyPI that reads notebooks and runs them through jupyter-cache, so
# a page runs again only when its code, the library or what it reads changes (the published site is built from
# scratch); its theme gives search, a table of contents, previous/next links and a phone layout, and maths is drawn
# as MathML, with no script, so the pages load nothing from the network. (MkDocs Material with mkdocs-jupyter runs
# every notebook on every build, with no cache.)
# The vision recipe runs in the kernel of .venv-vision (torchvision) when that environment is set up
# (FASTACCUM_VISION=1 sets it up, as in tools/test.sh); without it, its torchvision cells are shown not run, as are
# cells flagged `cuda`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh dev
export OMP_NUM_THREADS=1 WANDB_MODE=offline WANDB_SILENT=true PYTHONHASHSEED=0
# tqdm.auto (imported by accelerate) warns in a Jupyter kernel without ipywidgets; the pages show no tqdm bar, and
# ipywidgets would make them load widget scripts from the network
export PYTHONWARNINGS='ignore:IProgress not found'
[ "${FASTACCUM_VISION:-0}" = 1 ] && bash tools/setup_vision.sh
vision=
if ls .venv-vision/.installed-* > /dev/null 2>&1; then   # its kernel, where Jupyter in .venv finds it
  .venv-vision/bin/python -m ipykernel install --prefix .venv --name fastaccum-vision --display-name 'fastaccum (vision)' > /dev/null 2>&1
  vision=--vision
else echo 'no .venv-vision: the vision recipe is shown without its torchvision cells run (FASTACCUM_VISION=1 sets it up)'; fi
start=$SECONDS
log=$(mktemp)
.venv/bin/python docs/pages.py $vision   # nbdev's processors for docs, the pages of nbs/sidebar.yml into _pages/
echo "staged the pages in $((SECONDS-start)) s"
# run the pages whose code, or what they read, changed (jupyter-cache, two at a time, each named as it ends); the
# build takes every page's outputs from the cache (a page that failed runs there again, to show its traceback)
export FASTACCUM_DOCS_CACHE=$(.venv/bin/python -c "import sys; sys.path[:0] = ['docs']; import conf; print(conf.nb_execution_cache_path)")
cache=$FASTACCUM_DOCS_CACHE   # computed once: the library may change while the pages run
mkdir -p "$cache"; find .jupyter_cache -mindepth 1 -maxdepth 1 ! -name "$(basename "$cache")" -exec rm -rf {} +   # older libraries'
.venv/bin/python docs/run_pages.py "$cache" 2> >(grep -v 'over TCP without encryption' >&2)   # (a kernel's own notice)
rm -rf _site
if ! .venv/bin/sphinx-build -q -E -j 2 -b html -c docs -d "$cache/doctrees" _pages _site > "$log" 2>&1; then
  grep -v 'over TCP' "$log" | tail -30; echo 'sphinx-build failed (above)'; exit 1
fi
grep 'WARNING' "$log" || true   # Sphinx's warnings: links MyST could not resolve, pages that failed to run
rm -f "$log"
echo "built the site into _site/ in $((SECONDS-start)) s"
[ "${1:-}" = --check ] && exec .venv/bin/python tools/check_site.py
exit 0
