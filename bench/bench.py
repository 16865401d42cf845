"""fastaccum's benchmarks: exactness, speed, overhead, memory and DDP, against fastai's built-in callback, fastxtend 0.1.7
and a hand-written loop. Not part of the package: run it from a clone with `bash tools/bench.sh` (or, once the
environment is set up, `.venv/bin/python bench/bench.py`); it writes `bench/results/` (results.md, results.json, charts),
which the Benchmarks page of the docs shows.

Timings are ratios measured side by side in one run, never asserted: each comparison alternates its runs, and the
overhead table takes the median of the ratios of paired runs, which cancels the drift of a shared machine. Every table
runs on one thread (set on import, `limit_threads`); an epoch is timed from outside fastai's training phase
(`fit_timed`), since a timing callback is dispatched at every batch event and adds to what it times; and the Learners
carry only the callbacks meant (importing fastxtend adds its `LogDispatch` to fastai's defaults: it is taken out again).
"""
from __future__ import annotations
import gc, json, math, os, socket, statistics, subprocess, sys, tempfile, textwrap, time
from copy import deepcopy
from functools import partial
from pathlib import Path

def limit_threads():
    "One thread for torch, here and in the processes the benchmarks start (DDP, fresh-process memory): every timed table runs under it"
    for var in ('OMP_NUM_THREADS', 'MKL_NUM_THREADS'): os.environ[var] = '1'
    import torch; torch.set_num_threads(1)

limit_threads()   # the one place: on import, before torch starts its thread pool and before any table is timed
import numpy as np, pandas as pd, torch, fastai
from torch import nn
import torch.nn.functional as F
from fastcore.script import call_parse
from fastprogress.fastprogress import progress_bar
from fastai.basics import *
from fastai.callback.core import _inner_loop
from fastai.callback.progress import ProgressCallback
from fastai.test_utils import synth_learner
from fastcore.xtras import modify_exception
from fastai.callback.training import GradientAccumulation as FastaiGradientAccumulation
from fastaccum.accumulate import GradientAccumulation
from fastaccum.noise import GradientNoiseScale
from fastaccum.testing import reference_fit_windows, reference_windows

def _fastxtend():
    "fastxtend 0.1.7's `GradientAccumulation` and `LogDispatch`, or `None` where fastxtend is not installed"
    try:
        from fastxtend.callback.gradaccum import GradientAccumulation as FastxtendGradientAccumulation
        from fastxtend.callback.utils import LogDispatch
    except Exception: return None
    # importing fastxtend appends its `LogDispatch` to fastai's `defaults.callbacks`, so every later Learner (fastai's,
    # fastaccum's, the hand-timed ones) would carry it: it is taken out again, and only fastxtend's runs get it (`make_callbacks`)
    while LogDispatch in defaults.callbacks: defaults.callbacks.remove(LogDispatch)
    return FastxtendGradientAccumulation,LogDispatch

def fastxtend_callback():
    "fastxtend 0.1.7's `GradientAccumulation`, or `None` where fastxtend is not installed"
    fx = _fastxtend()
    return fx and fx[0]

def make_callbacks(method:str, # 'fastaccum', 'fastai built-in' or 'fastxtend'
                   accum_bs:int, # Samples per optimizer step
                  )->list:
    "The callbacks `method` adds to a Learner, for `accum_bs` samples per step"
    if method == 'fastaccum': return [GradientAccumulation(accum_bs)]
    if method == 'fastai built-in': return [FastaiGradientAccumulation(n_acc=accum_bs)]
    # fastxtend defaults to drop_last=True, and then skips micro-batches of full windows (its check runs per
    # micro-batch, not per window): with drop_last=False it does the same work as the others. Its users' Learners
    # carry its `LogDispatch` (a default callback once fastxtend is imported), and so do its runs here
    if method == 'fastxtend':
        fastxtend_ga,log_dispatch = _fastxtend()
        return [fastxtend_ga(accum_bs, drop_last=False), log_dispatch()]
    raise ValueError(f'unknown method {method!r}')

