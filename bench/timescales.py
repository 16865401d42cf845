"""Evidence for issue 46 (nbs/17_timescales.ipynb): `KeepTimescales` and `BatchSizeWarmup`, on data that ships with
Python and the package's dependencies (nothing downloaded), 3 seeds, on the CPU with one thread.

Not part of the package. From the repository root:

    PYTHONPATH=$PWD .venv/bin/python bench/timescales.py [--quick] [--out bench]

It writes `timescales.md`, `timescales.json` and `timescales.png` to `--out` (the page shows them). `--quick` runs
the same code on a sliver of the data (its numbers mean nothing: the page's smoke test).

1. **The timescale rule.** A synthetic classification (a teacher MLP labels Gaussian inputs, 10% of labels flipped), a
   student MLP trained with AdamW (fastai's `Adam`, decoupled `wd`), micro-batches of 16. Three runs on the same
   samples in the same order: the batch fixed at 16; the batch grown 8x (16 -> 128) a quarter into training by a
   milestone, the lr scaled by sqrt(8) (`lr_scale='sqrt'`, Adam's rule); the same with `KeepTimescales`. Each
   grown run is compared with the fixed one **at the same samples seen** (each epoch's end): the weights' norm
   (what the decoupled decay's average sets), the validation loss, and Adam's second moment (`sqr_avg`: the
   moving average that `sqr_mom` sets), as mean relative distances over the epochs after the change.
2. **The warm-up.** A character-level language model on the text of `pydoc_data.topics` (Python's own help
   topics): 16 characters in, the next out, an MLP over their embeddings, Adam. Three runs on the same samples:
   the batch fixed at 16, fixed at 128 (lr times sqrt(8), `KeepTimescales(reference=16)`), and
   `BatchSizeWarmup` from 16 to at most 128 (`lr_scale='sqrt'`, `KeepTimescales`). The validation loss is
   measured every 1/40 of the training samples; the table gives the optimizer steps (and samples) each run
   needed to reach the fixed small batch's final validation loss.
"""
from __future__ import annotations
import argparse, json, math, os, platform, statistics, time, warnings
from functools import partial
from pathlib import Path

os.environ.setdefault('OMP_NUM_THREADS', '1')
import torch
torch.set_num_threads(1)
from fastai.basics import *
from fastai.callback.all import *
from fastaccum.all import *   # after fastai's star import, which brings fastai's own GradientAccumulation
warnings.filterwarnings('ignore', category=UserWarning)

SEEDS = (0, 1, 2)


def loaders(x, y, xv, yv, bs, seed):
    "fastai loaders over tensors: the training one shuffled by a generator of `seed` (the same order for every run)"
    train = TfmdDL(list(zip(x, y)), bs=bs, shuffle=True, drop_last=False, num_workers=0)
    train.rng = random.Random(seed)
    return DataLoaders(train, TfmdDL(list(zip(xv, yv)), bs=512, num_workers=0))


class Probe(Callback):
    "Every `every` training samples (at the next step): the validation loss, the weights' norm, Adam's `sqr_avg` norm"
    order = 100
    def __init__(self, xv, yv, every:int): self.xv,self.yv,self.every = xv,yv,every
    def before_fit(self): self.points,self.seen,self.next = [],0,self.every
    def after_pred(self):
        if self.training: self.seen += find_bs(self.yb)
    def after_step(self):
        if self.seen >= self.next:
            self.next += self.every
            self.points.append(self.measure())

    def measure(self)->dict:
        model,opt = self.learn.model,self.learn.opt
        model.eval()
        with torch.no_grad(): val = F.cross_entropy(model(self.xv), self.yv).item()
        model.train()
        weights = torch.cat([p.detach().flatten() for p in model.parameters()]).norm().item()
        sqr = [opt.state[p]['sqr_avg'].flatten() for p in model.parameters() if 'sqr_avg' in opt.state[p]]
        ga = self.learn.gradient_accumulation
        return dict(step=ga.n_steps, samples=self.seen, val=val, weights=weights,
                    sqr_avg=torch.cat(sqr).norm().item() if sqr else math.nan, accum_bs=ga.in_use)


