"""The cost of `GradientAccumulation(batchnorm='window')` (issue 26): a training epoch of the vision recipe's ResNet-18
(nbs/03_vision.ipynb: `vision_learner(..., resnet18, pretrained=False)`, digits as 32x32 images, micro-batches of 16,
`accum_bs` 128), on the CPU with one thread, with the window's running statistics (`'window'`) against PyTorch's
per-micro-batch update (`'micro'`).

Not part of the package. Run it in the vision environment, from the repository root:

    bash tools/setup_vision.sh && PYTHONPATH=$PWD .venv-vision/bin/python bench/batchnorm_cost.py [--rounds 12]

It writes `bench/batchnorm_cost.md` and `bench/batchnorm_cost.json` (which the benchmarks page shows). Three
learners are built once (`'window'`, `'micro'`, and a second `'micro'` whose ratio to the first shows the noise
of a ratio of equal work), each warmed up with one epoch, then timed in rounds of one epoch each, in each of the
six orders in turn (so that no learner runs first more often than another); the result is the median and
quartiles of the rounds' ratios (`'window'` over the geometric mean of the two `'micro'` learners, and the
control, one `'micro'` over the other), which cancels most of the drift of a shared machine. The time is the
process's CPU time, not the wall clock: with one thread it is the epoch's own work, much steadier on a machine
shared with other jobs. Only the training phase of the epoch is timed (validation runs in eval mode, where the
two do the same work), so the ratio is the larger one a whole epoch could show.

Epochs timed side by side differ by a few percent from round to round on a shared machine, more than the cost
itself. So the cost is also accounted for directly: one more epoch with `'window'` in which every call of
`WindowBatchNorm`'s methods (its two hooks on each layer, and its work at each micro-batch's end
and each step) is timed in the same CPU time, plus the cost of calling a module that has two hooks rather than
none (PyTorch's slower call path), measured on its own and multiplied by the hooked calls of the epoch. That
sum, over the training phase's time, is the direct cost of `'window'`, resolved well below the rounds' noise: an
upper bound, as it includes the timer's own calls and does not credit the running-statistics update that
`'window'` takes out of PyTorch's kernel.
"""
from __future__ import annotations
import argparse, itertools, json, math, os, platform, statistics, sys, tempfile, time, warnings
from pathlib import Path

os.environ.setdefault('OMP_NUM_THREADS', '1')
import torch
torch.set_num_threads(1)
from sklearn.datasets import load_digits
with warnings.catch_warnings():
    warnings.filterwarnings('ignore', message='`torch.jit.script` is deprecated', category=FutureWarning)
    from fastai.vision.all import *
from fastaccum.all import *   # after fastai's star import, which brings fastai's own GradientAccumulation
from fastaccum.batchnorm import WindowBatchNorm

root = Path(__file__).resolve().parent.parent
out,out_json = root/'bench'/'batchnorm_cost.md',root/'bench'/'batchnorm_cost.json'


def digits_folder()->Path:
    "The vision recipe's data: scikit-learn's 8x8 digits as 32x32 RGB images, saved by class"
    images,labels = load_digits(return_X_y=True)
    folder = Path(tempfile.mkdtemp())
    for i,(pixels,label) in enumerate(zip(images, labels)):
        (folder/str(label)).mkdir(exist_ok=True)
        img = PILImage.create((pixels.reshape(8, 8)*255/16).astype('uint8')).resize((32, 32)).convert('RGB')
        img.save(folder/str(label)/f'{i}.png')
    return folder


class TrainTime(Callback):
    "The CPU seconds of each epoch's training phase (no validation): on a shared machine, steadier than the wall clock"
    order = 100
    def before_fit(self): self.times = []
    def before_train(self): self.start = time.process_time()
    def after_train(self): self.times.append(time.process_time() - self.start)


def learner(dls, batchnorm:str):
    "The recipe's ResNet-18, all of it trained, with accumulation of micro-batches of 16 into windows of 128"
    set_seed(0)
    learn = vision_learner(dls, resnet18, pretrained=False, metrics=accuracy,
                           cbs=[GradientAccumulation(128, batchnorm=batchnorm, warn_batchnorm=False), TrainTime()])
    learn.unfreeze()
    return learn