class TinyTransformer(nn.Module):
    "A 2-layer causal transformer over a vocabulary of 64 (no dropout)"
    def __init__(self, vocab=64, d=64, n_layer=2, seq_len=32):
        super().__init__()
        self.tok,self.pos = nn.Embedding(vocab, d),nn.Embedding(seq_len, d)
        layer = nn.TransformerEncoderLayer(d, 4, 4*d, dropout=0., batch_first=True, norm_first=True)
        self.blocks,self.head = nn.TransformerEncoder(layer, n_layer, enable_nested_tensor=False),nn.Linear(d, vocab)
    def forward(self, x):
        mask = nn.Transformer.generate_square_subsequent_mask(x.shape[1])
        return self.head(self.blocks(self.tok(x) + self.pos(torch.arange(x.shape[1])), mask=mask, is_causal=True))

def _token_loss(pred, targ): return F.cross_entropy(pred.reshape(-1, pred.shape[-1]), targ.reshape(-1))

def workload(name:str, # 'mlp' or 'transformer'
             quick:bool=False, # A smaller data set, for a smoke test
            )->dict:
    "Data, model, loss and micro-batch size of a benchmark workload"
    g = torch.Generator().manual_seed(0); torch.manual_seed(0)
    if name == 'mlp':
        n = 512 if quick else 4096
        x = torch.randn(n, 64, generator=g)
        return dict(x=x, y=(x[:, :10]).argmax(1), model=nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10)),
                    loss_func=F.cross_entropy, bs=32)
    n = 64 if quick else 512
    x = torch.randint(0, 64, (n, 32), generator=g)
    return dict(x=x, y=torch.roll(x, -1, 1), model=TinyTransformer(), loss_func=_token_loss, bs=8)

def fit_timed(learn:Learner, # A Learner, trained for one epoch
              clock=time.perf_counter, # `time.perf_counter` (wall time) or `time.process_time` (CPU time)
             )->float:
    "Seconds of the training epoch of `learn.fit(1)`, timed from outside: no callback is added to time it"
    # (a timing callback is dispatched at every event of every batch, and so adds to what it times)
    train,seconds = learn._do_epoch_train,[]
    def timed_train():
        start = clock()
        train()
        seconds.append(clock() - start)
    learn._do_epoch_train = timed_train   # an instance attribute: fastai's `Learner._do_epoch` calls it in place of its method
    with learn.no_bar(), learn.no_logging(): learn.fit(1)
    return seconds[0]

def _fastai_epoch(w, method, k):
    ds = list(zip(w['x'], w['y']))
    learn = Learner(DataLoaders(DataLoader(ds, bs=w['bs']), DataLoader(ds[:w['bs']], bs=w['bs'])), deepcopy(w['model']),
                    loss_func=w['loss_func'], opt_func=partial(SGD, mom=0.9), lr=0.01, cbs=make_callbacks(method, k*w['bs']))
    return fit_timed(learn)

def _hand_epoch(w, k):
    model,bs = deepcopy(w['model']),w['bs']
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    batches = [(w['x'][i:i+bs], w['y'][i:i+bs]) for i in range(0, len(w['x']), bs)]
    start = time.perf_counter()
    for i,(xb,yb) in enumerate(batches):
        (w['loss_func'](model(xb), yb)/k).backward()
        if (i+1) % k == 0 or i == len(batches)-1: opt.step(); opt.zero_grad()
    return time.perf_counter() - start

def time_epoch(w:dict, # A `workload`
               method:str, # 'hand loop', 'fastai built-in', 'fastaccum' or 'fastxtend'
               k:int, # Micro-batches per optimizer step
              )->float:
    "Seconds for one training epoch of `w` with `method`"
    return _hand_epoch(w, k) if method == 'hand loop' else _fastai_epoch(w, method, k)

def methods()->list:
    "The methods to compare: fastxtend only where it is installed"
    return ['hand loop', 'fastai built-in', 'fastaccum'] + (['fastxtend'] if fastxtend_callback() else [])