# -- 1. the timescale rule
def synthetic(n, seed):
    "Gaussian inputs labelled by a teacher MLP, 10% of the labels flipped"
    g = torch.Generator().manual_seed(100+seed)
    x = torch.randn(n, 20, generator=g)
    teacher = nn.Sequential(nn.Linear(20, 32), nn.Tanh(), nn.Linear(32, 5))
    with torch.no_grad():
        for p in teacher.parameters(): p.copy_(torch.randn(p.shape, generator=g))
        y = teacher(x).argmax(1)
    flip = torch.rand(n, generator=g) < 0.1
    y[flip] = torch.randint(0, 5, (int(flip.sum()),), generator=g)
    return x, y


def student(seed):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 5))


def rule_run(kind, seed, n, epochs, lr=3e-3, wd=1.0):
    "'fixed' (16), 'grown' (16 -> 128 a quarter in, lr_scale='sqrt'), 'kept' (the same with KeepTimescales)"
    x,y = synthetic(n + 2048, seed)
    probe = Probe(x[n:], y[n:], n)   # (every epoch)
    ga = GradientAccumulation(16) if kind == 'fixed' else \
         GradientAccumulationSchedule(16, 128, schedule={0.25: 128}, lr_scale='sqrt')
    cbs = [ga, probe] + ([KeepTimescales()] if kind == 'kept' else [])
    learn = Learner(loaders(x[:n], y[:n], x[n:], y[n:], 16, seed), student(seed), loss_func=F.cross_entropy,
                    opt_func=partial(Adam, wd=wd, mom=0.9, sqr_mom=0.99), lr=lr, cbs=cbs)
    with learn.no_bar(), learn.no_logging(): learn.fit(epochs, lr)
    return probe.points


def distance(points, fixed, key, after):
    "Mean relative distance of `key` to the fixed run's at the same samples, over the points after `after` samples"
    pairs = [(p[key], f[key]) for p,f in zip(points, fixed) if f['samples'] > after]
    return statistics.mean(abs(a-b)/abs(b) for a,b in pairs)


def timescale_rule(quick):
    n,epochs = (512, 4) if quick else (4096, 8)
    runs = {seed: {kind: rule_run(kind, seed, n, epochs) for kind in ('fixed', 'grown', 'kept')} for seed in SEEDS}
    rows = []
    for seed,r in runs.items():
        for kind in ('grown', 'kept'):
            rows.append(dict(seed=seed, run=kind, **{key: distance(r[kind], r['fixed'], key, 0.25*n*epochs)
                                                     for key in ('weights', 'val', 'sqr_avg')}))
    return dict(n=n, epochs=epochs, rows=rows, runs={str(s): r for s,r in runs.items()})


# -- 2. the warm-up
def char_data(context, n_train, n_valid, seed):
    "Windows of `context` characters of Python's help topics and the character after each (valid: the text's last 20%)"
    import pydoc_data.topics
    text = ''.join(pydoc_data.topics.topics[k] for k in sorted(pydoc_data.topics.topics))
    vocab = sorted(set(text))
    index = {c: i for i,c in enumerate(vocab)}
    codes = torch.tensor([index[c] for c in text])
    split = int(len(codes)*0.8)
    g = torch.Generator().manual_seed(200+seed)
    def windows(lo, hi, k):
        starts = torch.randint(lo, hi-context-1, (k,), generator=g)
        idx = starts[:, None] + torch.arange(context+1)
        return codes[idx[:, :-1]], codes[idx[:, -1]]
    return (*windows(0, split, n_train), *windows(split, len(codes), n_valid)), len(vocab)


class CharMLP(nn.Module):
    def __init__(self, vocab, context, seed):
        super().__init__()
        torch.manual_seed(seed)
        self.emb = nn.Embedding(vocab, 16)
        self.body = nn.Sequential(nn.Linear(16*context, 256), nn.ReLU(), nn.Linear(256, vocab))
    def forward(self, x): return self.body(self.emb(x).flatten(1))


