"""fastaccum on one GPU: mixed precision against the large batch, the loss scaler per window, an overflow, host syncs,
peak memory, samples/s, GradCache, BatchNorm's windows and micro_batch_size='auto' against a real out-of-memory.

    python bench/gpu.py                 on a machine with one NVIDIA GPU (at most 6 minutes): prints the report and
                                        writes nbs/bench/gpu.md, which the Benchmarks page shows
    python bench/gpu.py --dry-run       on the CPU, tiny sizes, in seconds (the suite runs it: tests/gpu_bench), so
                                        that the script is known to work before a GPU runs it; writes to a temp folder

Timings are CUDA events around each training epoch, in interleaved rounds (every configuration once a round, in a
rotating order), reported as the median and quartiles: on a GPU the rounds spread by +-10%, so one round proves
nothing. Host syncs are counted with `torch.cuda.set_sync_debug_mode('warn')` (each synchronizing CUDA call warns);
the dry run, without CUDA, counts the host reads of tensors instead (`.item`, `.cpu`, `.tolist`, `bool`, `float`,
`format`), as tests/host_syncs does.
"""
from __future__ import annotations
import argparse, gc, math, platform, statistics, subprocess, sys, tempfile, time, traceback, warnings
from copy import deepcopy
from functools import partial
from pathlib import Path
import torch, fastai
from torch import nn
import torch.nn.functional as F
from fastai.basics import Learner, DataLoader, DataLoaders, SGD, Callback, CancelStepException
from fastai.callback.fp16 import MixedPrecision, AMPMode
from fastai.callback.training import GradientAccumulation as FastaiGradientAccumulation
from fastaccum.all import GradientAccumulation, GradientNoiseScale, TrainingCheckpoint
from fastaccum.testing import rel_diff

CUDA = torch.cuda.is_available()
BUDGET = 330   # seconds: a section that would start later is left out (the report says so)
DEV = torch.device('cuda' if CUDA else 'cpu')

# sizes: a GPU's, and the dry run's (tiny: the CPU, in seconds)
GPU = dict(vocab=256, d=512, layers=4, seq=128, micro=16, accums=(64, 256, 1024, 4096), rounds=7, epoch_micro=96,
           amp_d=256, amp_layers=2, amp_micro=32, amp_accum=128, amp_n=1024, bn_width=1024)
DRY = dict(vocab=11, d=16, layers=1, seq=8, micro=4, accums=(8, 16), rounds=3, epoch_micro=8,
           amp_d=16, amp_layers=1, amp_micro=4, amp_accum=16, amp_n=64, bn_width=16)


