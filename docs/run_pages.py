"""Run the staged pages (`_pages/*.ipynb`) whose code is not in the jupyter-cache at CACHE yet, two at a time, naming
each as it ends: `  ran accumulate (41 s)`, or `  FAILED checkpoint (41 s)` (its traceback is shown on the page).
The build (Sphinx with myst-nb, `nb_execution_mode = 'cache'`) then takes every page's outputs from that cache.
    python docs/run_pages.py CACHE
Why not `jcache project execute -e local-parallel`: it hands its workers the pages in fixed chunks of three, so one
worker can be left running the two slowest pages in turn while the other idles; here a worker takes the next page as
soon as it is free.
"""
import logging, sys, time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from jupyter_cache import get_cache
from jupyter_cache.executors import load_executor

TIMEOUT = 900   # seconds a cell may take, as docs/conf.py's nb_execution_timeout

def run(cache_path, uri):
    "Run one page into the cache: (whether it ran without an error, seconds)"
    start, quiet = time.time(), logging.getLogger('run_pages')
    quiet.setLevel(logging.ERROR)
    result = load_executor('local-serial', get_cache(cache_path), logger=quiet).run_and_cache(filter_uris=[uri], timeout=TIMEOUT)
    return bool(result.succeeded), time.time() - start

if __name__ == '__main__':
    cache_path = sys.argv[1]
    cache = get_cache(cache_path)
    for record in cache.list_project_records(): cache.remove_nb_from_project(record.pk)   # the pages of this build only
    for page in sorted(Path('_pages').glob('*.ipynb')): cache.add_nb_to_project(str(page.resolve()))
    todo = [r.uri for r in cache.list_unexecuted()]
    print(f'running {len(todo)} of the pages (the others are in the cache)', flush=True)
    with ProcessPoolExecutor(2) as pool:
        for done in as_completed(runs := {pool.submit(run, cache_path, uri): uri for uri in todo}):
            ok, secs = done.result()
            print(f'  {"ran" if ok else "FAILED"} {Path(runs[done]).stem} ({secs:.0f} s)', flush=True)
