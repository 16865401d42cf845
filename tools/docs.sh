#!/usr/bin/env bash
# The docs site, built into _site/ (open _site/index.html); the deploy workflow publishes what this builds.
#   bash tools/docs.sh                    build the site
#   bash tools/docs.sh --check            build it, then check it as a reader would (tools/check_site.py: headless
#                                         Chromium; without Chromium it is skipped, saying how to install it: exit 77)
#   bash tools/docs.sh --check --tests    as tools/test.sh runs it: also the notebooks the site does not show
# Each page runs once: its run (hidden test cells included) is the notebook's test and gives the site its outputs,
# and the examples it shows run in a fresh kernel beside it (docs/run_pages.py); each is reported as it ends, as a
# `PASS  ...`, `FAIL  ...` or `SKIP  ...` line (tools/test.sh counts them), with a line at least every 30 s.
# How: nbdev stays the source: docs/pages.py puts the pages of nbs/sidebar.yml, in its order, through nbdev's own
# processors for docs (as nbdev-proc-nbs does, but keeping hidden cells to run, and show_doc run in the page's kernel)
# into _pages/; jupyter-cache runs the pages that changed; Sphinx with myst-nb writes the site with sphinx-book-theme
# (docs/conf.py).
# Why Sphinx + myst-nb: a maintained generator from PyPI that reads notebooks and runs them through jupyter-cache, so
# a page runs again only when its code, the library or what it reads changes (the published site is built from
# scratch); its theme gives search, a table of contents, previous/next links and a phone layout, and maths is drawn
# as MathML, with no script, so the pages load nothing from the network. (MkDocs Material with mkdocs-jupyter runs
# every notebook on every build, with no cache.)
# Nothing changed since the last run (the pages, the library, the site's configuration, the check): the site is not
# built again, nor checked again if its check passed (stamps in the cache's folder: site.built, site.checked).
# The vision recipe runs in the kernel of .venv-vision (torchvision) when that environment is set up
# (FASTACCUM_VISION=1 sets it up, as in tools/test.sh); without it, its torchvision cells are shown not run, as are
# cells flagged `cuda`.
set -uo pipefail
cd "$(dirname "$0")/.."
check=0; tests=
for a in "$@"; do case $a in --check) check=1;; --tests) tests=--tests;; *) echo "unknown option $a"; exit 2;; esac; done
bash tools/setup.sh dev || exit 1
export OMP_NUM_THREADS=1 WANDB_MODE=offline WANDB_SILENT=true PYTHONHASHSEED=0
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}   # the kernels import this checkout's library
# tqdm.auto (imported by accelerate) warns in a Jupyter kernel without ipywidgets; the pages show no tqdm bar, and
# ipywidgets would make them load widget scripts from the network
export PYTHONWARNINGS='ignore:IProgress not found'
[ "${FASTACCUM_VISION:-0}" = 1 ] && bash tools/setup_vision.sh
vision=
if ls .venv-vision/.installed-* > /dev/null 2>&1; then   # its kernel, where Jupyter in .venv finds it
  .venv-vision/bin/python -m ipykernel install --prefix .venv --name fastaccum-vision --display-name 'fastaccum (vision)' > /dev/null 2>&1
  vision=--vision
else echo 'no .venv-vision: the vision recipe is shown without its torchvision cells run (FASTACCUM_VISION=1 sets it up)'; fi
ticking() {   # ticking OUT CMD...: run CMD, its output to the file OUT, printing a line every 30 s while it runs
  local out=$1 start=$SECONDS; shift
  "$@" > "$out" 2>&1 & local pid=$!
  while ! wait_for $pid 30; do echo "  ... $((SECONDS-start)) s: $(basename "$1") $(basename "${2:-}") still running"; done
  wait $pid
}
wait_for() { local i; for ((i = 0; i < $2; i++)); do kill -0 "$1" 2> /dev/null || return 0; sleep 1; done; return 1; }
start=$SECONDS
log=$(mktemp)
ok=1
ticking "$log" .venv/bin/python docs/pages.py $vision || { cat "$log"; echo 'FAIL  staging the pages (docs/pages.py)'; exit 1; }
echo "staged the pages in $((SECONDS-start)) s"
export FASTACCUM_DOCS_CACHE=$(.venv/bin/python -c "import sys; sys.path[:0] = ['docs']; import conf; print(conf.nb_execution_cache_path)")
cache=$FASTACCUM_DOCS_CACHE   # computed once: the library may change while the pages run
mkdir -p "$cache"   # older libraries' caches go; the durations of earlier runs stay (the longest jobs start first)
find .jupyter_cache -mindepth 1 -maxdepth 1 ! -name "$(basename "$cache")" ! -name durations.json -exec rm -rf {} +
.venv/bin/python docs/run_pages.py "$cache" $tests 2> >(grep -v 'over TCP without encryption' >&2) || ok=0   # (a kernel's own notice)
# the site: built again only when what it is built from changed (the staged pages, their outputs, the configuration)
stamp=$(cat _pages/*.ipynb docs/conf.py docs/_static/* <(echo "$cache") <(ls "$cache"/executed 2> /dev/null) | sha1sum | cut -c1-40)
if [ "$ok" = 1 ] && [ -f _site/index.html ] && [ "$(cat "$cache/site.built" 2> /dev/null)" = "$stamp" ]; then
  echo 'PASS  docs site built (cached: nothing it is built from changed)'
else
  rm -rf _site
  if ticking "$log" .venv/bin/sphinx-build -q -E -j 2 -b html -c docs -d "$cache/doctrees" _pages _site; then
    grep 'WARNING' "$log" | grep -v 'over TCP' || true   # Sphinx's warnings: links MyST could not resolve, pages that failed
    echo "$stamp" > "$cache/site.built"
    echo "PASS  docs site built (Sphinx, myst-nb: outputs from the cache) in $((SECONDS-start)) s"
  else
    grep -v 'over TCP' "$log" | tail -30 | sed 's/^/      /'; echo 'FAIL  docs site built (sphinx-build failed: above)'; exit 1
  fi
fi
rm -f "$log"
[ $check = 1 ] || exit $((1 - ok))
checked=$(cat "$cache/site.built" tools/check_site.py docs/pages.py docs/run_pages.py "$cache/examples-passed.json" 2> /dev/null | sha1sum | cut -c1-40)
skipped=0
if [ -d _site/screenshots ] && [ "$(cat "$cache/site.checked" 2> /dev/null)" = "$checked" ]; then
  echo 'PASS  docs site checked as a reader would (cached: the site and the check unchanged since it passed)'
else
  start=$SECONDS
  .venv/bin/python tools/check_site.py 2>&1 | sed -u 's/^/      /'
  case ${PIPESTATUS[0]} in
    0) echo "$checked" > "$cache/site.checked"; echo "PASS  docs site checked as a reader would (tools/check_site.py, $((SECONDS-start)) s)";;
    77) echo 'SKIP  docs site checked as a reader would: no Chromium (apt-get install -y chromium)'; skipped=1;;
    *) echo "FAIL  docs site checked as a reader would (tools/check_site.py: the problems above)"; ok=0;;
  esac
fi
[ $ok = 1 ] || exit 1
[ $skipped = 0 ] || exit 77   # built, not checked: the deploy workflow publishes no site it could not check
exit 0