def speed_table(quick:bool=False, # One repeat and two accumulation sizes, for a smoke test
                repeats:int=5, # Runs of every configuration (alternating methods); the median counts
               )->pd.DataFrame:
    "Median seconds per training epoch for every workload, accumulation size and method"
    rows,ks = [],((1, 4) if quick else (1, 4, 8, 32))
    configs = [(name, k) for name in ('mlp', 'transformer') for k in ks]
    for name,k in progress_bar(configs):
        w = workload(name, quick)
        for m in methods(): time_epoch(w, m, k)                  # warm-up
        times = {m: [] for m in methods()}
        for r in range(1 if quick else repeats):
            for m in (methods() if r % 2 == 0 else methods()[::-1]): times[m].append(time_epoch(w, m, k))
        rows.append(dict(workload=name, micro_batches=k, **{m: statistics.median(t) for m,t in times.items()}))
    return pd.DataFrame(rows)

def _accumulated_model(method, model, x, y, bs, accum_bs, epochs):
    if method == 'hand loop':
        m,k = deepcopy(model),math.ceil(accum_bs/bs)
        opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
        for _ in range(epochs):
            starts = range(0, len(x), bs)
            for i,s in enumerate(starts):
                (F.cross_entropy(m(x[s:s+bs]), y[s:s+bs])/k).backward()
                if (i+1) % k == 0 or i == len(starts)-1: opt.step(); opt.zero_grad()
        return m
    ds = list(zip(x, y))
    learn = Learner(DataLoaders(DataLoader(ds, bs=bs), DataLoader(ds[:bs], bs=bs)), deepcopy(model), loss_func=F.cross_entropy,
                    opt_func=partial(SGD, mom=0.9), lr=0.1, cbs=make_callbacks(method, accum_bs))
    with learn.no_bar(), learn.no_logging(): learn.fit(epochs)
    return learn.model

def exactness_table(epochs:int=3, # Epochs of training
                   )->pd.DataFrame:
    "Largest weight difference to the large-batch run, for each method, with `accum_bs` 100 and 96 (micro-batches of 32)"
    g = torch.Generator().manual_seed(1)
    x = torch.randn(1000, 64, generator=g); y = x[:, :10].argmax(1)
    torch.manual_seed(1); model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))
    bs,rows = 32,{}
    for accum_bs in (100, 96):
        windows = [list(range(a, b)) for _ in range(epochs) for a,b in reference_windows(len(x), bs, accum_bs)]
        large = reference_fit_windows(deepcopy(model), x, y, windows, lr=0.1)
        for method in methods():
            try: m = _accumulated_model(method, model, x, y, bs, accum_bs, epochs)
            except ValueError as e:   # fastxtend refuses an accum_bs that is not a multiple of the micro-batch size
                rows.setdefault(method, {})[f'accum_bs={accum_bs}'] = 'refused: ' + str(e).split(':')[-1].strip()
                continue
            diff = max((p-q).abs().max().item() for p,q in zip(m.parameters(), large.parameters()))
            rows.setdefault(method, {})[f'accum_bs={accum_bs}'] = diff
    return pd.DataFrame(rows).T.rename_axis('method')

def _memory_model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(256, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 10))

class _SavedBytes(Callback):
    "The largest number of bytes autograd holds for backward at any micro-batch, beyond the weights (the model's baseline)"
    def before_fit(self): self.peak,self.weights = 0,{p.untyped_storage().data_ptr() for p in self.model.parameters()}
    def before_batch(self):
        self.held = 0
        def pack(t):
            if t.untyped_storage().data_ptr() not in self.weights:
                self.held += t.numel()*t.element_size(); self.peak = max(self.peak, self.held)
            return t
        self.hooks = torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t)
        self.hooks.__enter__()
    def after_loss(self): self.hooks.__exit__(None, None, None)

def saved_bytes(accum_bs:int, # Samples per optimizer step
                large:bool, # One batch of `accum_bs` instead of micro-batches of 32 with fastaccum
               )->int:
    "Peak bytes saved for backward over one window"
    x = torch.randn(accum_bs, 256); y = torch.randint(0, 10, (accum_bs,)); ds = list(zip(x, y))
    bs = accum_bs if large else 32
    learn = Learner(DataLoaders(DataLoader(ds, bs=bs), DataLoader(ds[:32], bs=32)), _memory_model(), loss_func=F.cross_entropy,
                    cbs=[_SavedBytes()] + ([] if large else [GradientAccumulation(accum_bs)]))
    with learn.no_bar(), learn.no_logging(): learn.fit(1)
    return learn._saved_bytes.peak

