"""What `TrainingCheckpoint` costs between its writes: the training phase of an epoch of a small MLP on the CPU (one
thread), with the checkpoint (`every_steps` beyond the epoch's steps, so that it writes nothing while timed) and
without it, in three set-ups side by side: fastai alone (a step at every batch), `GradientAccumulation` with 8
micro-batches a step, and the same with each loader batch split in two (`micro_batch_size`).

Not part of the package. Run it from the repository root:

    PYTHONPATH=$PWD .venv/bin/python bench/checkpoint_cost.py [--rounds 12] [--checkpoint PATH]

It writes `bench/checkpoint_cost.md` and `bench/checkpoint_cost.json` (which the checkpoint page shows).
`--checkpoint PATH` times the `TrainingCheckpoint` of another version of the module instead (e.g. one from git:
`git show <commit>:fastaccum/checkpoint.py > /tmp/checkpoint.py`), and writes nothing but what it prints.

Two measures, as in `bench/batchnorm_cost.py`. Accounted: one epoch of each set-up in which every call fastai makes
of the checkpoint (its dispatch of each event to the callback, and what the callback does there) and every optimizer
step through it are timed, over the training phase's time: the direct cost, resolved well below the noise of a
shared machine (less what the timing adds to a call that does nothing). Side by side: epochs with and without the
checkpoint, and a control of two learners without it (its ratio is the noise of a ratio of equal work), timed in
rounds in every order in turn; the median and quartiles of the rounds' ratios. Times are the process's CPU time
(with one thread, the epoch's own work, steadier than the wall clock on a machine shared with other jobs), of the
training phase only.
"""
from __future__ import annotations
import argparse, importlib.util, itertools, json, os, platform, statistics, sys, tempfile, time
from pathlib import Path

os.environ.setdefault('OMP_NUM_THREADS', '1')
import torch
torch.set_num_threads(1)
from fastai.basics import *
from fastaccum.all import *   # after fastai's star import

root = Path(__file__).resolve().parent.parent
out,out_json = root/'bench'/'checkpoint_cost.md',root/'bench'/'checkpoint_cost.json'

SETUPS = {   # name: (loader batch, GradientAccumulation's arguments or None, micro-batches in an epoch, every_steps)
    'fastai alone': (32, None, 1000),
    'GradientAccumulation(256)': (32, dict(accum_bs=256), 50),
    'GradientAccumulation(256, micro_batch_size=32)': (64, dict(accum_bs=256, micro_batch_size=32), 50),
}
N = 10240   # samples an epoch: 320 micro-batches of 32; 40 steps of 256 with accumulation (fewer than every_steps)


class TrainTime(Callback):
    "The CPU seconds of each epoch's training phase (no validation)"
    order = 100
    def before_fit(self): self.times = []
    def before_train(self): self.start = time.process_time()
    def after_train(self): self.times.append(time.process_time() - self.start)


def data(bs:int):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(N, 64, generator=g); y = x[:, :10].argmax(1)
    train,valid = list(zip(x, y)),list(zip(x[:256], y[:256]))
    return DataLoaders(DataLoader(train, bs=bs, shuffle=True), DataLoader(valid, bs=256))


def learner(setup:str, checkpoint=None, folder=None):
    "The set-up's MLP, with `checkpoint` (a `TrainingCheckpoint` class) writing nothing while an epoch is timed"
    bs,accum,every = SETUPS[setup]
    set_seed(0)
    model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10))
    cbs = [TrainTime()] + ([GradientAccumulation(**accum)] if accum else [])
    if checkpoint is not None: cbs.append(checkpoint(every_steps=every, every_epoch=False))
    return Learner(data(bs), model, loss_func=F.cross_entropy, opt_func=Adam, lr=1e-3, cbs=cbs,
                   path=folder or tempfile.mkdtemp())


def epoch(learn)->float:
    "One epoch; the CPU seconds of its training phase (the checkpoint's write at the fit's end comes after it)"
    with learn.no_bar(), learn.no_logging(): learn.fit(1)
    return learn.train_time.times[-1]