def epoch(learn)->float:
    "One epoch (training and validation); the seconds of its training phase"
    with learn.no_bar(), learn.no_logging(): learn.fit(1, 1e-3)
    return learn.train_time.times[-1]


PART_METHODS = ('_before', '_after', 'micro_batch_ended', 'new_piece', 'window_closed', 'window_dropped')

class PartTimer(Callback):
    "Times every call of `WindowBatchNorm`'s methods during the training phase (CPU seconds of the process, as `TrainTime`), and counts them"
    order = 100
    def __init__(self):
        self.originals,self.on,self.depth = {},False,0
        self.reset()
        for name in PART_METHODS: self.originals[name] = getattr(WindowBatchNorm, name); setattr(WindowBatchNorm, name, self._timed(name))
    def _timed(self, name):
        original,clock = self.originals.get(name) or getattr(WindowBatchNorm, name),time.process_time
        def timed(*args, **kwargs):
            if not self.on or self.depth: return original(*args, **kwargs)   # (a call inside another is in the outer one's time)
            start,self.depth = clock(),1
            try: return original(*args, **kwargs)
            finally: self.seconds[name] += clock() - start; self.calls[name] += 1; self.depth = 0
        return timed
    def reset(self): self.seconds,self.calls = dict.fromkeys(PART_METHODS, 0.),dict.fromkeys(PART_METHODS, 0)
    def before_train(self): self.on = True
    def after_train(self): self.on = False
    def restore(self):
        for name,f in self.originals.items(): setattr(WindowBatchNorm, name, f)


def hook_dispatch_seconds(blocks:int=30, calls:int=2000)->float:
    "The extra CPU seconds of one call of a module with a forward pre-hook and a forward hook (both doing nothing) over one without"
    x,plain,hooked = torch.randn(2, 4),nn.Identity(),nn.Identity()
    hooked.register_forward_pre_hook(lambda m, args: None)
    hooked.register_forward_hook(lambda m, args, out: None, always_call=True)
    extra = []
    for i in range(blocks):
        per_call = {}
        for name,module in ((('plain', plain), ('hooked', hooked)) if i%2 == 0 else (('hooked', hooked), ('plain', plain))):
            start = time.thread_time()
            for _ in range(calls): module(x)
            per_call[name] = (time.thread_time() - start)/calls
        extra.append(per_call['hooked'] - per_call['plain'])
    return statistics.median(extra)


def accounted(dls)->dict:
    "One timed epoch with `'window'`: its training phase's seconds, the part's own seconds by method, and the hooks' dispatch"
    timer = PartTimer()
    try:
        learn = learner(dls, 'window')
        learn.add_cb(timer)
        epoch(learn); timer.reset()   # warm-up, then the counted epoch
        train = epoch(learn)
    finally: timer.restore()
    dispatch = hook_dispatch_seconds()
    hooked_calls = timer.calls['_before']   # (each hooked forward calls both of its hooks)
    own = sum(timer.seconds.values())
    return dict(train_seconds=train, own_seconds=own, own_by_method={k:v for k,v in timer.seconds.items()}, calls=timer.calls,
                dispatch_seconds_per_call=dispatch, hooked_calls=hooked_calls, dispatch_seconds=dispatch*hooked_calls,
                share=(own + dispatch*hooked_calls)/train)


