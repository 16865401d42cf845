"""What fastaccum adds to a fastai epoch, counted in CPU instructions (valgrind's callgrind), side by side in one run.

Why instructions: an epoch of the small MLP below takes a fifth of a second, and on a shared machine the same epoch
timed twice varies by about 5%, so wall-time ratios cannot resolve a 2% overhead (the overhead table of bench.py
gives their medians and quartiles). Callgrind counts the instructions the process executes, which do not depend on
the machine's load: the same epoch counted twice differs by well under 0.1%. Instructions are not time (a cache miss
costs more than an add), but on this CPU-bound, single-threaded MLP they follow it; read them as the work done.

How: one process under callgrind builds every configuration (`--copies` Learners of each: the same epoch counts up to
~0.25% apart from one Learner to another, a difference fixed per Learner, so a configuration's count is the median over
its Learners and rounds), runs each for a warm-up epoch, then runs `--rounds` rounds of one epoch of each (in a
rotating order), asking callgrind to write its counts before each measured epoch
(callgrind's client request CALLGRIND_DUMP_STATS, from a three-line C library this script compiles: Python cannot
issue it). Each epoch's instructions are the counts between two dumps. Run from the repository root (needs valgrind,
its header callgrind.h and a C compiler):

    .venv/bin/python bench/instructions.py              # writes bench/results/instructions.{json,md}
    .venv/bin/python bench/instructions.py --old DIR    # also the accumulation callback of another checkout (A/B)
"""
import argparse, ctypes, json, os, re, statistics, subprocess, sys, tempfile
from pathlib import Path

CONFIGS = {   # name: (loader batch, callbacks), built in the measured process
    'plain fastai': (16, 'none'),
    'a fastai Callback with no events': (16, 'empty'),
    'GradientAccumulation(16): a step per micro-batch': (16, 'ga16'),
    'GradientAccumulation(64): 4 micro-batches per step': (16, 'ga64'),
    "fastai's GradientAccumulation(64)": (16, 'fastai64'),
}
COMPARISONS = [   # (what, over what, the target the issues set, or None)
    ('GradientAccumulation(16): a step per micro-batch', 'plain fastai', 1.02),
    ('a fastai Callback with no events', 'plain fastai', None),
    ('GradientAccumulation(64): 4 micro-batches per step', "fastai's GradientAccumulation(64)", None),
]

def _callbacks(kind):
    from fastai.callback.core import Callback
    from fastai.callback.training import GradientAccumulation as FastaiAccumulation
    from fastaccum.accumulate import GradientAccumulation
    class Empty(Callback): "A callback that defines no event: what fastai's dispatch alone costs"
    return {'none': [], 'empty': [Empty()], 'ga16': [GradientAccumulation(16)], 'ga64': [GradientAccumulation(64)],
            'fastai64': [FastaiAccumulation(64)]}[kind]