_RSS_SCRIPT = textwrap.dedent("""
    import re, sys, torch, warnings
    warnings.simplefilter('ignore')
    from fastai.basics import *
    from fastaccum.accumulate import GradientAccumulation
    accum_bs,large = int(sys.argv[1]),sys.argv[2] == 'large'
    torch.manual_seed(0); torch.set_num_threads(1)
    x = torch.randn(accum_bs, 256); y = torch.randint(0, 10, (accum_bs,)); ds = list(zip(x, y))
    bs = accum_bs if large else 32
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(256, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 10))
    learn = Learner(DataLoaders(DataLoader(ds, bs=bs), DataLoader(ds[:32], bs=32)), model, loss_func=F.cross_entropy,
                    cbs=[] if large else [GradientAccumulation(accum_bs)])
    learn.create_opt()
    def status(key): return int(re.search(rf'{key}:\\s+(\\d+) kB', open('/proc/self/status').read()).group(1))
    open('/proc/self/clear_refs', 'w').write('5')   # reset the peak (VmHWM) to the current resident size
    base = status('VmRSS')
    with learn.no_bar(), learn.no_logging(): learn.fit(1)
    print(status('VmHWM') - base)
""")

def peak_rss_kib(accum_bs:int, # Samples per optimizer step
                 large:bool, # One batch of `accum_bs` instead of micro-batches of 32 with fastaccum
                )->int:
    "Peak resident memory (KiB) of a fresh process training one window, above its level before training"
    res = subprocess.run([sys.executable, '-c', _RSS_SCRIPT, str(accum_bs), 'large' if large else 'accum'],
                         capture_output=True, text=True, check=True)
    return int(res.stdout.strip().splitlines()[-1])

def memory_table(quick:bool=False, # Fewer sizes and no fresh processes, for a smoke test
                )->pd.DataFrame:
    "Memory above the baseline as `accum_bs` grows: fastaccum (micro-batches of 32) against one large batch"
    rows = []
    for accum_bs in progress_bar((64, 256) if quick else (64, 256, 1024, 4096)):
        row = dict(accum_bs=accum_bs, saved_MiB_fastaccum=saved_bytes(accum_bs, False)/2**20, saved_MiB_large=saved_bytes(accum_bs, True)/2**20)
        if not quick and sys.platform.startswith('linux'):   # read from /proc
            row.update(rss_MiB_fastaccum=peak_rss_kib(accum_bs, False)/1024, rss_MiB_large=peak_rss_kib(accum_bs, True)/1024)
        rows.append(row)
    return pd.DataFrame(rows)

_DDP_SCRIPT = textwrap.dedent('''
    import json, sys, time, statistics, warnings
    from copy import deepcopy
    warnings.simplefilter('ignore')
    from fastai.basics import *
    from fastai.distributed import *
    from fastai.callback.training import GradientAccumulation as FastaiGradientAccumulation
    from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook
    from fastaccum.accumulate import GradientAccumulation
    from fastaccum.distributed import fix_distributed_dl_broadcast

    class CountAllReduce(Callback):
        "Count DDP's bucket all-reduces, and the micro-batches whose backward synchronized gradients"
        order = 12   # after fastai's DistributedTrainer (11) wrapped the model in DDP
        def before_fit(self):
            fix_distributed_dl_broadcast(self.dls)   # CPU DDP, for fastai's callback too
            self.n,self.synced = 0,set()
            def hook(process_group, bucket):
                self.n += 1; self.synced.add(self.learn.train_iter)
                return allreduce_hook(process_group, bucket)
            self.model.register_comm_hook(None, hook)

    repeats = int(sys.argv[2])
    torch.manual_seed(0); torch.set_num_threads(1)
    x,y = torch.randn(512, 64),torch.randint(0, 10, (512,))
    model = nn.Sequential(nn.Linear(64, 2048), nn.ReLU(), nn.Linear(2048, 2048), nn.ReLU(), nn.Linear(2048, 10))
    samples = list(zip(x, y))
    def epoch(cb):
        learn = Learner(DataLoaders(DataLoader(samples, bs=16), DataLoader(samples[:16], bs=16)), deepcopy(model),
                        loss_func=F.cross_entropy, cbs=[cb, CountAllReduce()])
        with learn.distrib_ctx(cpu=True):
            with learn.no_bar(), learn.no_logging():
                torch.distributed.barrier(); start = time.perf_counter()
                learn.fit(1)
                torch.distributed.barrier(); secs = time.perf_counter() - start
        return secs, len(learn.count_all_reduce.synced), learn.count_all_reduce.n
    results = {'fastaccum': [], 'fastai built-in': []}
    for _ in range(repeats):
        results['fastaccum'].append(epoch(GradientAccumulation(128)))
        results['fastai built-in'].append(epoch(FastaiGradientAccumulation(n_acc=64)))   # fastai counts each process's samples
    out = {k: dict(seconds=statistics.median(s for s,*_ in v), syncs=int(v[0][1]), bucket_allreduces=int(v[0][2])) for k,v in results.items()}
    json.dump(out, open(f'{sys.argv[1]}/rank{rank_distrib()}.json', 'w'))
''')

