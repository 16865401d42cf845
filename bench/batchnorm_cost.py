"""The cost of `GradientAccumulation(batchnorm='window')` against `batchnorm='micro'` (issue 42): each BatchNorm
layer's kernel writes the micro-batch's statistics into the window's buffers, gathered per micro-batch by a few
operations on flat tensors of all the layers' channels.

Not part of the package. Run it from the repository root (a couple of minutes on the CPU, one thread):

    PYTHONPATH=$PWD .venv/bin/python bench/batchnorm_cost.py [--rounds 6]

It writes `bench/batchnorm_cost.md` and `bench/batchnorm_cost.json` (which the BatchNorm and benchmarks pages show).
The model is a ResNet-18 written here (torchvision's layout: 20 BatchNorm layers; the main environment's torchvision
does not load), on random 32x32 images, trained by a fastai `Learner` with `GradientAccumulation(128)` on
micro-batches of 16; and an MLP with 2 BatchNorm layers. Three figures:

1. the aten operations dispatched per training micro-batch by `'window'` beyond `'micro'` (`torch.profiler`, the
   operations called from Python: a `torch._foreach_*` call counts once), for both models: the same small number;
2. `WindowBatchNorm`'s Python time per micro-batch of the ResNet-18: every call of its methods and of the layers'
   `_check_input_dim` during training timed in CPU time (an upper bound: the timer's calls, and PyTorch's own check
   that `_check_input_dim` runs first, are in it);
3. epochs timed side by side: `'window'`, `'micro'` and a second `'micro'` learner (the same work: its ratio to the
   first is the noise of a ratio here), in each of the six orders in turn, in CPU time of the training phase.

With `--gpu` (on a machine with a GPU and torchvision) it times the epoch ratio instead on torchvision's ResNet-18 at
64 px and at 224 px, micro-batches of 32, `accum_bs=256`, in wall-clock time with the device synchronized, and
writes `bench/batchnorm_cost_gpu.md`/`.json`.
"""
from __future__ import annotations
import argparse, itertools, json, math, os, platform, statistics, time, timeit, warnings
import fastai
from pathlib import Path

os.environ.setdefault('OMP_NUM_THREADS', '1')
import torch
from fastai.basics import *
from fastaccum.all import *   # after fastai's star import, which brings fastai's own GradientAccumulation
import fastaccum.batchnorm as fbn
from torch.profiler import profile, ProfilerActivity

root = Path(__file__).resolve().parent.parent


def block(i:int, o:int, stride:int)->nn.Module:
    "torchvision's BasicBlock: two 3x3 convolutions, each with a BatchNorm layer; a 1x1 one on a changed shortcut"
    class Basic(nn.Module):
        def __init__(self):
            super().__init__()
            self.c1,self.b1 = nn.Conv2d(i, o, 3, stride, 1, bias=False),nn.BatchNorm2d(o)
            self.c2,self.b2 = nn.Conv2d(o, o, 3, 1, 1, bias=False),nn.BatchNorm2d(o)
            self.down = (nn.Sequential(nn.Conv2d(i, o, 1, stride, bias=False), nn.BatchNorm2d(o))
                         if stride != 1 or i != o else nn.Identity())
        def forward(self, x): return F.relu(self.b2(self.c2(F.relu(self.b1(self.c1(x))))) + self.down(x))
    return Basic()


def resnet18(classes:int=10)->nn.Module:
    "ResNet-18 as torchvision lays it out (20 BatchNorm layers)"
    stages = [block(64, 64, 1), block(64, 64, 1), block(64, 128, 2), block(128, 128, 1),
              block(128, 256, 2), block(256, 256, 1), block(256, 512, 2), block(512, 512, 1)]
    return nn.Sequential(nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(3, 2, 1),
                         *stages, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(512, classes))


def mlp(classes:int=10)->nn.Module:
    "An MLP with 2 BatchNorm layers, on the same images flattened"
    return nn.Sequential(nn.Flatten(), nn.Linear(3*32*32, 256), nn.BatchNorm1d(256), nn.ReLU(),
                         nn.Linear(256, 256), nn.BatchNorm1d(256), nn.ReLU(), nn.Linear(256, classes))