def main():
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    p.add_argument('--rounds', type=int, default=12, help='timed rounds of three epochs (a multiple of 6: each order as often)')
    args = p.parse_args()
    load_start = os.getloadavg()[0]
    dls = ImageDataLoaders.from_folder(digits_folder(), valid_pct=0.2, seed=0, bs=16, num_workers=0)
    learners = {bn:learner(dls, bn.split()[0]) for bn in ('window', 'micro', 'micro again')}   # the third: the noise of a ratio of equals
    orders = list(itertools.permutations(learners))
    n_bn = sum(isinstance(m, nn.modules.batchnorm._BatchNorm) for m in learners['window'].model.modules())
    for learn in learners.values(): epoch(learn)   # warm-up
    times = {bn:[] for bn in learners}
    for i in range(args.rounds):
        for bn in orders[i%len(orders)]: times[bn].append(epoch(learners[bn]))   # the six orders in turn
        print(f'round {i+1}: ' + ', '.join(f'{bn} {t[-1]:.2f} s' for bn,t in times.items()), flush=True)
    ratios = [w/math.sqrt(m*a) for w,m,a in zip(times['window'], times['micro'], times['micro again'])]
    control = [a/m for a,m in zip(times['micro again'], times['micro'])]
    def quartiles(r): return statistics.quantiles(r, n=4) if len(r) > 1 else r*3
    q1,med,q3 = quartiles(ratios)
    c1,cmed,c3 = quartiles(control)
    acc = accounted(dls)
    n_train,mb = len(dls.train_ds),acc['calls']['_before']//n_bn   # (fastai's training loader drops the last, partial batch)
    setup = (f'{platform.machine()}, {os.cpu_count()} cores (shared), load average {load_start:.1f} at the start and {os.getloadavg()[0]:.1f} '
             f'at the end; torch {torch.__version__}, Python {platform.python_version()}')
    by_method = ', '.join(f'{k} {v*1e3:.1f} ms ({acc["calls"][k]} calls)' for k,v in acc['own_by_method'].items() if acc['calls'][k])
    lines = [
        '# The cost of `batchnorm=\'window\'`',
        '',
        f'`bench/batchnorm_cost.py`: the training phase of one epoch of the vision recipe\'s ResNet-18 (`pretrained=False`, '
        f'unfrozen, {n_bn} BatchNorm layers), {n_train} training digits as 32x32 images ({mb} micro-batches of 16 an epoch), '
        f'`GradientAccumulation(128)`, on the CPU with one thread, timed in CPU seconds of the process.',
        '',
        '## What `\'window\'` adds, accounted for',
        '',
        f'One epoch with every call of `WindowBatchNorm`\'s methods timed, and the extra cost of calling a module with two hooks '
        '(an upper bound: it includes the timer\'s own calls):',
        '',
        '| | CPU milliseconds in the epoch | share of its training phase |',
        '|---|---|---|',
        f'| `WindowBatchNorm`\'s own work | {acc["own_seconds"]*1e3:.1f} | {acc["own_seconds"]/acc["train_seconds"]:.2%} |',
        f'| calling hooked modules ({acc["hooked_calls"]} calls x {acc["dispatch_seconds_per_call"]*1e6:.2f} us) | '
        f'{acc["dispatch_seconds"]*1e3:.1f} | {acc["dispatch_seconds"]/acc["train_seconds"]:.2%} |',
        f'| **total** | {(acc["own_seconds"] + acc["dispatch_seconds"])*1e3:.1f} | **{acc["share"]:.2%}** |',
        '',
        f'The training phase: {acc["train_seconds"]:.2f} s. By method: {by_method}.',
        '',
        '## Epochs timed side by side',
        '',
        f'{args.rounds} rounds of three epochs, `\'window\'`, `\'micro\'` and a second `\'micro\'` learner (the same work: '
        'its ratio is the noise of a ratio here), in each of the six orders in turn, after one warm-up epoch each:',
        '',
        '| | CPU seconds per epoch (median) | ratio: median | lower quartile | upper quartile |',
        '|---|---|---|---|---|',
        f'| `batchnorm=\'window\'` over both `\'micro\'` (geometric mean) | {statistics.median(times["window"]):.2f} | {med:.3f} | {q1:.3f} | {q3:.3f} |',
        f'| `batchnorm=\'micro\'` | {statistics.median(times["micro"]):.2f} | | | |',
        f'| control: `\'micro\'` again over `\'micro\'` | {statistics.median(times["micro again"]):.2f} | {cmed:.3f} | {c1:.3f} | {c3:.3f} |',
        '',
        f'Ratios of the rounds, `\'window\'` over both: {", ".join(f"{r:.3f}" for r in ratios)}; the control: '
        f'{", ".join(f"{r:.3f}" for r in control)}.',
        '',
        f'Target (issue 26): at most 3% of an epoch. Machine: {setup}.',
        '',
    ]
    out.write_text('\n'.join(lines))
    out_json.write_text(json.dumps(dict(accounted=acc, rounds=dict(seconds=times, ratios=ratios, median=med, lower_quartile=q1, upper_quartile=q3,
                                                                    control=control, control_median=cmed, control_lower_quartile=c1,
                                                                    control_upper_quartile=c3),
                                        batchnorm_layers=n_bn, train_samples=n_train, setup=setup), indent=1))
    print('\n'.join(lines))


if __name__ == '__main__': main()