def _free_port():
    with socket.socket() as s: s.bind(('127.0.0.1', 0)); return s.getsockname()[1]

def ddp_table(repeats:int=3, # Epochs timed per method, alternating; the median counts
             )->pd.DataFrame:
    "fastaccum vs fastai's built-in callback under 2-process CPU DDP: synchronizing backwards, bucket all-reduces, seconds per epoch"
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, 'ddp.py').write_text(_DDP_SCRIPT)
        res = subprocess.run([str(Path(sys.executable).parent/'torchrun'), '--nproc_per_node', '2', '--master_addr', '127.0.0.1',
                              '--master_port', str(_free_port()), f'{tmp}/ddp.py', tmp, str(repeats)], capture_output=True, text=True)
        if res.returncode: raise RuntimeError(res.stdout[-3000:] + res.stderr[-3000:])
        table = pd.DataFrame(json.loads(Path(tmp, 'rank0.json').read_text())).T   # (transposed, every column is float)
        return table.astype(dict(seconds=float, syncs=int, bucket_allreduces=int))


# -- overheads: each a paired comparison on the CPU MLP (4096 samples, micro-batches of 16)
_FASTAI_DEFAULT_CBS = (TrainEvalCallback, Recorder, CastToTensor)   # fastai's own `defaults.callbacks` (the bar is taken out by `fit_timed`)

def _mlp_epoch(bs, cbs, x, y, model):
    "CPU seconds of one training epoch of the MLP on loader batches of `bs`"
    ds = list(zip(x, y))
    learn = Learner(DataLoaders(DataLoader(ds, bs=bs, shuffle=False), DataLoader(ds[:16], bs=16)), deepcopy(model),
                    loss_func=F.cross_entropy, opt_func=partial(SGD, mom=0.9), lr=0.01, cbs=list(cbs))
    held,meant = sorted(type(cb).__name__ for cb in learn.cbs if type(cb) is not ProgressCallback),sorted(c.__name__ for c in _FASTAI_DEFAULT_CBS)
    assert held == sorted(meant + [type(cb).__name__ for cb in cbs]), f'the Learner holds callbacks not meant: {held}'
    gc.collect()   # the previous run's garbage is collected before, not during, this one
    return fit_timed(learn, clock=time.process_time)

OVERHEADS = {   # what is measured: (loader bs, callbacks) against (loader bs, callbacks); the target the issues set
    'fastaccum, a step per micro-batch / plain fastai': ((16, lambda: [GradientAccumulation(16)]), (16, lambda: []), 1.02),
    'micro_batch_size=16 on batches of 64 / a loader of 16 (accum_bs=64)':
        ((64, lambda: [GradientAccumulation(micro_batch_size=16)]), (16, lambda: [GradientAccumulation(64)]), 1.02),
    'GradientNoiseScale() / without (accum_bs=64)': ((16, lambda: [GradientAccumulation(64), GradientNoiseScale()]), (16, lambda: [GradientAccumulation(64)]), 1.05),
    'GradientNoiseScale(every=True) / without (accum_bs=64)':
        ((16, lambda: [GradientAccumulation(64), GradientNoiseScale(every=True)]), (16, lambda: [GradientAccumulation(64)]), 1.05),
}