def data(n_train:int, size:int=32, bs:int=16, device=None)->DataLoaders:
    "Random images and labels (the cost does not depend on what they show); the training loader drops its last batch"
    g = torch.Generator().manual_seed(0)
    x,y = torch.randn(n_train + 2*bs, 3, size, size, generator=g),torch.randint(0, 10, (n_train + 2*bs,), generator=g)
    train,valid = list(zip(x[:n_train], y[:n_train])),list(zip(x[n_train:], y[n_train:]))
    return DataLoaders(DataLoader(train, bs=bs, shuffle=True, drop_last=True), DataLoader(valid, bs=bs), device=device)


class TrainTime(Callback):
    "The CPU seconds (or, on a GPU, the synchronized wall-clock seconds) of each epoch's training phase"
    order = 100
    def __init__(self, gpu=False): self.gpu = gpu
    def before_fit(self): self.times = []
    def _now(self):
        if self.gpu: torch.cuda.synchronize()
        return time.perf_counter() if self.gpu else time.process_time()
    def before_train(self): self.start = self._now()
    def after_train(self): self.times.append(self._now() - self.start)


def learner(dls, make, batchnorm:str, accum_bs:int=128, gpu:bool=False)->Learner:
    "A fresh model trained with accumulation into windows of `accum_bs` samples"
    set_seed(0)
    return Learner(dls, make(), loss_func=CrossEntropyLossFlat(), metrics=accuracy,
                   cbs=[GradientAccumulation(accum_bs, batchnorm=batchnorm, warn_batchnorm=False), TrainTime(gpu)])


def epoch(learn)->float:
    "One epoch (training and validation); the seconds of its training phase"
    with learn.no_bar(), learn.no_logging(): learn.fit(1, 1e-3)
    return learn.train_time.times[-1]


def aten_ops(run)->int:
    "The aten operations `run()` calls from Python (not those one calls, as a foreach's per tensor on the CPU)"
    with profile(activities=[ProfilerActivity.CPU]) as prof: run()
    return sum(e.name.startswith('aten::') and e.cpu_parent is None for e in prof.events())


def ops_per_micro_batch(dls, make, name:str)->dict:
    "Aten operations of a training epoch (and its validation) with `'window'` and `'micro'`, and the difference"
    n_bn = sum(isinstance(m, nn.modules.batchnorm._BatchNorm) for m in make().modules())
    counts = {}
    for bn in ('window', 'micro'):
        learn = learner(dls, make, bn)
        epoch(learn)   # (warm-up)
        counts[bn] = aten_ops(lambda: epoch(learn))
    mbs = len(dls.train)
    return dict(model=name, batchnorm_layers=n_bn, micro_batches=mbs, **counts,
                extra_per_micro_batch=(counts['window'] - counts['micro'])/mbs)


METHODS = ('micro_batch_done', 'new_piece', 'window_closed', 'window_dropped', '_before', '_after')

class PythonTimer(Callback):
    "Times every call of `WindowBatchNorm`'s methods and of the layers' `_check_input_dim` during training (CPU time)"
    order = 100
    def __init__(self, module=fbn, only:tuple=()):
        "`module`'s `WindowBatchNorm` methods and `_check_input_dim`; or `only` these (owner, name) pairs"
        self.on,self.seconds,self.calls,self.originals = False,{},{},{}
        for owner,name in only: self._wrap(owner, name)
        if only: return
        for name in METHODS:   # (`_before` and `_after`: the hooks of the version before this one, for `--old`)
            if hasattr(module.WindowBatchNorm, name): self._wrap(module.WindowBatchNorm, name)
        for name in ('_watched_check', '_check_input_dim'):   # (the layers' own check: its name now, or before)
            if hasattr(module, name): self._wrap(module, name, '_check_input_dim')
    def _wrap(self, owner, name, label=None):
        label = label or name
        f = getattr(owner, name)
        self.originals[label],self.seconds[label],self.calls[label] = (owner, name, f),0.,0
        def timed(*args, **kwargs):
            if not self.on: return f(*args, **kwargs)
            start = time.process_time()
            try: return f(*args, **kwargs)
            finally: self.seconds[label] += time.process_time() - start; self.calls[label] += 1
        setattr(owner, name, timed)
    def before_train(self): self.on = True
    def after_train(self): self.on = False
    def restore(self):
        for owner,name,f in self.originals.values(): setattr(owner, name, f)