def warmup_run(kind, seed, data, vocab, epochs, context, lr=2e-3):
    "'small' (16), 'large' (128, lr*sqrt(8), KeepTimescales(reference=16)), 'warmup' (16 -> at most 128)"
    x,y,xv,yv = data
    probe = Probe(xv, yv, len(x)*epochs//40)
    if kind == 'small': cbs = [GradientAccumulation(16)]
    elif kind == 'large': cbs,lr = [GradientAccumulation(128), KeepTimescales(reference=16)],lr*8**0.5
    else: cbs = [GradientAccumulation(16, lr_scale='sqrt'), GradientNoiseScale(beta=0.95),
                 BatchSizeWarmup(max_bs=128, min_steps=50), KeepTimescales()]
    learn = Learner(loaders(x, y, xv, yv, 8, seed), CharMLP(vocab, context, seed), loss_func=F.cross_entropy,
                    opt_func=partial(Adam, wd=0.01), lr=lr, cbs=cbs + [probe])
    with learn.no_bar(), learn.no_logging(): learn.fit(epochs, lr)
    warmup = getattr(learn, 'batch_size_warmup', None)
    noise = getattr(learn, 'gradient_noise_scale', None)
    return dict(points=probe.points, decisions=warmup.history if warmup else [],
                b_simple=[h['b_simple'] for h in noise.history] if noise else [],
                accum_bs=[h['accum_bs'] for h in noise.history] if noise else [])


def reached(points, target):
    "The first point whose validation loss is at or below `target` (None: never)"
    return next((p for p in points if p['val'] <= target), None)


def warmup(quick):
    context,epochs = 16, (1 if quick else 2)
    n_train,n_valid = (2048, 512) if quick else (24_000, 4096)
    out,rows = {},[]
    for seed in SEEDS:
        data,vocab = char_data(context, n_train, n_valid, seed)
        runs = {kind: warmup_run(kind, seed, data, vocab, epochs, context) for kind in ('small', 'large', 'warmup')}
        target = runs['small']['points'][-1]['val']
        for kind,r in runs.items():
            hit,last = reached(r['points'], target),r['points'][-1]
            rows.append(dict(seed=seed, run=kind, target=target, final_val=last['val'], total_steps=last['step'],
                             steps=hit and hit['step'], samples=hit and hit['samples']))
        out[str(seed)] = runs
    return dict(n_train=n_train, epochs=epochs, vocab=vocab, rows=rows, runs=out)


# -- the report
def mean_by(rows, run, key):
    values = [r[key] for r in rows if r['run'] == run]
    return None if any(v is None for v in values) else statistics.mean(values)


def write_markdown(res, path):
    rule,warm = res['rule'],res['warmup']
    lines = ['# Timescales and batch-size warm-up (issue 46)', '',
             f"`bench/timescales.py`, {res['setup']}.", '',
             '## The timescale rule: a batch grown 8x against the fixed batch, at the same samples', '',
             f"AdamW (`wd=1.0`, lr 3e-3, β=(0.9, 0.99)) on a synthetic classification, {rule['n']} samples, "
             f"{rule['epochs']} epochs, micro-batches of 16; the grown runs go 16 -> 128 a quarter into training "
             "with `lr_scale='sqrt'`. Mean relative distance to the fixed-batch run at each epoch's end after the "
             'change (smaller is closer):', '',
             '| seed | run | weights\' norm | validation loss | Adam\'s sqr_avg norm |', '|---|---|---|---|---|']
    for r in rule['rows']:
        name = 'with KeepTimescales' if r['run'] == 'kept' else 'without'
        lines.append(f"| {r['seed']} | {name} | {r['weights']:.4f} | {r['val']:.4f} | {r['sqr_avg']:.4f} |")
    for run,name in (('grown', 'without'), ('kept', 'with KeepTimescales')):
        lines.append(f"| mean | {name} | {mean_by(rule['rows'], run, 'weights'):.4f} | "
                     f"{mean_by(rule['rows'], run, 'val'):.4f} | {mean_by(rule['rows'], run, 'sqr_avg'):.4f} |")
    lines += ['', '## The warm-up: optimizer steps to the fixed small batch\'s final validation loss', '',
              f"A character-level MLP on `pydoc_data.topics` ({warm['n_train']} training windows of 16 characters, "
              f"{warm['epochs']} epochs, micro-batches of 8, Adam lr 2e-3 at batch 16). Steps (samples) at the first "
              'validation point (every 1/40 of training) at or below the target; "not reached" if never:', '',
              '| seed | target | run | steps to target | samples to target | total steps | final val. loss |',
              '|---|---|---|---|---|---|---|']
    for r in warm['rows']:
        steps = 'not reached' if r['steps'] is None else str(r['steps'])
        samples = '' if r['samples'] is None else str(r['samples'])
        lines.append(f"| {r['seed']} | {r['target']:.4f} | {r['run']} | {steps} | {samples} | {r['total_steps']} | "
                     f"{r['final_val']:.4f} |")
    for seed,runs in warm['runs'].items():
        decisions = ', '.join(f"step {d['step']}: {d['accum_bs']} (B_simple {d['suggestion']:.0f})"
                              for d in runs['warmup']['decisions'])
        lines.append(f"\nSeed {seed}, the warm-up's decisions: {decisions or 'none'}.")
    lines += ['', f"CPU time of the whole run: {res['seconds']:.0f} s."]
    Path(path).write_text('\n'.join(lines) + '\n')


def plot(res, path):
    import matplotlib
    matplotlib.use('agg')
    import matplotlib.pyplot as plt
    fig,axes = plt.subplots(1, 3, figsize=(15, 4), layout='constrained')
    runs = res['rule']['runs']['0']
    for kind,name in (('fixed', 'batch 16'), ('grown', '16 -> 128, without'), ('kept', '16 -> 128, KeepTimescales')):
        axes[0].plot([p['samples'] for p in runs[kind]], [p['weights'] for p in runs[kind]], marker='o', label=name)
    axes[0].set(xlabel='samples', ylabel="weights' norm", title='AdamW, the batch grown 8x (seed 0)')
    runs = res['warmup']['runs']['0']
    for kind,name in (('small', 'batch 16'), ('large', 'batch 128'), ('warmup', 'warm-up 16 -> 128')):
        points = runs[kind]['points']
        axes[1].plot([p['step'] for p in points], [p['val'] for p in points], label=name)
    target = runs['small']['points'][-1]['val']
    axes[1].axhline(target, color='gray', ls=':', label="batch 16's final loss")
    axes[1].set(xlabel='optimizer steps', ylabel='validation loss', xscale='log', title='char-level LM (seed 0)')
    warm = runs['warmup']
    axes[2].plot(warm['b_simple'], label='B_simple (smoothed)')
    axes[2].step(range(len(warm['accum_bs'])), warm['accum_bs'], where='post', label='accum_bs in use')
    axes[2].scatter([d['step'] for d in warm['decisions']], [d['accum_bs'] for d in warm['decisions']], color='k',
                    zorder=3, label='decision')
    axes[2].set(xlabel='optimizer step', ylabel='samples', yscale='log', title="the warm-up's batch (seed 0)")
    for ax in axes: ax.legend(fontsize=8)
    fig.savefig(path, dpi=90)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--quick', action='store_true', help='a sliver of the data: the smoke test')
    ap.add_argument('--out', default=str(Path(__file__).parent))
    args = ap.parse_args()
    out = Path(args.out)
    start = time.process_time()
    res = dict(rule=timescale_rule(args.quick), warmup=warmup(args.quick))
    res['seconds'] = time.process_time() - start
    res['setup'] = (f"{platform.machine()}, {os.cpu_count()} cores (shared), one thread; torch {torch.__version__}, "
                    f"Python {platform.python_version()}; seeds {', '.join(map(str, SEEDS))}")
    (out/'timescales.json').write_text(json.dumps(res, indent=1))
    write_markdown(res, out/'timescales.md')
    plot(res, out/'timescales.png')
    print((out/'timescales.md').read_text())


if __name__ == '__main__': main()
