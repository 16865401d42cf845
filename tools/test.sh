#!/usr/bin/env bash
# The whole test suite (set up first, idempotently): the library and README in step with the notebooks; each page of
# the site run once, hidden tests included, as its notebook's test (its outputs are the site's), the examples it shows
# in a fresh kernel beside it, and the notebooks the site does not show with nbdev's runner (each result printed as
# it ends, a line at least every 30 s); the vision recipe in its own environment; and the docs site, built and
# checked as a reader would in headless Chromium. The first time about 15 minutes of CPU (about 10 on 2 idle
# cores), about 1 minute when nothing changed (what passed and is unchanged, by the notebooks' and the library's content, is not run again). Ends with
# `N passed, N failed` (and `, N skipped` when some were; every notebook and every check counts one).
# A check whose tool is missing is skipped, with the command that installs it, not failed:
#   - the vision recipe needs .venv-vision, a second environment with torch 2.14.1 and torchvision 0.29.1 (about 6 GB,
#     a CUDA build of torch): built only with FASTACCUM_VISION=1 (CI sets it), run whenever it has been built;
#   - the docs check opens the pages in Chromium: without it the site is built, not checked (apt-get install -y chromium).
# Usage: bash tools/test.sh                       (CUDA cells: .venv/bin/python tools/test_nbs.py --flags cuda, on a GPU)
#        FASTACCUM_VISION=1 bash tools/test.sh    (also build .venv-vision and run the vision recipe)
set -uo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh dev || exit 1
vision_ready() { ls .venv-vision/.installed-* > /dev/null 2>&1; }
if [ "${FASTACCUM_VISION:-0}" = 1 ]; then
  echo 'setting up .venv-vision (torch 2.14.1 and torchvision 0.29.1: about 6 GB the first time)'
  bash tools/setup_vision.sh > /dev/null 2>&1 || echo 'could not set up .venv-vision: the vision recipe will fail'
fi
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}   # this checkout's library, wherever .venv's install points
export OMP_NUM_THREADS=1   # one thread a notebook: two notebooks at once on two cores, not two threads each fighting
passed=0; failed=0; skipped=0; log=$(mktemp); t0=$SECONDS
result() {   # name, status (0 pass, 77 skip, else fail), and `shown` when its output was printed as it came
  if [ "$2" = 0 ]; then echo "PASS  $1"; passed=$((passed+1))
  elif [ "$2" = 77 ]; then echo "SKIP  $1: $(tail -1 "$log")"; skipped=$((skipped+1))
  else echo "FAIL  $1"; [ -n "${3:-}" ] || tail -40 "$log" | sed 's/^/      /'; failed=$((failed+1)); fi
}
check() { local name=$1; shift; "$@" > "$log" 2>&1; result "$name" $?; }

in_step() {   # nbdev's export and clean change nothing that git has
  .venv/bin/nbdev-export && .venv/bin/nbdev-clean || return 1
  if ! git rev-parse --is-inside-work-tree > /dev/null 2>&1; then echo 'not a git checkout: nothing to compare with'; return 77; fi
  git diff --exit-code --stat -- fastaccum nbs || { echo 'run nbdev-export and nbdev-clean, and commit (or stage) what they change'; return 1; }
}
check 'library and notebooks in step (nbdev-export, nbdev-clean, git diff)' in_step
check 'README in step with nbs/index.ipynb' .venv/bin/python tools/sync_readme.py --check

# the vision recipe, in its own environment, runs beside the pages (it waits on one core as often as they do)
start=$SECONDS
vlog=$(mktemp)
if [ "${FASTACCUM_VISION:-0}" = 1 ] || vision_ready; then
  (bash tools/test_vision.sh > "$vlog" 2>&1; echo $? > "$vlog.rc") &
else
  echo 'needs .venv-vision (torch 2.14.1 and torchvision 0.29.1, about 6 GB): FASTACCUM_VISION=1 bash tools/test.sh' > "$vlog"
  echo 77 > "$vlog.rc"; (true) &
fi
vision=$!

# each page once: its run (hidden tests included) is its notebook's test and gives the site its outputs, its visible
# examples run in a fresh kernel beside it, and the notebooks the site does not show (nbs/tests/, nbs/internals/)
# with nbdev's runner: two at a time, each reported as it ends; then the site is built and checked in Chromium
# (bash tools/docs.sh --check --tests). What is unchanged since it passed is not run again.
bash tools/docs.sh --check --tests 2>&1 | tee "$log" | sed -u '/^\(PASS\|FAIL\|SKIP\)  /!s/^/      /'
docs=${PIPESTATUS[0]}
passed=$((passed + $(grep -c '^PASS  ' "$log"))); failed=$((failed + $(grep -c '^FAIL  ' "$log"))); skipped=$((skipped + $(grep -c '^SKIP  ' "$log")))
if [ "$docs" != 0 ] && [ "$docs" != 77 ] && ! grep -q '^FAIL  ' "$log"; then echo "FAIL  bash tools/docs.sh --check --tests (exit status $docs: above)"; failed=$((failed+1)); fi

wait $vision; cp "$vlog" "$log"; result 'vision recipe, in its own environment (.venv-vision)' "$(cat "$vlog.rc")"; rm -f "$vlog" "$vlog.rc"
rm -f "$log"
echo "(tests, after set-up: $((SECONDS-t0)) s)"
echo "$passed passed, $failed failed$( [ $skipped -gt 0 ] && echo ", $skipped skipped")"
[ $failed = 0 ]
