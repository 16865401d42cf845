"""The whole test suite: every notebook under nbs/ run by nbdev's test runner (`nbdev-test`), plus
three checks that the generated files are in step with the notebooks. Ends with `N passed, N failed`.

Usage: python tools/run_tests.py [--flags FLAGS] [NOTEBOOK ...]   (FLAGS e.g. `cuda` on a GPU machine)
"""
import argparse, shutil, subprocess, sys, tempfile, time, filecmp
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

root = Path(__file__).resolve().parent.parent
bin_ = Path(sys.executable).parent

def run(cmd, **kw): return subprocess.run(cmd, capture_output=True, text=True, **kw)

def differing(a, b):
    "Files that differ between two directory trees (ignoring caches)"
    cmp = filecmp.dircmp(a, b, ignore=['__pycache__', '.ipynb_checkpoints'])
    out = [str(Path(a)/f) for f in cmp.left_only + cmp.right_only + cmp.diff_files]
    for sub in cmp.common_dirs: out += differing(Path(a)/sub, Path(b)/sub)
    return out

def check_generated():
    "nbdev-export and nbdev-clean, run on a copy, must change nothing: the library and notebooks are in step"
    with tempfile.TemporaryDirectory() as tmp:
        for p in ('pyproject.toml', 'nbs', 'fastaccum'):
            src = root/p
            (shutil.copytree if src.is_dir() else shutil.copy)(src, Path(tmp)/p)
        for tool in ('nbdev-export', 'nbdev-clean'):
            r = run([str(bin_/tool)], cwd=tmp)
            if r.returncode: return False, r.stdout + r.stderr
        diff = [d.replace(tmp, '.') for d in differing(Path(tmp)/'fastaccum', root/'fastaccum') + differing(Path(tmp)/'nbs', root/'nbs')]
        return not diff, 'out of step (run nbdev-export and nbdev-clean): ' + ', '.join(diff)

def check_readme():
    r = run([sys.executable, str(root/'tools'/'sync_readme.py'), '--check'])
    return r.returncode == 0, r.stdout

def check_docs_site():
    "The rendered docs, opened in headless Chromium: API sections, plots, no errors (skips without Chromium)"
    r = run([sys.executable, str(root/'tools'/'render_docs.py'), '--check'])
    out = (r.stdout + r.stderr)[-3000:]
    return (None if 'SKIP' in r.stdout else r.returncode == 0), out

def test_notebook(nb, flags):
    t0 = time.time()
    cmd = [str(bin_/'nbdev-test'), str(nb)] + (['--flags', flags] if flags else [])
    r = run(cmd, cwd=root)
    return r.returncode == 0 and 'Success' in r.stdout, (r.stdout + r.stderr)[-6000:], time.time() - t0

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--flags', default='')
    ap.add_argument('notebooks', nargs='*')
    args = ap.parse_args()
    nbs = [Path(n).resolve() for n in args.notebooks] or sorted((root/'nbs').glob('*.ipynb'))
    results = []
    for name, check in (('library and notebooks in step', check_generated), ('README in step with index', check_readme)):
        ok, out = check()
        print(f"{'PASS' if ok else 'FAIL'}  {name}" + ('' if ok else f'\n{out}'), flush=True)
        results.append(ok)
    if not args.notebooks:
        ok, out = check_docs_site()
        print(f"{ {True: 'PASS', False: 'FAIL', None: 'SKIP'}[ok]}  docs site in headless Chromium" + ('' if ok else f'\n{out.strip()}'), flush=True)
        results.append(ok)
    with ThreadPoolExecutor(2) as ex:
        for nb, (ok, out, secs) in zip(nbs, ex.map(lambda nb: test_notebook(nb, args.flags), nbs)):
            print(f"{'PASS' if ok else 'FAIL'}  {nb.relative_to(root)}  ({secs:.0f}s)" + ('' if ok else f'\n{out}'), flush=True)
            results.append(ok)
    n_pass,n_fail,n_skip = results.count(True),results.count(False),results.count(None)
    print(f'{n_pass} passed, {n_fail} failed' + (f', {n_skip} skipped' if n_skip else ''))
    sys.exit(1 if n_fail else 0)

if __name__ == '__main__': main()
