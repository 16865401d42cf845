"""Run what the site and the tests need, each page once, two jobs at a time, each reported as it ends:
  - every staged page (`_pages/*.ipynb`, hidden test cells included) whose code is not in the jupyter-cache at CACHE
    yet: that run is the notebook's test (`PASS  nbs/10_accumulate.ipynb (41 s)`, or `FAIL ...` and the end of its
    traceback) and gives the site its outputs (Sphinx with myst-nb, `nb_execution_mode = 'cache'`, takes them from
    the cache);
  - the examples a page shows (its visible code cells, in order, in a fresh kernel): proof that they run from what
    the page shows, recorded for the site check (tools/check_site.py) in CACHE/examples-passed.json. Where the page's
    own run ran exactly those cells first, before any hidden one, that run is the proof and they are not run again;
  - with --tests, the notebooks the site does not show (nbs/tests/, nbs/internals/), with nbdev's runner as
    tools/test_nbs.py runs them; a notebook that passed is not run again while it and the library are unchanged
    (CACHE/notebooks-passed.json: CACHE is named after the library).
Nothing runs twice while nothing changed: a second run with nothing changed only reads the cache (`cached` lines).
The longest jobs start first (durations of earlier runs: .jupyter_cache/durations.json); while jobs run, a line
every 30 s says which.
    python docs/run_pages.py CACHE [--tests]       exit status 1 when a page, its examples or a notebook failed
Why not `jcache project execute -e local-parallel`: it hands its workers the pages in fixed chunks of three, so one
worker can be left running the two slowest pages in turn while the other idles; here a worker takes the next job as
soon as it is free.
"""
import hashlib, json, logging, os, sys, threading, time
from concurrent.futures import ProcessPoolExecutor, FIRST_COMPLETED, wait
from pathlib import Path

root = Path(__file__).resolve().parent.parent
TIMEOUT = 900   # seconds a cell may take, as docs/conf.py's nb_execution_timeout
TICK = 30       # seconds between progress lines while jobs run
DURATIONS = root/'.jupyter_cache'/'durations.json'
HIDDEN_TAGS = {'remove-input', 'remove-cell'}


def _tail(text, n=25): return '\n'.join('      ' + l for l in str(text).strip().splitlines()[-n:])


def run_page(cache_path, uri):
    "Run one page into the cache: (passed, seconds, its traceback)"
    from jupyter_cache import get_cache
    from jupyter_cache.executors import load_executor
    start, quiet = time.time(), logging.getLogger('run_pages')
    quiet.setLevel(logging.ERROR)
    cache = get_cache(cache_path)
    result = load_executor('local-serial', cache, logger=quiet).run_and_cache(filter_uris=[uri], timeout=TIMEOUT)
    tb = '' if result.succeeded else (cache.get_project_record(uri).traceback or 'failed (no traceback recorded)')
    return bool(result.succeeded), time.time() - start, tb


def run_examples(cells, kernel, cwd):
    "Run `cells` in order in a fresh kernel: (passed, seconds, which one failed and how)"
    import nbformat
    from nbclient import NotebookClient
    start = time.time()
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    try: NotebookClient(nb, timeout=TIMEOUT, kernel_name=kernel, resources={'metadata': {'path': str(cwd)}},
                        extra_arguments=['--IPKernelApp.log_level=ERROR']).execute()
    except Exception as e:
        i = next((i for i, c in enumerate(nb.cells) if c.get('execution_count') is None or
                  any(o.output_type == 'error' for o in c.outputs)), len(cells) - 1)
        why = f'{e.ename}: {e.evalue}' if hasattr(e, 'ename') else f'{type(e).__name__}: {str(e).splitlines()[0]}'
        return False, time.time() - start, (f'example {i+1} of {len(cells)} does not run from what the page shows: '
                                             f'{why[:200]} (in `{cells[i].strip().splitlines()[0][:60]}`)')
    return True, time.time() - start, ''


def run_notebook(path):
    "One notebook's tests with nbdev's runner, as tools/test_nbs.py runs them: (passed, seconds, its error)"
    sys.path.insert(0, str(root/'tools'))
    from nbdev.config import get_config
    import test_nbs
    cfg = get_config()
    return test_nbs.run(path, cfg.tst_flags.split(), [], cfg.config_path)


def examples(staged):
    "A staged page's examples, (visible code cells in order, their kernel), and whether its own run runs them first"
    nb = json.loads(staged.read_text())
    run = [c for c in nb['cells'] if c['cell_type'] == 'code' and 'skip-execution' not in c['metadata'].get('tags', [])]
    shown = [''.join(c['source']).strip() for c in run if not HIDDEN_TAGS & set(c['metadata'].get('tags', []))]
    vision = any('vision' in c['metadata'].get('tags', []) for c in run
                 if not HIDDEN_TAGS & set(c['metadata'].get('tags', [])))
    first = [''.join(c['source']).strip() for c in run[:len(shown)]]
    return shown, ('fastaccum-vision' if vision else 'python3'), first == shown


def example_key(cells, kernel):
    "The record's key of a page's examples (tools/check_site.py computes it from the built page)"
    return hashlib.sha1(json.dumps([[c.strip() for c in cells], kernel]).encode()).hexdigest()


def notebook_key(path, cache_path):
    return hashlib.sha1(Path(cache_path).name.encode() + Path(path).read_bytes()).hexdigest()


