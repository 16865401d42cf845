#!/usr/bin/env bash
# The whole test suite (set up first, idempotently): the library and README in step with the notebooks, every
# notebook with nbdev's test runner, the vision recipe in its own environment, and the rendered docs in headless
# Chromium. Ends with `N passed, N failed` (every notebook and every check counts one).
# Usage: bash tools/test.sh        (CUDA cells: .venv/bin/nbdev-test --flags cuda, on a machine with a GPU)
set -uo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh dev || exit 1
bash tools/setup_vision.sh > /dev/null 2>&1 || echo 'could not set up .venv-vision: the vision recipe will fail'
export OMP_NUM_THREADS=1   # one thread a notebook: two notebooks at once on two cores, not two threads each fighting
passed=0; failed=0; skipped=0; log=$(mktemp); t0=$SECONDS
result() {   # name, status (0 pass, 77 skip, else fail)
  if [ "$2" = 0 ]; then echo "PASS  $1"; passed=$((passed+1))
  elif [ "$2" = 77 ]; then echo "SKIP  $1: $(tail -1 "$log")"; skipped=$((skipped+1))
  else echo "FAIL  $1"; tail -40 "$log" | sed 's/^/      /'; failed=$((failed+1)); fi
}
check() { local name=$1; shift; "$@" > "$log" 2>&1; result "$name" $?; }

in_step() {   # nbdev's export and clean change nothing that git has
  .venv/bin/nbdev-export && .venv/bin/nbdev-clean || return 1
  if ! git rev-parse --is-inside-work-tree > /dev/null 2>&1; then echo 'not a git checkout: nothing to compare with'; return 77; fi
  git diff --exit-code --stat -- fastaccum nbs || { echo 'run nbdev-export and nbdev-clean, and commit (or stage) what they change'; return 1; }
}
check 'library and notebooks in step (nbdev-export, nbdev-clean, git diff)' in_step
check 'README in step with nbs/index.ipynb' .venv/bin/python tools/sync_readme.py --check

# the vision recipe, in its own environment, runs beside the notebooks (it waits on one core as often as they do)
start=$SECONDS
vlog=$(mktemp); (bash tools/test_vision.sh > "$vlog" 2>&1; echo $? > "$vlog.rc") &
vision=$!

# every notebook: nbdev's runner, two at a time; it names the notebooks that fail
.venv/bin/nbdev-test --n-workers 2 > "$log" 2>&1
notebooks=$(find nbs -name '*.ipynb' -not -path '*/.*' -not -name '_*' | sort)
for nb in $notebooks; do
  if grep -q "^[[:space:]]*$(basename "$nb")\$" <(sed -n '/Failed On The Following Notebooks/,$p' "$log"); then
    echo "FAIL  $nb"; failed=$((failed+1))
  else echo "PASS  $nb"; passed=$((passed+1)); fi
done
grep -q 'Failed On The Following' "$log" && sed -n '/Error in\|Exception in\|Error:/,+25p' "$log" | head -80 | sed 's/^/      /'

wait $vision; cp "$vlog" "$log"; result 'vision recipe, in its own environment (.venv-vision)' "$(cat "$vlog.rc")"; rm -f "$vlog" "$vlog.rc"
echo "      (notebooks and vision: $((SECONDS-start)) s)"
check 'docs site: rendered, and opened in headless Chromium' bash tools/docs.sh --check
rm -f "$log"
echo "(tests, after set-up: $((SECONDS-t0)) s)"
echo "$passed passed, $failed failed$( [ $skipped -gt 0 ] && echo ", $skipped skipped")"
[ $failed = 0 ]