def python_time(dls, module=fbn, batchnorm:str='window', only:tuple=())->dict:
    "One timed training epoch of the ResNet-18 with `'window'`: the Python seconds of `WindowBatchNorm` per micro-batch"
    timer = PythonTimer(module, only)
    try:
        learn = learner(dls, resnet18, batchnorm)
        learn.add_cb(timer)
        epoch(learn)
        for name in timer.seconds: timer.seconds[name],timer.calls[name] = 0.,0
        train = epoch(learn)
    finally: timer.restore()
    own,mbs = sum(timer.seconds.values()),len(dls.train)
    return dict(train_seconds=train, own_seconds=own, micro_batches=mbs, per_micro_batch_ms=own/mbs*1e3,
                by_method_ms={k: v*1e3 for k,v in timer.seconds.items()}, calls=timer.calls)


def best_seconds(f, number:int)->float:
    "The least CPU seconds of one call of `f`, over 5 runs of `number` calls (the machine's other work left out)"
    return min(timeit.repeat(f, number=number, repeat=5, timer=time.thread_time))/number


def python_alone(micro_batches_per_window:int=8)->dict:
    """`WindowBatchNorm`'s Python time per micro-batch of the ResNet-18, each part timed alone in a loop: what a
    watched layer's `_check_input_dim` adds to PyTorch's (per layer and forward), `micro_batch_done`, `window_closed`"""
    model,x = resnet18(),torch.randn(16, 3, 32, 32)
    wbn = fbn.WindowBatchNorm(model)
    model(x)
    counts,n_layers = list(wbn._n[0]),len(wbn.layers)
    def ended():   # (the state a forward leaves: each layer called once, with its counts)
        wbn._calls,wbn._n[0] = [1]*n_layers,list(counts)
        wbn.micro_batch_done(True)
    layer,calls = wbn.layers[5],wbn._calls
    xb = torch.randn(16, layer.num_features, 8, 8)
    def watched(): calls[5] = 0; layer._check_input_dim(xb)
    def plain(): calls[5] = 0; type(layer)._check_input_dim(layer, xb)
    check = best_seconds(watched, 20000) - best_seconds(plain, 20000)
    done = best_seconds(ended, 500)
    closed = best_seconds(lambda: (ended(), wbn.window_closed()), 500) - done
    wbn.remove()
    per_mb = n_layers*check + done + closed/micro_batches_per_window
    return dict(check_extra_us=check*1e6, micro_batch_done_us=done*1e6, window_closed_us=closed*1e6,
                layers=n_layers, micro_batches_per_window=micro_batches_per_window, per_micro_batch_ms=per_mb*1e3)


def old_version(rev:str):
    "The `fastaccum.batchnorm` of git revision `rev`, made the one `GradientAccumulation` uses"
    import importlib.util, subprocess, tempfile, fastaccum.accumulate as acc
    path = Path(tempfile.mkdtemp())/'batchnorm_old.py'
    path.write_text(subprocess.run(['git', 'show', f'{rev}:fastaccum/batchnorm.py'], cwd=root, check=True,
                                   capture_output=True, text=True).stdout)
    spec = importlib.util.spec_from_file_location('fastaccum.batchnorm_old', path)
    old = importlib.util.module_from_spec(spec); spec.loader.exec_module(old)
    acc.fit_batchnorm,acc.WindowBatchNorm = old.fit_batchnorm,old.WindowBatchNorm
    return old


def side_by_side(dls, make, rounds:int, gpu:bool=False, accum_bs:int=128)->dict:
    "Epochs of `'window'`, `'micro'` and `'micro'` again, in the six orders in turn: the ratios' median and quartiles"
    learners = {bn: learner(dls, make, bn.split()[0], accum_bs, gpu) for bn in ('window', 'micro', 'micro again')}
    orders = list(itertools.permutations(learners))
    for learn in learners.values(): epoch(learn)   # warm-up
    times = {bn: [] for bn in learners}
    for i in range(rounds):
        for bn in orders[i % len(orders)]: times[bn].append(epoch(learners[bn]))
        print(f'round {i+1}: ' + ', '.join(f'{bn} {t[-1]:.2f} s' for bn,t in times.items()), flush=True)
    ratios = [w/math.sqrt(m*a) for w,m,a in zip(times['window'], times['micro'], times['micro again'])]
    control = [a/m for a,m in zip(times['micro again'], times['micro'])]
    def quartiles(r): return statistics.quantiles(r, n=4, method='inclusive') if len(r) > 1 else r*3
    (q1,med,q3),(c1,cmed,c3) = quartiles(ratios),quartiles(control)
    return dict(seconds=times, ratios=ratios, median=med, lower_quartile=q1, upper_quartile=q3, control=control,
                control_median=cmed, control_lower_quartile=c1, control_upper_quartile=c3)