clock = time.thread_time_ns   # the thread's CPU time: a busy machine's other jobs do not count in it

def timer_floor(n:int=20000)->float:
    "The nanoseconds the timing itself adds to a timed call: a call that does nothing, timed as the checkpoint's are"
    class Nothing:
        def __call__(self, event_name): return None
    timed = timed_class(Nothing)
    nothing,floors = timed(),[]
    for _ in range(5):
        timed.on,timed.spent,timed.calls = True,0,0
        for _ in range(n): nothing('after_pred')
        floors.append(timed.spent/timed.calls)
    timed.on = False
    return min(floors)

def timed_class(checkpoint):
    "The checkpoint class, with every call fastai makes of it timed (the thread's CPU time)"
    class Timed(checkpoint):
        spent,calls,on = 0,0,False
        def __call__(self, event_name):
            if not Timed.on: return super().__call__(event_name)
            start = clock()
            try: return super().__call__(event_name)
            finally: Timed.spent += clock() - start; Timed.calls += 1
        def before_train(self):
            super().before_train(); Timed.on = True
        def after_train(self):
            Timed.on = False; super().after_train()
    Timed.__name__ = checkpoint.__name__
    return Timed


def step_overhead(checkpoint, calls:int=20000)->float:
    "The seconds the checkpoint adds to one optimizer step (0 for a version that does not wrap the step)"
    counting = getattr(checkpoint, '_counting', None)
    if counting is None: return 0.
    cb = checkpoint(every_steps=10**9)
    cb.written,cb.steps = 0,0
    plain,wrapped = (lambda: None),counting(cb, lambda: None)
    best = []
    for _ in range(5):
        times = {}
        for name,f in (('plain', plain), ('wrapped', wrapped)):
            start = clock()
            for _ in range(calls): f()
            times[name] = (clock() - start)/calls
        best.append(times['wrapped'] - times['plain'])
    return max(min(best), 0)/1e9