def measure(rounds:int, out:Path, copies:int=3):
    "Inside callgrind: warm up each configuration, then one epoch of each per round, a marker before each"
    os.environ['OMP_NUM_THREADS'] = '1'
    import torch
    from torch import nn
    import torch.nn.functional as F
    from functools import partial
    from fastai.basics import Learner, DataLoaders, DataLoader, SGD
    torch.set_num_threads(1)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(1024, 64, generator=g); y = x[:, :10].argmax(1)
    ds = list(zip(x, y))
    def learner(bs, kind):
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))
        dls = DataLoaders(DataLoader(ds, bs=bs, shuffle=False), DataLoader(ds[:16], bs=16))
        return Learner(dls, model, loss_func=F.cross_entropy, opt_func=partial(SGD, mom=0.9), lr=0.01,
                       cbs=_callbacks(kind))
    # several Learners of each configuration: the same epoch costs a different count in each (up to ~0.25%, fixed per
    # Learner: where its objects lie in memory), so a configuration's count is the median over its Learners and rounds
    learners = {f'{name}#{k}': learner(*spec) for name,spec in CONFIGS.items() for k in range(copies)}
    def epoch(learn):
        with learn.no_bar(), learn.no_logging(): learn.fit(1)
    for learn in learners.values(): epoch(learn)   # warm-up: first calls, caches
    marker = ctypes.CDLL(str(out.parent/'dump.so')).dump   # callgrind writes its counts so far, and starts afresh
    order,names = [],list(learners)
    for r in range(rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            marker(); order.append(name); epoch(learners[name])
    marker()
    out.write_text(json.dumps(order))

_DUMP_C = '#include <valgrind/callgrind.h>\nvoid dump(void) { CALLGRIND_DUMP_STATS; }\n'

def _compile_dump(folder:Path):
    "The marker: a C function that issues callgrind's dump request"
    (folder/'dump.c').write_text(_DUMP_C)
    subprocess.run(['cc', '-O1', '-shared', '-fPIC', '-o', str(folder/'dump.so'), str(folder/'dump.c')], check=True)

def _counts(folder:Path)->list:
    "The instructions of each dump, in the order written (`cg.out.1`, `cg.out.2`, ...)"
    dumps = sorted(folder.glob('cg.out.*'), key=lambda p: int(p.suffix[1:]))
    return [int(re.search(r'^(?:summary|totals): (\d+)', p.read_text(errors='ignore'), re.M).group(1)) for p in dumps]

def run(rounds:int, pythonpath:str|None=None, copies:int=3)->dict:
    "Each configuration's instructions per epoch (the median over its Learners and rounds), in one process under callgrind"
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        _compile_dump(tmp)
        env = dict(os.environ, OMP_NUM_THREADS='1', PYTHONHASHSEED='0')   # (the same hashes, run after run)
        if pythonpath: env['PYTHONPATH'] = pythonpath
        cmd = ['valgrind', '--tool=callgrind', f'--callgrind-out-file={tmp}/cg.out',
               sys.executable, __file__, '--inner', str(tmp/'order.json'), '--rounds', str(rounds), '--copies', str(copies)]
        subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        order,counts = json.loads((tmp/'order.json').read_text()),_counts(tmp)
    # dump 1 is the set-up; dump k+1 ends the k-th measured epoch (the last marker ends the last one)
    per = {}
    for name,n in zip(order, counts[1:]): per.setdefault(name.split('#')[0], []).append(n)
    return {name: dict(median=statistics.median(v), spread=(max(v)-min(v))/statistics.median(v), rounds=len(v))
            for name,v in per.items()}

def table(epochs:dict, old:dict|None=None)->list:
    rows = [dict(comparison=f'{a} / {b}', ratio=epochs[a]['median']/epochs[b]['median'], target=t)
            for a,b,t in COMPARISONS]
    if old:
        name = 'GradientAccumulation(16): a step per micro-batch'
        rows.append(dict(comparison=f'{name}: this checkout / the other checkout', target=None,
                         ratio=epochs[name]['median']/old[name]['median']))
        rows.append(dict(comparison='plain fastai: this process / the other process (a control)', target=None,
                         ratio=epochs['plain fastai']['median']/old['plain fastai']['median']))
    return rows

def main():
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    p.add_argument('--rounds', type=int, default=3, help='measured epochs of each configuration')
    p.add_argument('--copies', type=int, default=3, help='Learners of each configuration (each measured every round)')
    p.add_argument('--old', help='another checkout (its folder): its callback counted too, for an A/B')
    p.add_argument('--inner', help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.inner: return measure(args.rounds, Path(args.inner), args.copies)
    epochs = run(args.rounds, copies=args.copies)
    old = run(args.rounds, str(Path(args.old).resolve()), args.copies) if args.old else None
    rows = table(epochs, old)
    results = dict(setup='one process under valgrind 3 (callgrind), 1 thread; MLP 64-64-10, 1024 samples, loader '
                         f'batches of 16 (64 micro-batches an epoch), SGD; {args.copies} Learners of each, {args.rounds} rounds',
                   epochs=epochs, old=old, comparisons=rows)
    out = Path('bench/results'); out.mkdir(parents=True, exist_ok=True)
    (out/'instructions.json').write_text(json.dumps(results, indent=1))
    lines = ['| configuration | instructions per epoch (median) | spread over Learners and rounds |', '|---|---|---|']
    lines += [f"| {k} | {v['median']/1e6:.1f} M | {v['spread']:.2%} |" for k,v in epochs.items()]
    lines += ['', '| comparison | ratio | target |', '|---|---|---|']
    lines += [f"| {r['comparison']} | {r['ratio']:.4f} | {'' if r['target'] is None else r['target']} |" for r in rows]
    (out/'instructions.md').write_text('\n'.join(lines) + '\n')
    print('\n'.join(lines))

if __name__ == '__main__': main()