def _mlp_data(quick):
    g = torch.Generator().manual_seed(0); torch.manual_seed(0)
    x = torch.randn(512 if quick else 4096, 64, generator=g); y = x[:, :10].argmax(1)
    return x, y, nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))

def _quartiles(ratios):
    q1,med,q3 = statistics.quantiles(ratios, n=4) if len(ratios) > 2 else (min(ratios), statistics.median(ratios), max(ratios))
    return dict(ratio=statistics.median(ratios), lower_quartile=q1, upper_quartile=q3)

def overhead_table(pairs:int=61, # Paired runs per comparison (an epoch varies by about 5% on a shared 2-core machine)
                   quick:bool=False, # Fewer samples and pairs, for a smoke test
                  )->pd.DataFrame:
    "Each comparison's median ratio of paired epoch times (and its quartiles), beside its target"
    x,y,model = _mlp_data(quick)
    rows = []
    for name,((bs_a, cbs_a),(bs_b, cbs_b),target) in OVERHEADS.items():
        _mlp_epoch(bs_a, cbs_a(), x, y, model); _mlp_epoch(bs_b, cbs_b(), x, y, model)   # warm-up
        ratios = []
        for i in range(3 if quick else pairs):   # alternating which runs first
            if i % 2: a = _mlp_epoch(bs_a, cbs_a(), x, y, model); b = _mlp_epoch(bs_b, cbs_b(), x, y, model)
            else: b = _mlp_epoch(bs_b, cbs_b(), x, y, model); a = _mlp_epoch(bs_a, cbs_a(), x, y, model)
            ratios.append(a/b)
        rows.append(dict(comparison=name, **_quartiles(ratios), target=target))
    return pd.DataFrame(rows)

# -- dispatch: would a batch-event dispatch of fastaccum's own matter, against fastai's `Callback.__call__`?
def _noop(self): pass
_NOOP_BATCH_EVENTS = {event: _noop for event in _inner_loop}   # every batch event fastai dispatches, doing nothing
_BATCH_EVENTS = frozenset(_inner_loop)
_CANCELS = (CancelBatchException, CancelBackwardException, CancelEpochException, CancelFitException, CancelStepException,
            CancelTrainException, CancelValidException)
# fastai's dispatch: a training-only callback whose batch events do nothing
_EmptyCallback = type('EmptyCallback', (Callback,), dict(run_valid=False, **_NOOP_BATCH_EVENTS))

def _dispatch_callbacks()->dict:
    "Name: a callback class doing nothing, for each dispatch measured (fastaccum's only while it has `BatchCallback`)"
    # (a fastai `Callback` looks an event it does not define up on the Learner, then the model: a failed lookup at each call)
    # (and its `getattr(self, 'training', True)` at each batch event goes through `GetAttr` to the Learner: a property is quicker)
    cbs = {'fastai Callback, no-op batch events': _EmptyCallback,
           'fastai Callback, no batch events defined': type('BareCallback', (Callback,), dict(run_valid=False)),
           'fastai Callback, no-op batch events, `training` a property': type('EmptyPropertyCallback', (_EmptyCallback,),
                                                                             dict(training=property(lambda self: self.learn.training)))}
    try: from fastaccum.integrations import BatchCallback
    except ImportError: return cbs
    class LookupBatchCallback(BatchCallback):
        "A dispatch of its own (fastaccum's earlier `BatchCallback`), looking a batch event's handler up on the class at each call"
        def __call__(self, event_name):
            if event_name not in _BATCH_EVENTS: return Callback.__call__(self, event_name)
            method = getattr(type(self), event_name, None)
            if method is None or not (self.run and self.run_train and self.learn.training): return None
            try: return method(self)
            except _CANCELS: raise
            except Exception as e:
                raise modify_exception(e, f'Exception occured in `{type(self).__name__}` when calling event `{event_name}`:\n\t{e.args[0] if e.args else e!r}', replace=True)
    cbs["fastaccum BatchCallback (fastai's dispatch, every batch event defined), no-op batch events"] = type('EmptyBatchCallback', (BatchCallback,), dict(_NOOP_BATCH_EVENTS))
    cbs["a custom dispatch (fastaccum's earlier), handler looked up at each call, no-op batch events"] = type('EmptyLookupBatchCallback', (LookupBatchCallback,), dict(_NOOP_BATCH_EVENTS))
    return cbs