def setup_line(start_load:float)->str:
    return (f'{platform.machine()}, {os.cpu_count()} cores (shared), load average {start_load:.1f} at the start and '
            f'{os.getloadavg()[0]:.1f} at the end; torch {torch.__version__}, fastai {fastai.__version__}, '
            f'Python {platform.python_version()}')


def gpu_main(rounds:int):
    "The epoch ratio on a GPU: torchvision's ResNet-18 at 64 and 224 px, micro-batches of 32, accum_bs=256"
    from torchvision.models import resnet18 as tv_resnet18
    dev,load,results = torch.device('cuda'),os.getloadavg()[0],{}
    for size,n in ((64, 32*64), (224, 32*16)):
        dls = data(n, size, bs=32, device=dev)
        results[f'{size}px'] = side_by_side(dls, lambda: tv_resnet18(num_classes=10), rounds, gpu=True, accum_bs=256)
    device = torch.cuda.get_device_name()
    lines = ['# The cost of `batchnorm=\'window\'` on a GPU', '',
             f'torchvision\'s ResNet-18 (random init), micro-batches of 32, `GradientAccumulation(256)`, on {device}: '
             'seconds of the training phase (wall clock, synchronized), in rounds of the six orders.', '',
             "| images | 'window' / both 'micro' (median, quartiles) | control: 'micro' again / "
             "'micro' |", '|---|---|---|']
    for k,r in results.items():
        lines.append(f"| {k} | {r['median']:.3f} ({r['lower_quartile']:.3f}, {r['upper_quartile']:.3f}) | "
                     f"{r['control_median']:.3f} ({r['control_lower_quartile']:.3f}, "
                     f"{r['control_upper_quartile']:.3f}) |")
    lines += ['', f'Target (issue 42): at most 1.03. Machine: {device}; {setup_line(load)}.', '']
    (root/'bench/batchnorm_cost_gpu.md').write_text('\n'.join(lines))
    (root/'bench/batchnorm_cost_gpu.json').write_text(json.dumps(dict(device=device, **results), indent=1))
    print('\n'.join(lines))


