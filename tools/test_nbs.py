"""Every notebook's tests with nbdev's runner (as `nbdev-test` runs them), two at a time, printing each notebook's
result as it ends: `PASS  nbs/x.ipynb (12 s)`, or `FAIL  nbs/x.ipynb (12 s)` and the end of its error.
    python tools/test_nbs.py [--flags 'cuda ...'] [NB ...]     (default: every notebook nbdev-test would run)
Exit status 1 when one failed."""
import argparse, io, os, sys
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from nbdev.config import get_config
from nbdev.doclinks import nbglob
from nbdev.test import test_nb, _keep_file


def run(nb, skip, force, basepath):
    "One notebook's tests: (passed, seconds, what it wrote to stderr)"
    err, sys.__stderr__ = sys.__stderr__, io.StringIO()   # nbdev writes a failure's traceback there
    try: ok, secs = test_nb(nb, skip_flags=skip, force_flags=force, basepath=basepath, cell_timeout=600)
    except Exception as e: ok, secs = False, 0; sys.__stderr__.write(f'{type(e).__name__}: {e}')
    finally: out, sys.__stderr__ = sys.__stderr__.getvalue(), err
    return ok, secs, out


if __name__ == '__main__':
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--flags', default='', help="flags of cells to run that are normally skipped, e.g. 'cuda'")
    ap.add_argument('nbs', nargs='*')
    args = ap.parse_args()
    cfg = get_config()
    skip, force = cfg.tst_flags.split(), args.flags.split()
    files = [Path(f).absolute() for f in args.nbs] or \
            [f.absolute() for f in sorted(nbglob(cfg.nbs_path, as_path=True)) if _keep_file(f, '.notest')]
    import test_nbs   # `run` by its module's name: a notebook run in a worker replaces its `__main__`
    failed = 0
    with ProcessPoolExecutor(2) as pool:
        runs = {pool.submit(test_nbs.run, f, skip, force, cfg.config_path): f for f in files}
        for done in as_completed(runs):
            ok, secs, out = done.result()
            print(f'{"PASS" if ok else "FAIL"}  {os.path.relpath(runs[done], cfg.config_path)} ({secs:.0f} s)', flush=True)
            if not ok:
                failed += 1
                print('\n'.join('      ' + l for l in out.strip().splitlines()[-25:]), flush=True)
    sys.exit(1 if failed else 0)