def accounted(setup:str, checkpoint)->dict:
    "One epoch of `setup` with the checkpoint's calls timed: their seconds over the training phase's"
    timed = timed_class(checkpoint)
    with tempfile.TemporaryDirectory() as folder:
        learn = learner(setup, timed, Path(folder))
        epoch(learn)   # warm-up
        timed.spent,timed.calls = 0,0
        train = epoch(learn)
    steps = N//256 if SETUPS[setup][1] else N//SETUPS[setup][0]
    per_step,floor = step_overhead(checkpoint),timer_floor()
    calls = max(timed.spent - timed.calls*floor, 0)/1e9   # (less what the timing itself adds to each call)
    own = calls + per_step*steps
    return dict(train_seconds=train, calls=timed.calls, call_seconds=calls, timer_floor_ns=floor, steps=steps,
                step_seconds=per_step*steps, per_micro_batch_us=own/(N//32)*1e6, share=own/train)


def rounds(setup:str, checkpoint, n:int)->dict:
    "Epochs side by side: with the checkpoint, without it, and without it again (the control), in every order in turn"
    with tempfile.TemporaryDirectory() as folder:
        learners = dict(checkpoint=learner(setup, checkpoint, Path(folder)), plain=learner(setup),
                        control=learner(setup))
        for learn in learners.values(): epoch(learn)   # warm-up
        orders,times = list(itertools.permutations(learners)),{k: [] for k in learners}
        for i in range(n):
            for name in orders[i % len(orders)]: times[name].append(epoch(learners[name]))
    ratio = [c/p for c,p in zip(times['checkpoint'], times['plain'])]
    control = [c/p for c,p in zip(times['control'], times['plain'])]
    q = lambda v: statistics.quantiles(v, n=4) if len(v) > 1 else [v[0]]*3
    return dict(seconds={k: statistics.median(v) for k,v in times.items()}, ratios=ratio, control=control,
                ratio=statistics.median(ratio), ratio_quartiles=q(ratio)[::2], control_ratio=statistics.median(control),
                control_quartiles=q(control)[::2])


def load_checkpoint_class(path):
    "The `TrainingCheckpoint` of the module at `path`, imported as a module of fastaccum (its relative imports)"
    spec = importlib.util.spec_from_file_location('fastaccum._checkpoint_under_test', path)
    module = importlib.util.module_from_spec(spec)
    module.__package__ = 'fastaccum'
    spec.loader.exec_module(module)
    return module.TrainingCheckpoint


def main():
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    p.add_argument('--rounds', type=int, default=12,
                   help='timed rounds of three epochs per set-up (a multiple of 6: each order as often)')
    p.add_argument('--checkpoint', help='time the TrainingCheckpoint of this file instead (prints only)')
    args = p.parse_args()
    checkpoint = load_checkpoint_class(args.checkpoint) if args.checkpoint else TrainingCheckpoint
    load = os.getloadavg()[0]
    results = {}
    for setup in SETUPS:
        results[setup] = dict(accounted=accounted(setup, checkpoint), rounds=rounds(setup, checkpoint, args.rounds))
        a,r = results[setup]['accounted'],results[setup]['rounds']
        print(f'{setup}: accounted {a["share"]:.2%} ({a["per_micro_batch_us"]:.1f} us a micro-batch); '
              f'side by side {r["ratio"]:.3f} (control {r["control_ratio"]:.3f})', flush=True)
    machine = dict(machine=platform.machine(), cores=os.cpu_count(), load=[load, os.getloadavg()[0]],
                   torch=torch.__version__, python=platform.python_version(),
                   checkpoint=args.checkpoint or 'fastaccum.checkpoint')
    table = ['| | ' + ' | '.join(f'`{s}`' for s in SETUPS) + ' |', '|---|' + '---|'*len(SETUPS)]
    def row(name, f): table.append(f'| {name} | ' + ' | '.join(f(results[s]) for s in SETUPS) + ' |')
    row('training phase of an epoch (CPU s, median)', lambda r: f'{r["rounds"]["seconds"]["plain"]:.3f}')
    row('**accounted: the checkpoint\'s share of it**', lambda r: f'**{r["accounted"]["share"]:.2%}**')
    row('its time a micro-batch (us)', lambda r: f'{r["accounted"]["per_micro_batch_us"]:.2f}')
    row('side by side: with it / without (median)', lambda r: f'{r["rounds"]["ratio"]:.3f}')
    row('quartiles', lambda r: '{:.3f} - {:.3f}'.format(*r['rounds']['ratio_quartiles']))
    row('control: without / without (median)', lambda r: f'{r["rounds"]["control_ratio"]:.3f}')
    row('quartiles ', lambda r: '{:.3f} - {:.3f}'.format(*r['rounds']['control_quartiles']))
    print('\n'.join(table))
    if args.checkpoint: return
    text = ['# What `TrainingCheckpoint` costs between its writes', '',
            f'`bench/checkpoint_cost.py`: the training phase of an epoch of an MLP (64-256-256-10, Adam) on the CPU '
            f'with one thread, {N} samples, 320 micro-batches of 32; the checkpoint with `every_steps` beyond the '
            f"epoch's steps (it writes nothing while timed). {args.rounds} rounds of three epochs a set-up, after a "
            'warm-up epoch each.', '',
            *table, '', f'Target: at most 1% of an epoch between writes. Machine: {machine["machine"]}, '
            f'{machine["cores"]} '
            f'cores (shared), load average {load:.1f} at the start and {machine["load"][1]:.1f} at the end; torch '
            f'{machine["torch"]}, Python {machine["python"]}.', '']
    out.write_text('\n'.join(text))
    out_json.write_text(json.dumps(dict(setups=results, machine=machine, rounds=args.rounds, samples=N), indent=1))
    print(f'wrote {out} and {out_json}')


if __name__ == '__main__': main()