def _ns_per_event(cb_class, calls=20_000, repeats=7):
    "CPU nanoseconds of one call `cb(event)` of a `cb_class` in training, over fastai's batch events (the median of `repeats`)"
    learn = synth_learner(cbs=cb_class()); learn.training = True
    cb,events = learn.cbs[-1],list(_inner_loop)
    assert type(cb) is cb_class
    def one():
        start = time.process_time()
        for _ in range(calls // len(events)):
            for e in events: cb(e)
        return (time.process_time() - start)/(calls // len(events) * len(events))*1e9
    one()
    return statistics.median(one() for _ in range(repeats))

def dispatch_table(rounds:int=61, # Rounds of epochs, one per dispatch and one without a callback, in rotating order
                   quick:bool=False, # Fewer samples and rounds, for a smoke test
                  )->pd.DataFrame:
    "A callback doing nothing, of each dispatch, against none: the median ratio of epoch times in the same round, and CPU ns per dispatched event"
    x,y,model = _mlp_data(quick)
    configs = {'none': None, **_dispatch_callbacks()}
    run = lambda cls: _mlp_epoch(16, [cls()] if cls else [], x, y, model)
    for cls in configs.values(): run(cls)   # warm-up
    times = {name: [] for name in configs}
    names = list(configs)
    for r in range(3 if quick else rounds):
        order = names[r % len(names):] + names[:r % len(names)]   # each config runs first, second... in turn
        for name in (order if r % 2 == 0 else order[::-1]): times[name].append(run(configs[name]))
    return pd.DataFrame([dict(comparison=f'{name} / none', **_quartiles([a/b for a,b in zip(times[name], times['none'])]),
                              ns_per_event=_ns_per_event(cls)) for name,cls in configs.items() if cls])

# -- the report
def _ratio_columns(speed):
    "Each method's time as ratios to fastai's built-in callback and to the hand-written loop"
    out = speed[['workload', 'micro_batches']].copy()
    for m in [m for m in methods() if m not in ('hand loop', 'fastai built-in')]:
        out[f'{m} / fastai built-in'] = speed[m]/speed['fastai built-in']
    for m in [m for m in methods() if m != 'hand loop']:
        out[f'{m} / hand loop'] = speed[m]/speed['hand loop']
    return out

def _charts(speed, exact, memory, out):
    import matplotlib; matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    fig,axes = plt.subplots(1, 2, figsize=(11, 3.8), layout='constrained')
    for ax,(name,part) in zip(axes, speed.groupby('workload', sort=False)):
        others = [m for m in methods() if m != 'fastai built-in']
        xs = np.arange(len(part))
        for i,m in enumerate(others):
            ax.bar(xs + (i-len(others)/2+0.5)*0.25, part[m]/part['fastai built-in'], 0.25, label=m)
        ax.axhline(1, color='grey', lw=1, ls='--'); ax.set_xticks(xs, part.micro_batches)
        ax.set_title(f'{name}: time per epoch / fastai built-in'); ax.set_xlabel('micro-batches per step')
    axes[0].legend(); fig.savefig(out/'speed.png', dpi=90); plt.close(fig)
    fig,ax = plt.subplots(figsize=(7, 3.2), layout='constrained')
    numbers = exact.apply(pd.to_numeric, errors='coerce')
    ys = np.arange(len(numbers))
    for i,col in enumerate(numbers.columns):
        ax.barh(ys + (i-0.5)*0.38, numbers[col].clip(lower=1e-9), 0.38, label=col)
    ax.set_yticks(ys, numbers.index); ax.set_xscale('log'); ax.legend()
    ax.set_xlabel('max weight difference to the large batch (log; a missing bar: refused)')
    fig.savefig(out/'exactness.png', dpi=90); plt.close(fig)
    fig,ax = plt.subplots(figsize=(6, 3.5), layout='constrained')
    for col,style in (('saved_MiB_fastaccum', 'o-'), ('saved_MiB_large', 'o--'), ('rss_MiB_fastaccum', 's-'), ('rss_MiB_large', 's--')):
        if col in memory: ax.plot(memory.accum_bs, memory[col], style, label=col.replace('_MiB_', ' MiB, '))
    ax.set_xscale('log', base=2); ax.set_xlabel('accum_bs'); ax.set_ylabel('MiB above baseline'); ax.legend()
    fig.savefig(out/'memory.png', dpi=90); plt.close(fig)

def _markdown(df, formats, index=False):
    "A markdown table with one number format per column: ints as ints, and the format given by the column's name"
    df = df.copy()
    for col in df.columns:
        fmt = next((f for key,f in formats.items() if key in str(col)), None)
        if fmt: df[col] = [fmt.format(v) if isinstance(v, (int, float, np.number)) and not isinstance(v, bool) else v for v in df[col]]
    return df.to_markdown(index=index, disable_numparse=True)   # (tabulate would parse the formatted numbers back)

def run_benchmarks(out:str='bench/results', # Folder for results.md, results.json and the PNG charts
                   quick:bool=False, # A smoke test: small data, one repeat, no DDP or fresh processes
                   ddp:bool=True, # Include the 2-process DDP comparison
                  )->str:
    "Run every benchmark; write `results.md`, `results.json` and the charts to `out`; return the markdown"
    out = Path(out); out.mkdir(parents=True, exist_ok=True)
    speed,exact,memory = speed_table(quick),exactness_table(),memory_table(quick)
    overhead,dispatch = overhead_table(quick=quick),dispatch_table(quick=quick)
    tables = dict(speed=speed, ratios=_ratio_columns(speed), exactness=exact.reset_index(), memory=memory, overhead=overhead, dispatch=dispatch)
    if ddp and not quick: tables['ddp'] = ddp_table().reset_index(names='method')
    fx = 'fastxtend 0.1.7' if fastxtend_callback() else 'fastxtend: not installed (pip install fastxtend==0.1.7)'
    setup = f'{os.cpu_count()} CPU cores, torch {torch.__version__}, fastai {fastai.__version__}; {fx}'
    fmt = {'ns_per_event': '{:.0f}', 'seconds': '{:.4f}', ' / ': '{:.3f}', 'ratio': '{:.3f}', 'quartile': '{:.3f}', 'target': '{:.2f}', 'MiB': '{:.2f}', 'accum_bs=': '{:.1e}',
           'mlp': '{:.4f}', 'transformer': '{:.4f}', 'hand loop': '{:.4f}', 'fastai built-in': '{:.4f}', 'fastaccum': '{:.4f}', 'fastxtend': '{:.4f}'}
    parts = [f'Measured on {setup}.',
             '### Overhead (CPU seconds per epoch, as a ratio; median of paired runs)', _markdown(overhead, fmt),
             '### Dispatch: a callback doing nothing against none (CPU seconds per epoch, as a ratio; CPU ns per dispatched batch event)',
             _markdown(dispatch, fmt),
             '### Wall time (seconds per training epoch, median)', _markdown(speed, {k: '{:.4f}' for k in methods()}),
             '### Wall time as ratios', _markdown(tables['ratios'], {' / ': '{:.3f}'}),
             '### Exactness (max weight difference to the large batch)', _markdown(tables['exactness'], {'accum_bs=': '{:.1e}'}),
             '### Memory above the baseline (MiB)', _markdown(memory, {'MiB': '{:.2f}'})]
    if 'ddp' in tables: parts += ['### 2-process DDP on the CPU', _markdown(tables['ddp'], {'seconds': '{:.3f}'})]
    md = '\n\n'.join(parts) + '\n'
    (out/'results.md').write_text(md)
    (out/'results.json').write_text(json.dumps(dict(setup=setup, **{k: json.loads(v.to_json(orient='records')) for k,v in tables.items()}), indent=1))
    _charts(speed, exact, memory, out)
    return md

@call_parse
def main(out:str='bench/results', # Folder for results.md, results.json and the PNG charts
         quick:bool=False, # A smoke test: small data, one repeat, no DDP or fresh processes
         no_ddp:bool=False, # Leave out the 2-process DDP comparison
        ):
    "Benchmark fastaccum against fastai's built-in callback, fastxtend and a hand-written loop"
    print(run_benchmarks(out, quick, not no_ddp))