def not_on_site():
    "The notebooks nbdev-test runs that the site does not show"
    from nbdev.config import get_config
    from nbdev.doclinks import nbglob
    from nbdev.test import _keep_file
    sys.path.insert(0, str(root/'docs'))
    from pages import sidebar
    cfg, shown = get_config(), {root/'nbs'/nb for _, nb in sidebar()}
    return [f.absolute() for f in sorted(nbglob(cfg.nbs_path, as_path=True))
            if _keep_file(f, '.notest') and f.absolute() not in shown]


def load(path, empty):
    try: return json.loads(Path(path).read_text())
    except (OSError, ValueError): return empty


def main(cache_path, tests):
    from jupyter_cache import get_cache
    sys.path.insert(0, str(root/'docs'))
    from pages import sidebar, page
    import run_pages as rp   # jobs by their module's name: a notebook run in a worker replaces its `__main__`
    notebook_of = {page(nb): f'nbs/{nb}' for _, nb in sidebar()}
    cache = get_cache(cache_path)
    for record in cache.list_project_records(): cache.remove_nb_from_project(record.pk)   # the pages of this build only
    staged = sorted((root/'_pages').glob('*.ipynb'))
    for p in staged: cache.add_nb_to_project(str(p.resolve()))
    todo_pages = {r.uri for r in cache.list_unexecuted()}
    ex_record, nb_record = Path(cache_path)/'examples-passed.json', Path(cache_path)/'notebooks-passed.json'
    ex_passed, nb_passed, durations = set(load(ex_record, [])), set(load(nb_record, [])), load(DURATIONS, {})

    jobs, results = [], []   # jobs: (name shown, what it proves, function, args); results: (line, passed)
    def report(line, ok, detail=''):
        print(line + ('\n' + _tail(detail) if detail and not ok else ''), flush=True)
        results.append(ok)
    page_first = {}   # pages whose own run proves their examples: their examples' key, added when the page passes
    for p in staged:
        uri, name = str(p.resolve()), p.stem
        shown, kernel, first = examples(p)
        key = example_key(shown, kernel)
        if first and shown: page_first[name] = key
        if uri in todo_pages: jobs.append((notebook_of.get(name, name), ('page', name), rp.run_page, (cache_path, uri)))
        else: report(f'PASS  {notebook_of.get(name, name)} (cached: unchanged since its page ran)', True)
        if shown and not first and key not in ex_passed:
            jobs.append((f'examples of {name}.html', ('examples', key), rp.run_examples, (shown, kernel, root/'_pages')))
        elif shown and not first:
            report(f'PASS  examples of {name}.html ({len(shown)} cells; cached: they ran as shown)', True)
        if first and shown and uri not in todo_pages: ex_passed.add(key)
    if tests:
        for nb in not_on_site():
            rel, key = os.path.relpath(nb, root), notebook_key(nb, cache_path)
            if key in nb_passed: report(f'PASS  {rel} (cached: it and the library unchanged since it passed)', True)
            else: jobs.append((rel, ('notebook', key), rp.run_notebook, (nb,)))
    jobs.sort(key=lambda j: -durations.get(j[0], 60))
    print(f'running {len(jobs)} jobs, two at a time (the others are in the cache): expected about '
          f'{sum(durations.get(j[0], 60) for j in jobs) / 2 / 60:.0f} min from earlier runs', flush=True)

    running, t0, lock = {}, time.time(), threading.Lock()
    def ticker(stop):
        while not stop.wait(TICK):
            with lock: now = [f'{n} ({time.time() - s:.0f} s)' for n, s in running.values()]
            print(f'  ... {time.time() - t0:.0f} s: running {", ".join(now) or "nothing"}; '
                  f'{len(results)} done', flush=True)
    stop = threading.Event()
    threading.Thread(target=ticker, args=(stop,), daemon=True).start()
    # forked workers, as tools/test_nbs.py's: a notebook's own loaders then fork their workers too (a spawned worker
    # would have them spawn, and fastai's transforms cannot be pickled)
    with ProcessPoolExecutor(2) as pool:
        pending, queue = set(), list(jobs)
        def submit():
            name, what, fn, args = queue.pop(0)
            f = pool.submit(fn, *args)
            with lock: running[f] = (name, time.time())
            pending.add(f); futures[f] = (name, what)
        futures = {}
        while queue and len(pending) < 2: submit()
        while pending:
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for f in done:
                pending.discard(f)
                with lock: running.pop(f, None)
                (name, (kind, key)), = [futures.pop(f)]
                try: ok, secs, detail = f.result()
                except Exception as e: ok, secs, detail = False, 0, f'{type(e).__name__}: {e}'
                durations[name] = round(secs)
                if kind == 'examples' and ok: ex_passed.add(key)
                if kind == 'notebook' and ok: nb_passed.add(key)
                if kind == 'page' and ok and key in page_first: ex_passed.add(page_first[key])
                what = {'page': ': its page, hidden tests included',
                        'examples': ': the visible cells, in a fresh kernel'}.get(kind, '')
                report(f'{"PASS" if ok else "FAIL"}  {name} ({secs:.0f} s{what})', ok, detail)
                if queue: submit()
    stop.set()
    ex_record.write_text(json.dumps(sorted(ex_passed))); nb_record.write_text(json.dumps(sorted(nb_passed)))
    DURATIONS.parent.mkdir(exist_ok=True); DURATIONS.write_text(json.dumps(durations, indent=1, sort_keys=True))
    print(f'ran {len(jobs)} jobs in {time.time() - t0:.0f} s: {results.count(True)} passed, '
          f'{results.count(False)} failed', flush=True)
    return all(results)


if __name__ == '__main__':
    sys.exit(0 if main(sys.argv[1], '--tests' in sys.argv[2:]) else 1)