class TinyTransformer(nn.Module):
    "A causal transformer over random tokens (no dropout: a micro-batch and the large batch see the same function)"
    def __init__(self, vocab, d, layers, seq):
        super().__init__()
        self.tok,self.pos = nn.Embedding(vocab, d),nn.Embedding(seq, d)
        layer = nn.TransformerEncoderLayer(d, max(1, d//64), 4*d, dropout=0., batch_first=True, norm_first=True)
        self.blocks,self.head = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False),nn.Linear(d, vocab)
    def forward(self, x):
        mask = nn.Transformer.generate_square_subsequent_mask(x.shape[1], device=x.device)
        pos = self.pos(torch.arange(x.shape[1], device=x.device))
        return self.head(self.blocks(self.tok(x) + pos, mask=mask, is_causal=True))

def token_loss(pred, targ): return F.cross_entropy(pred.reshape(-1, pred.shape[-1]).float(), targ.reshape(-1))

def tokens(n, s, seed=0):
    "`n` random sequences of the vocabulary, and their next tokens"
    x = torch.randint(0, s['vocab'], (n, s['seq']), generator=torch.Generator().manual_seed(seed))
    return x,torch.roll(x, -1, 1)

class NonBlocking:
    "Move a batch to the device without waiting (from pinned memory): a loader's `after_batch`"
    def __init__(self, device): self.device = device
    def __call__(self, b): return tuple(t.to(self.device, non_blocking=True) for t in b)

def loaders(x, y, bs, non_blocking=False):
    """Unshuffled fastai loaders that slice the tensors (no per-sample collation), on the CPU until fastai moves them;
    `non_blocking`: pinned batches, moved without waiting by the loaders' `after_batch` (fastai's own move waits)"""
    move = dict(pin_memory=CUDA, after_batch=NonBlocking(DEV)) if non_blocking else {}
    def make(n): return DataLoader(list(range(n)), bs=bs, shuffle=False, **move,
                                   create_batch=lambda idx: (x[torch.as_tensor(idx)], y[torch.as_tensor(idx)]))
    # a small validation set: what is measured is training (a validation batch of the large batch is no measure)
    return DataLoaders(make(len(x)), make(min(len(x), bs, 64)), device=None if non_blocking else DEV)

def learner(model, x, y, bs, cbs=(), loss_func=token_loss, non_blocking=False, lr=1e-3, **kwargs):
    learn = Learner(loaders(x, y, bs, non_blocking), deepcopy(model).to(DEV), loss_func=loss_func, lr=lr,
                    opt_func=partial(SGD, mom=0.9), cbs=list(cbs), path=tempfile.mkdtemp(), **kwargs)
    return learn

def train(learn, epochs=1):
    with learn.no_bar(), learn.no_logging(): learn.fit(epochs)
    return learn

def free():
    gc.collect()
    if CUDA: torch.cuda.empty_cache(); torch.cuda.reset_peak_memory_stats()


# -- mixed precision (on the CPU, the dry run's: autocast and GradScaler for the CPU, as the tests' are)
class CPUMixedPrecision(MixedPrecision):
    "fastai's `MixedPrecision` with autocast and `GradScaler` on the CPU (fastai's own are CUDA's)"
    def before_fit(self):
        super().before_fit()
        fp16 = self.amp_mode == AMPMode.FP16
        self.autocast = torch.autocast('cpu', dtype=torch.float16 if fp16 else torch.bfloat16)
        self.learn.scaler = torch.amp.GradScaler('cpu', **self.kwargs)   # (`enabled`: fp16's, set above)

def amp(mode, **kwargs): return (MixedPrecision if CUDA else CPUMixedPrecision)(amp_mode=mode, **kwargs)

class Calls(Callback):
    "Count the loss scaler's `unscale_`, `step`, `update` and the optimizer's steps of a fit (wrapped once it trains)"
    order = 1000
    def before_train(self):
        if hasattr(self, 'counts'): return
        self.counts = dict(unscale_=0, step=0, update=0, opt_step=0)
        scaler = getattr(self.learn, 'scaler', None)
        for name in ('unscale_', 'step', 'update'):
            if scaler is not None: setattr(scaler, name, self._count(name, getattr(scaler, name)))
        self.learn.opt.step = self._count('opt_step', self.learn.opt.step)
    def _count(self, name, f):
        def counted(*args, **kwargs):
            self.counts[name] += 1
            return f(*args, **kwargs)
        return counted

def mixed_precision(s):
    "fp16 and bf16: fastaccum and fastai's built-in callback against the large batch at the same precision"
    x,y = tokens(s['amp_n'], s)
    model = TinyTransformer(s['vocab'], s['amp_d'], s['amp_layers'], s['seq'])
    m,k = s['amp_micro'],s['amp_accum']
    rows = []
    for mode in ('fp32', 'fp16', 'bf16'):
        prec = [] if mode == 'fp32' else [amp(mode)]
        big = train(learner(model, x, y, k, prec), 2)
        ours = train(learner(model, x, y, m, [GradientAccumulation(k), Calls()] + prec), 2)
        theirs = train(learner(model, x, y, m, [FastaiGradientAccumulation(n_acc=k)] + prec), 2)
        calls = ours.calls.counts
        windows = calls['opt_step']
        rows.append([mode, f'{rel_diff(ours.model, big.model):.2e}', f'{rel_diff(theirs.model, big.model):.2e}',
                     f"{calls['unscale_']}/{calls['step']}/{calls['update']} over {windows} windows"
                     if mode == 'fp16' else '-'])
        del big,ours,theirs; free()
    return ('Mixed precision against the large batch',
            f'A {s["amp_layers"]}-layer transformer (d={s["amp_d"]}), micro-batches of {m}, {k} samples per step, 2 '
            'epochs: the relative distance of the weights from the large batch\'s at the same precision.',
            ['precision', 'fastaccum', "fastai's built-in", 'scaler unscale_/step/update (fastaccum)'], rows)

class Overflow(Callback):
    "An inf in one parameter's gradient after the backward of micro-batch `at` (the middle of a window)"
    order = 1000
    def __init__(self, at): self.at = at
    def after_backward(self):
        if self.training and self.iter == self.at:
            p = next(q for q in self.learn.model.parameters() if q.grad is not None)
            p.grad.view(-1)[0] = math.inf

class WindowSteps(Callback):
    "Whether each window stepped (a parameter changed), and the loss scale after it"
    order = 1001
    def before_fit(self): self.windows,self.before = [],None
    def before_batch(self):
        if self.before is None and self.training: self.before = self._watched()
    def _watched(self): return next(self.learn.model.parameters()).detach().clone()
    def after_batch(self):
        ga = self.learn.gradient_accumulation
        if not self.training or not ga.will_step: return
        self.windows.append((not torch.equal(self._watched(), self.before), self.learn.scaler.get_scale()))
        self.before = None

def overflow(s):
    "fp16: an inf gradient in the middle of a window skips that window, halves the scale once, the next windows step"
    x,y = tokens(8*s['amp_micro'], s)
    model = TinyTransformer(s['vocab'], s['amp_d'], s['amp_layers'], s['seq'])
    # windows of 2 micro-batches; the inf after the first micro-batch of the second window. A loss scale of 2**10 to
    # start: fastai's 2**16 may overflow on its own in a first step, in fp16, and the window skipped would not be ours
    k = 2*s['amp_micro']
    learn = train(learner(model, x, y, s['amp_micro'], [GradientAccumulation(k), amp('fp16', init_scale=2.**10), Overflow(2),
                                                        WindowSteps(), Calls()]))
    rows = [[i, 'yes' if stepped else 'skipped', f'{scale:g}']
            for i,(stepped,scale) in enumerate(learn.window_steps.windows)]
    c = learn.calls.counts
    return ('An overflow in the middle of a window (fp16)',
            f'Windows of 2 micro-batches of {s["amp_micro"]}; an inf in a gradient after window 1\'s first '
            'micro-batch. '
            f'Scaler calls over the fit: unscale_ {c["unscale_"]}, step {c["step"]}, update {c["update"]}.',
            ['window', 'stepped', 'loss scale after it'], rows)


# -- host syncs per micro-batch
class HostReads:
    "Count tensors' host reads (the dry run's stand-in for CUDA's syncs): `.item`, `.cpu`, `.tolist`, `bool`, ..."
    READS = ('item', 'cpu', 'tolist', '__bool__', '__float__', '__format__')
    def __init__(self): self.n,self.saved = 0,{}
    def __enter__(self):
        for name in self.READS:
            plain = self.saved[name] = getattr(torch.Tensor, name)
            setattr(torch.Tensor, name, self._counted(plain))
        return self
    def _counted(self, plain):
        def read(*args, **kwargs):
            self.n += 1
            return plain(*args, **kwargs)
        return read
    def __exit__(self, *exc):
        for name,plain in self.saved.items(): setattr(torch.Tensor, name, plain)

class CudaSyncs:
    "Count CUDA's synchronizing calls: `set_sync_debug_mode('warn')` warns at each"
    def __init__(self): self.log = []   # (read outside the context too: nothing counted there)
    def __enter__(self):
        self.caught = warnings.catch_warnings(record=True)
        self.log = self.caught.__enter__()
        warnings.simplefilter('always')
        torch.cuda.set_sync_debug_mode('warn')
        return self
    @property
    def n(self): return sum('synchronizing' in str(w.message) for w in self.log)
    def __exit__(self, *exc):
        torch.cuda.set_sync_debug_mode('default')
        self.caught.__exit__(*exc)

class SyncsPerBatch(Callback):
    "Syncs of each training micro-batch, from the end of the one before (its transfer included) to its `after_batch`"
    order = 1002
    def __init__(self, counter): self.counter,self.batches = counter,[]
    def before_train(self):
        self.steps,self.mark = 0,None
        step = self.learn.opt.step
        def counted(*args, **kwargs):
            self.steps += 1
            return step(*args, **kwargs)
        self.learn.opt.step = counted
    def after_batch(self):
        if not self.training: return
        n,steps = self.counter.n,self.steps
        if self.mark is not None: self.batches.append((n - self.mark[0], steps > self.mark[1]))   # (not the first)
        self.mark = (self.counter.n, self.steps)

def _syncs_of(make):
    "(syncs per non-stepping micro-batch, per stepping one) of one epoch of the Learner `make(extra_cbs)` gives"
    counter = CudaSyncs() if CUDA else HostReads()
    log = SyncsPerBatch(counter)
    learn = make([log])
    train(learn)   # (a first epoch: CUDA's and the allocator's set-up)
    log.batches = []
    with counter: train(learn)
    def mean(v): return f'{statistics.mean(v):.2f}' if v else '-'
    return mean([n for n,stepped in log.batches if not stepped]),mean([n for n,stepped in log.batches if stepped])

def host_syncs(s):
    "Syncs per non-stepping and per stepping micro-batch, by configuration"
    x,y = tokens(s['micro']*16, s)
    model,m = TinyTransformer(s['vocab'], s['d'], 1, s['seq']),s['micro']
    bn = nn.Sequential(nn.Linear(s['bn_width'], 64), nn.BatchNorm1d(64), nn.ReLU(), nn.Linear(64, 8))
    bx,by = torch.randn(m*16, s['bn_width']),torch.randint(0, 8, (m*16,))
    count = lambda learn: (learn.yb[0] >= 0).sum()   # the tokens, as a tensor on the device
    L = lambda cbs, bs=m: (lambda extra: learner(model, x, y, bs, cbs + extra))
    configs = {
        'plain fastai': L([]),
        "fastai's built-in, 4 micro-batches a step": L([FastaiGradientAccumulation(n_acc=4*m)]),
        'fastaccum, 4 micro-batches a step': L([GradientAccumulation(4*m)]),
        'fastaccum, a loader batch split in 4': L([GradientAccumulation(4*m, micro_batch_size=m)], 4*m),
        'fastaccum, GradCache (whole_batch_loss)': L([GradientAccumulation(8*m, micro_batch_size=m,
                                                                           whole_batch_loss=True)], 2*m),
        "fastaccum, BatchNorm 'window'": lambda extra: learner(
            bn, bx, by, m, [GradientAccumulation(4*m, warn_batchnorm=False)] + extra, loss_func=F.cross_entropy),
        'fastaccum, count_items (a tensor)': L([GradientAccumulation(4*m, count_items=count)]),
        'fastaccum and the noise scale': L([GradientAccumulation(4*m), GradientNoiseScale()]),
        'fastaccum, a checkpoint every 2 steps': L([GradientAccumulation(4*m), TrainingCheckpoint(every_steps=2)]),
        'fastaccum, pinned memory and non-blocking copies': lambda extra: learner(
            model, x, y, m, [GradientAccumulation(4*m)] + extra, non_blocking=True),
    }
    rows = []
    for name,make in configs.items():
        rows.append([name, *_syncs_of(make)]); free()
    what = ('CUDA syncs (`torch.cuda.set_sync_debug_mode`)' if CUDA else
            'host reads of tensors (the dry run has no CUDA: its stand-in)')
    return ('Host syncs per micro-batch', f'Mean {what} per training micro-batch, its transfer to the device included, '
            'over an epoch after a first one.', ['configuration', 'not stepping', 'stepping'], rows)


# -- peak memory
def peak_memory(s):
    "Peak memory of one window against `accum_bs`, micro-batches of `micro`, with the large batch beside it"
    model = TinyTransformer(s['vocab'], s['d'], s['layers'], s['seq'])
    rows,per_sample = [],None
    for k in s['accums']:
        x,y = tokens(k, s)
        row = [k]
        for bs,cbs in ((s['micro'], [GradientAccumulation(k)]), (k, [])):
            free()
            try:
                train(learner(model, x, y, bs, cbs))
                peak = torch.cuda.max_memory_allocated() if CUDA else None
                if peak and not cbs: per_sample = peak/k
                row.append(f'{peak/2**20:,.0f} MiB' if peak else 'n/a (CPU)')
            except torch.OutOfMemoryError: row.append('out of memory')
        rows.append(row)
    free()
    return ('Peak memory against accum_bs', f'A {s["layers"]}-layer transformer (d={s["d"]}, sequences of {s["seq"]}), '
            f'micro-batches of {s["micro"]}: `torch.cuda.max_memory_allocated` over one window.',
            ['accum_bs', f'fastaccum (micro-batches of {s["micro"]})', 'the large batch'], rows),per_sample


# -- timing
def epoch_seconds(run):
    "Seconds of `run()` (one training epoch): CUDA events on a GPU, else the wall clock"
    if not CUDA:
        start = time.perf_counter(); run(); return time.perf_counter() - start
    start,end = torch.cuda.Event(enable_timing=True),torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize(); start.record(); run(); end.record(); end.synchronize()
    return start.elapsed_time(end)/1000

def fit_epoch(learn):
    "A callable that trains `learn` one epoch and gives the seconds of its training phase (not validation, not set-up)"
    def run():
        seconds,train_phase = [],learn._do_epoch_train
        learn._do_epoch_train = lambda: seconds.append(epoch_seconds(train_phase))
        try: train(learn)
        finally: del learn._do_epoch_train
        return seconds[0]
    return run

def hand_loop(model, x, y, bs, k):
    "A hand-written loop: `k` micro-batches of `bs` a step, each moved to the device as fastai moves them"
    model = deepcopy(model).to(DEV)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
    def one():
        for i in range(0, len(x), bs):
            xb,yb = x[i:i+bs].to(DEV),y[i:i+bs].to(DEV)
            (token_loss(model(xb), yb)/k).backward()
            if (i//bs + 1) % k == 0: opt.step(); opt.zero_grad()
    return lambda: epoch_seconds(one)

def rounds(runs:dict, n:int, samples:int)->dict:
    "Samples/s of each run over `n` interleaved rounds (a rotating order; one untimed round first): median, quartiles"
    for run in runs.values(): run()
    got,names = {k: [] for k in runs},list(runs)
    for r in range(n):
        for name in names[r % len(names):] + names[:r % len(names)]: got[name].append(samples/runs[name]())
    def stats(v):
        q = statistics.quantiles(v, n=4) if len(v) > 1 else [v[0]]*3
        return statistics.median(v),q[0],q[2]
    return {k: stats(v) for k,v in got.items()}

def _rate_rows(rates, base):
    return [[name, f'{med:,.0f}', f'{q1:,.0f} to {q3:,.0f}', f'{med/rates[base][0]:.3f}']
            for name,(med,q1,q3) in rates.items()]

def throughput(s):
    "Samples/s of plain fastai, fastaccum k=1 and k=8, fastai's built-in k=8, the large batch and a hand-written loop"
    m = s['micro']
    x,y = tokens(m*s['epoch_micro'], s)
    model = TinyTransformer(s['vocab'], s['d'], s['layers'], s['seq'])
    runs = {'plain fastai': fit_epoch(learner(model, x, y, m)),
            'fastaccum k=1': fit_epoch(learner(model, x, y, m, [GradientAccumulation(m)])),
            'fastaccum k=8': fit_epoch(learner(model, x, y, m, [GradientAccumulation(8*m)])),
            "fastai's built-in k=8": fit_epoch(learner(model, x, y, m, [FastaiGradientAccumulation(n_acc=8*m)])),
            'the large batch (8 micro-batches)': fit_epoch(learner(model, x, y, 8*m)),
            'a hand-written loop k=8': hand_loop(model, x, y, m, 8)}
    rates = rounds(runs, s['rounds'], len(x))
    free()
    return ('Samples/s', f'Training epochs of {len(x)} samples, micro-batches of {m}; {s["rounds"]} interleaved rounds '
            '(CUDA events around each training phase).', ['configuration', 'median', 'quartiles', '/ plain fastai'],
            _rate_rows(rates, 'plain fastai'))

def gradcache(s):
    "GradCache (`whole_batch_loss=True`) against plain splitting at the same micro-batch size: time and peak memory"
    m = s['micro']
    x,y = tokens(m*s['epoch_micro'], s)
    model = TinyTransformer(s['vocab'], s['d'], s['layers'], s['seq'])
    big = 8*m
    configs = {'split in micro-batches': [GradientAccumulation(big, micro_batch_size=m)],
               'GradCache': [GradientAccumulation(big, micro_batch_size=m, whole_batch_loss=True)]}
    peaks = {}
    for name,cbs in configs.items():
        free(); train(learner(model, x, y, big, cbs))
        peaks[name] = f'{torch.cuda.max_memory_allocated()/2**20:,.0f} MiB' if CUDA else 'n/a (CPU)'
    rates = rounds({k: fit_epoch(learner(model, x, y, big, cbs)) for k,cbs in configs.items()}, s['rounds'], len(x))
    rows = [r + [peaks[r[0]]] for r in _rate_rows(rates, 'split in micro-batches')]
    free()
    return ('GradCache against plain splitting', f'Loader batches of {big} in micro-batches of {m}, one step each.',
            ['configuration', 'samples/s (median)', 'quartiles', '/ split', 'peak memory'], rows)

def batchnorm(s):
    "BatchNorm's running statistics once per window ('window') or at each micro-batch ('micro'): time, and exactness"
    m,w = s['micro'],s['bn_width']
    x,y = torch.randn(m*s['epoch_micro'], w),torch.randint(0, 8, (m*s['epoch_micro'],))
    torch.manual_seed(0)
    # one BatchNorm layer: a second one's input would depend on how the first normalized (a micro-batch, the window)
    model = nn.Sequential(nn.Linear(w, w), nn.BatchNorm1d(w), nn.ReLU(), nn.Linear(w, w), nn.ReLU(), nn.Linear(w, 8))
    def make(cbs, bs=m): return learner(model, x, y, bs, cbs, loss_func=F.cross_entropy, lr=0.)   # (weights held)
    def stats(learn):
        bns = [mod for mod in learn.model.modules() if isinstance(mod, nn.BatchNorm1d)]
        return torch.cat([b.flatten() for mod in bns for b in (mod.running_mean, mod.running_var)])
    big = stats(train(make([], 4*m)))
    ga = lambda mode: [GradientAccumulation(4*m, batchnorm=mode, warn_batchnorm=False)]
    dist = {mode: ((stats(train(make(ga(mode)))) - big).norm()/big.norm()).item() for mode in ('window', 'micro')}
    rates = rounds({f"'{mode}'": fit_epoch(make(ga(mode))) for mode in ('window', 'micro')}, s['rounds'], len(x))
    rows = [r + [f'{dist[r[0].strip(chr(39))]:.2e}'] for r in _rate_rows(rates, "'micro'")]
    free()
    return ("BatchNorm 'window' against 'micro'", f'An MLP with a BatchNorm layer (width {w}), 4 micro-batches of '
            f'{m} a step: samples/s, and the running statistics\' distance from the large batch\'s after an epoch '
            '(lr=0: the same weights throughout, so that only the statistics differ).',
            ['batchnorm', 'samples/s (median)', 'quartiles', "/ 'micro'", 'running statistics vs the large batch'],
            rows)


# -- micro_batch_size='auto' against an out-of-memory
class SimulatedOOM(nn.Module):
    "The dry run's stand-in for a GPU's memory: more than `limit` samples at once raise `torch.OutOfMemoryError`"
    def __init__(self, model, limit): super().__init__(); self.model,self.limit = model,limit
    def forward(self, x):
        if self.training and x.shape[0] > self.limit:
            raise torch.OutOfMemoryError(f'out of memory (simulated: {x.shape[0]} samples)')
        return self.model(x)

def auto_size(s, per_sample):
    "micro_batch_size='auto' on a loader batch too large for the GPU: the size it runs, memory after each epoch"
    model = TinyTransformer(s['vocab'], s['d'], s['layers'], s['seq'])
    if CUDA:
        total = torch.cuda.get_device_properties(0).total_memory
        bs = 2**math.ceil(math.log2(1.5*total/per_sample)) if per_sample else 16384
        where = f'{total/2**30:.0f} GiB of GPU memory'
    else:
        bs,model = 8*s['micro'],SimulatedOOM(model, 2*s['micro'])
        where = f'a simulated memory of {2*s["micro"]} samples (no GPU)'
    x,y = tokens(2*bs, s)
    cb = GradientAccumulation(bs, micro_batch_size='auto')
    learn,after = learner(model, x, y, bs, [cb]),[]
    free()
    start = time.perf_counter()
    for epoch in range(2):
        train(learn)
        after.append(f'{torch.cuda.memory_allocated()/2**20:,.0f} MiB' if CUDA else 'n/a')
    finite = all(torch.isfinite(p).all() for p in learn.model.parameters())
    rows = [[bs, cb.micro_bs, ', '.join(after), 'yes' if finite else 'NO', f'{time.perf_counter()-start:.1f} s']]
    del learn; free()
    return ("micro_batch_size='auto' against an out-of-memory", f'Loader batches of {bs} samples of the transformer '
            f'above, on {where}: two epochs.', ['loader batch', "'auto' ran", 'memory allocated after each epoch',
                                                 'weights finite', 'time'], rows)


# -- the report
def _nvidia_smi_name():
    try: return subprocess.run(['nvidia-smi', '--query-gpu=name', '--format=csv,noheader'], capture_output=True,
                               text=True, timeout=30).stdout.strip().splitlines()[0]
    except Exception: return torch.cuda.get_device_name(0) + ' (nvidia-smi not found: as torch names it)'

def header(command, dry_run):
    device = _nvidia_smi_name() if CUDA else f'CPU ({platform.processor() or platform.machine()}): no GPU'
    lines = [f'- device: {device}', f'- torch {torch.__version__}, CUDA {torch.version.cuda or "none"}, '
             f'fastai {fastai.__version__}, Python {platform.python_version()}', f'- command: `{command}`']
    if dry_run: lines.append('- **a dry run**: tiny sizes on the CPU, to check the script; its figures mean nothing')
    return '# fastaccum on one GPU\n\n' + '\n'.join(lines)

def table(title, text, columns, rows):
    out = [f'## {title}', '', text, '', '| ' + ' | '.join(columns) + ' |', '|' + '---|'*len(columns)]
    return '\n'.join(out + ['| ' + ' | '.join(str(v) for v in r) + ' |' for r in rows])

def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--dry-run', action='store_true', help='tiny sizes on the CPU, to check the script')
    ap.add_argument('--out', help='the report (default: nbs/bench/gpu.md; a temp folder with --dry-run)')
    args = ap.parse_args(argv)
    global CUDA, DEV
    if args.dry_run: CUDA,DEV = False,torch.device('cpu')
    elif not CUDA: ap.error('no GPU here: run it on a machine with one, or pass --dry-run')
    s = DRY if args.dry_run else GPU
    out = Path(args.out or (Path(tempfile.mkdtemp())/'gpu.md' if args.dry_run else
                            Path(__file__).resolve().parents[1]/'nbs'/'bench'/'gpu.md'))
    command = ' '.join(['python', 'bench/gpu.py'] + (['--dry-run'] if args.dry_run else []))
    torch.manual_seed(0)
    parts,t0,failed,per_sample = [header(command, args.dry_run)],time.perf_counter(),[],None
    for name in ('mixed_precision', 'overflow', 'host_syncs', 'peak_memory', 'throughput', 'gradcache', 'batchnorm',
                 'auto_size'):
        start = time.perf_counter()
        if start - t0 > BUDGET:   # (the sizes keep it well inside; a slow machine gets a report of what it ran)
            parts.append(f'## {name}\n\nnot run: {BUDGET} s had passed.'); failed.append(name); continue
        try:
            if name == 'peak_memory': got,per_sample = peak_memory(s)
            else: got = auto_size(s, per_sample) if name == 'auto_size' else globals()[name](s)
            parts.append(table(*got))
        except Exception as e:   # the other sections still run: a GPU's time is not spent for nothing
            traceback.print_exc(); failed.append(name)
            parts.append(f'## {name}\n\nfailed: {type(e).__name__}: {e}')
        print(parts[-1] + f'\n\n({time.perf_counter()-start:.1f} s)\n', flush=True)
    parts.append(f'Total: {time.perf_counter()-t0:.0f} s.')
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text('\n\n'.join(parts) + '\n')
    print(f'written: {out}')
    if failed: sys.exit(f'sections not measured: {", ".join(failed)}')

if __name__ == '__main__': main()