def main():
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    p.add_argument('--rounds', type=int, default=6, help='timed rounds of three epochs (6: each order once)')
    p.add_argument('--gpu', action='store_true', help='the epoch ratio on a GPU (torchvision needed)')
    p.add_argument('--old', default=None,
                   help="also time the Python of this git revision's WindowBatchNorm in an epoch")
    args = p.parse_args()
    if args.gpu: return gpu_main(args.rounds)
    torch.set_num_threads(1)
    load = os.getloadavg()[0]
    dls = data(16*16)   # 16 micro-batches of 16 an epoch: two windows of 128
    ops = {'resnet18': ops_per_micro_batch(dls, resnet18, 'ResNet-18'), 'mlp': ops_per_micro_batch(dls, mlp, 'MLP')}
    print(json.dumps(ops), flush=True)
    py = python_time(dls)
    py['alone'] = python_alone()
    # what PyTorch's own `_check_input_dim`, which a watched layer's replaces, takes timed the same way ('micro')
    base = python_time(dls, batchnorm='micro', only=[(nn.BatchNorm2d, '_check_input_dim')])
    py['pytorch_check_us'] = base['own_seconds']/base['calls']['_check_input_dim']*1e6
    py['added_per_micro_batch_ms'] = (py['own_seconds']*1e6 - py['calls']['_check_input_dim']*py['pytorch_check_us']
                                      )/py['micro_batches']/1e3
    if args.old:   # (the same accounting, the same machine and load, for the version before)
        dls_old,old = data(16*16),old_version(args.old)
        py['old'] = dict(python_time(dls_old, old), rev=args.old)
        import fastaccum.accumulate as acc_module
        acc_module.fit_batchnorm,acc_module.WindowBatchNorm = fbn.fit_batchnorm,fbn.WindowBatchNorm
    print(json.dumps(py), flush=True)
    rounds = side_by_side(dls, resnet18, args.rounds)
    acc = dict(train_seconds=py['train_seconds'], own_seconds=py['own_seconds'], dispatch_seconds=0., hooked_calls=0,
               share=py['own_seconds']/py['train_seconds'])   # (the form the benchmarks page reads)
    by_method = ', '.join(f'{k} {v:.1f} ms ({py["calls"][k]} calls)' for k,v in py['by_method_ms'].items()
                          if py['calls'][k])
    setup,al = setup_line(load),py['alone']
    lines = [
        "# The cost of `batchnorm='window'`", '',
        '`bench/batchnorm_cost.py`: a fastai `Learner` with `GradientAccumulation(128)` on micro-batches of 16 random '
        f"32x32 images ({py['micro_batches']} micro-batches an epoch), on the CPU with one thread; a ResNet-18 "
        "(torchvision's layout, 20 BatchNorm layers) and an MLP with 2 BatchNorm layers.", '',
        "## Operations per micro-batch beyond `'micro'`", '',
        'The aten operations an epoch dispatches from Python (`torch.profiler`; a `torch._foreach_*` call counts '
        "once), with `'window'` and with `'micro'`, per training micro-batch:", '',
        "| model | BatchNorm layers | `'window'` | `'micro'` | more per micro-batch |", '|---|---|---|---|---|',
        *[f"| {o['model']} | {o['batchnorm_layers']} | {o['window']} | {o['micro']} | "
          f"{o['extra_per_micro_batch']:.2f} |"
          for o in ops.values()], '',
        "## `WindowBatchNorm`'s Python time", '',
        "Per micro-batch of the ResNet-18, each part timed alone in a loop (the least of five runs): what a watched "
        f"layer's `_check_input_dim` adds to PyTorch's, {al['check_extra_us']:.2f} us, times {al['layers']} layers; "
        f"`micro_batch_done`, {al['micro_batch_done_us']:.1f} us; `window_closed`, {al['window_closed_us']:.1f} us, "
        f"over the {al['micro_batches_per_window']} micro-batches of a window: **{al['per_micro_batch_ms']:.3f} ms "
        "per micro-batch** (target: at most 0.2 ms; 1.6 ms with the hooks before).", '',
        "The same in a training epoch, every call of `WindowBatchNorm`'s methods and of the layers' `_check_input_dim` "
        "timed in CPU time (an upper bound: the timer's own calls, PyTorch's own check, and the machine's load are in "
        f"it): {py['own_seconds']*1e3:.1f} ms in a training phase of "
        f"{py['train_seconds']:.2f} s, {py['per_micro_batch_ms']:.3f} ms per micro-batch ({acc['share']:.2%} of it). "
        f"By method: {by_method}. PyTorch's own `_check_input_dim`, which a watched layer's replaces, timed the same "
        f"way in a `'micro'` epoch: {py['pytorch_check_us']:.1f} us a call; without it, "
        f"**{py['added_per_micro_batch_ms']:.3f} ms per micro-batch** added." + (
        f" The version before ({py['old']['rev']}, hooks), timed the same way in the "
        f"same run: {py['old']['per_micro_batch_ms']:.3f} ms per micro-batch (its hooks' dispatch not counted)."
        if 'old' in py else ''), '',
        '## Epochs timed side by side', '',
        f"{args.rounds} rounds of three ResNet-18 epochs, `'window'`, `'micro'` and a second `'micro'` learner (the "
        'same work: its ratio is the noise of a ratio here), in each of the six orders in turn, after one warm-up '
        'epoch each, in CPU seconds of the training phase:', '',
        '| | CPU seconds per epoch (median) | ratio: median | lower quartile | upper quartile |',
        '|---|---|---|---|---|',
        f"| `batchnorm='window'` over both `'micro'` (geometric mean) | "
        f"{statistics.median(rounds['seconds']['window']):.2f} "
        f"| {rounds['median']:.3f} | {rounds['lower_quartile']:.3f} | {rounds['upper_quartile']:.3f} |",
        f"| `batchnorm='micro'` | {statistics.median(rounds['seconds']['micro']):.2f} | | | |",
        f"| control: `'micro'` again over `'micro'` | {statistics.median(rounds['seconds']['micro again']):.2f} "
        f"| {rounds['control_median']:.3f} | {rounds['control_lower_quartile']:.3f} | "
        f"{rounds['control_upper_quartile']:.3f} |",
        '', f'Machine: {setup}.', '',
        'On a GPU: not measured here (no GPU in this run). The command, on a machine with one and torchvision: '
        '`python bench/batchnorm_cost.py --gpu` (ResNet-18 at 64 px and 224 px, micro-batches of 32, '
        '`accum_bs=256`).', '']
    (root/'bench/batchnorm_cost.md').write_text('\n'.join(lines))
    result = dict(ops=ops, python=py, accounted=acc, rounds=rounds, batchnorm_layers=20, setup=setup, gpu=None)
    (root/'bench/batchnorm_cost.json').write_text(json.dumps(result, indent=1))
    print('\n'.join(lines))


if __name__ == '__main__': main()
