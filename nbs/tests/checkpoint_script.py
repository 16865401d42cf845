"""A fastai script of one or more fits, run as `TrainingCheckpoint`'s tests need it: uninterrupted (without the
checkpoint), then with `TrainingCheckpoint(resume=True)`, killed with `os._exit` (no cleanup, as SIGKILL) at each of the
given points in turn, each kill in its own process, and started again after each, until a process runs to the end.

Not a page: the tests of nbs/tests/checkpoint.ipynb and nbs/tests/checkpoint_scripts.ipynb run it (`run_scripts`).

    python checkpoint_script.py SPEC FOLDER

SPEC is JSON, one script or a list of them (the i-th run in FOLDER/i):
- loader: 'plain' (fastai's shuffled DataLoader), 'weighted' (WeightedDL), 'sorted' (SortedDL) or 'lm' (LMDataLoader)
- accum: None, 'ga' (GradientAccumulation, 3 loader batches a step), 'drop' (the same with drop_last=True),
  'loader_bs' (accum_bs=None: a loader batch a step, in micro-batches of half of it), 'split' (micro-batches of half a
  loader batch, 5 of them a step: steps inside loader batches),
  'gns' (micro_batch_size='auto' on a model that runs out of memory above half a loader batch, and
  GradientNoiseScale(adapt=True)) or 'schedule' (GradientAccumulationSchedule)
- opt: 'adam', 'ranger', 'sgd', 'lookahead' (Lookahead(SGD)) or 'adamw' (PyTorch's, in OptimWrapper)
- steps: the script, a list of [what, epochs]: what is 'fit', 'fit_one_cycle', 'fine_tune' or 'lr_find' (no epochs)
- folds: the script is run for each of this many folds, each a new Learner on its own part of the data (default 1)
- extras: any of 'csv' (CSVLogger), 'csv_append' (CSVLogger(append=True)), 'save' (SaveModelCallback tracking the highest validation loss), 'early'
  (EarlyStoppingCallback that stops after 2 epochs), 'train_metrics'
- every_steps: TrainingCheckpoint's (default 2); fname: its (default 'checkpoint')
- lrs: the lr of each fit step (default 1e-2 each)
- kills: a list of [kind, n]: the process dies the n-th time `kind` happens in it: 'window' (a micro-batch's backward
  that does not step), 'step' (after a step, before its checkpoint), 'batch' (after a training batch, its checkpoint
  written), 'valid' (a validation batch), 'epoch' (after an epoch, its checkpoint written), 'write' (half-way through
  writing a checkpoint), 'fit' (when a fit has ended, its last checkpoint written); 'interrupt' raises a
  KeyboardInterrupt instead (at the n-th training batch), which the script catches, running the same step again,
  as a notebook's cell is run again; 'rerun' likewise, running the whole script again from the top, in the same process
- reference: False to skip the uninterrupted run

With the environment variable CHECKPOINT_SCRIPT_PATCH naming a Python file, every process runs that file first (a
test's change to fastaccum, as a negative control).

FOLDER gets reference.pt (what each fit of the uninterrupted script ended with), final.pt (the same, from the last
process), process{i}.json and process{i}.out (each process's printed lines), exit_codes.json.
"""
from __future__ import annotations
import json, os, sys, traceback, warnings
warnings.simplefilter('ignore')
from fastai.basics import *
from fastai.callback.all import *
from fastai.callback.data import WeightedDL
from fastai.text.data import LMDataLoader, SortedDL
from fastaccum.all import *
from fastaccum import checkpoint, checkpoint_files
from fastaccum.testing import synth_data
torch.set_num_threads(1)

vocab,info,seen = 24,{},{}   # this process: what it did; how often each kind of event happened in it


class Samples(list):
    "The training set, counting the samples it gives out"
    def __getitem__(self, i):
        seen['loaded'] = seen.get('loaded', 0) + 1
        return super().__getitem__(i)

class RowLimit(nn.Module):
    "Runs out of memory (simulated) when training on more than `limit` rows: micro_batch_size='auto' finds `limit`"
    def __init__(self, limit): super().__init__(); self.limit = limit
    def forward(self, x):
        if self.training and x.shape[0] > self.limit: raise torch.OutOfMemoryError('CUDA out of memory (simulated)')
        return x

def loaders(fold):
    "The training and validation loaders: fold `fold` holds out its own part of the data"
    kind = spec['loader']
    if kind == 'lm':
        g = torch.Generator().manual_seed(0)
        docs = [torch.randint(0, vocab, (int(n),), generator=g) for n in torch.randint(4, 30, (48,), generator=g)]
        valid = docs[8*fold:8*fold+8]
        train = Samples(docs[:8*fold] + docs[8*fold+8:])
        return DataLoaders(LMDataLoader(train, bs=bs, seq_len=6, shuffle=True), LMDataLoader(valid, bs=bs, seq_len=6))
    x,y = synth_data(248)
    held = set(range(48*fold, 48*fold+48))
    train = Samples((x[i], y[i]) for i in range(248) if i not in held)
    valid = [(x[i], y[i]) for i in sorted(held)]
    if kind == 'plain': dl = DataLoader(train, bs=bs, shuffle=True)
    elif kind == 'weighted': dl = WeightedDL(train, bs=bs, wgts=np.linspace(1, 4, len(train)), shuffle=True)
    elif kind == 'sorted': dl = SortedDL(train, res=[(7*i) % 23 for i in range(len(train))], bs=bs, shuffle=True)
    else: raise ValueError(kind)
    return DataLoaders(dl, DataLoader(valid, bs=32))

def accumulation():
    if not spec.get('accum'): return []
    return dict(ga=lambda: [GradientAccumulation(3*bs)],
                drop=lambda: [GradientAccumulation(3*bs, drop_last=True)],
                loader_bs=lambda: [GradientAccumulation(micro_batch_size=bs//2)],
                split=lambda: [GradientAccumulation(5*bs//2, micro_batch_size=bs//2)],
                gns=lambda: [GradientAccumulation(3*bs, micro_batch_size='auto'),
                             GradientNoiseScale(adapt=True, beta=0.5, max_bs=6*bs)],
                schedule=lambda: [GradientAccumulationSchedule(bs, 4*bs, finish=0.7)])[spec['accum']]()

def opt_func():
    return dict(adam=Adam, ranger=ranger, sgd=partial(SGD, mom=0.9),
                lookahead=lambda params, **kw: Lookahead(SGD(params, mom=0.9, **kw)),
                adamw=partial(OptimWrapper, opt=torch.optim.AdamW))[spec.get('opt', 'adam')]

def extras():
    chosen = spec.get('extras', [])
    return ([CSVLogger()] if 'csv' in chosen else []) + ([CSVLogger(append=True)] if 'csv_append' in chosen else []) + \
           ([SaveModelCallback(monitor='valid_loss', comp=np.greater)] if 'save' in chosen else []) + \
           ([EarlyStoppingCallback(monitor='valid_loss', comp=np.greater, patience=1)] if 'early' in chosen else [])

def learner(fold, path, cbs):
    set_seed(fold)
    dls = loaders(fold)
    torch.manual_seed(1)
    limit = RowLimit(bs//2 if spec.get('accum') == 'gns' else 10**6)
    if spec['loader'] == 'lm':
        model = nn.Sequential(nn.Embedding(vocab, 16), nn.Dropout(0.2), limit, nn.Linear(16, vocab))
        loss = CrossEntropyLossFlat()
    else:
        model = nn.Sequential(nn.Linear(5, 32), nn.ReLU(), nn.Dropout(0.3), limit, nn.Linear(32, 3))
        loss = F.cross_entropy
    learn = Learner(dls, model, loss_func=loss, opt_func=opt_func(), lr=1e-2, metrics=accuracy, path=path,
                    splitter=lambda m: [list(m[0].parameters()), list(m[1:].parameters())],
                    cbs=accumulation() + extras() + cbs)
    learn.recorder.train_metrics = 'train_metrics' in spec.get('extras', [])
    return learn


def die(kind):
    "Exit at once: no cleanup, no `finally` (as SIGKILL)"
    info.update(killed=kind)
    (folder/f'process{process}.json').write_text(json.dumps(info))
    sys.stdout.flush()
    os._exit(17)

def happens(kind):
    "Count an event of `kind` in this process; the kill chosen for this process happens at its n-th"
    seen[kind] = seen.get(kind, 0) + 1
    interrupts = kill is not None and kill[0] in ('interrupt', 'rerun')
    if kill is None or kill[0] != kind and not (interrupts and kind == 'batch') or seen[kind] != kill[1]: return
    if interrupts:
        info.setdefault('interrupted', []).append(seen[kind])
        raise KeyboardInterrupt()
    die(kind)

class Kill(Callback):
    "The events that can be chosen to die at"
    order = 100   # after TrainingCheckpoint
    def after_backward(self):
        ga = find_cb(self.learn, GradientAccumulation)
        if ga is None or not ga.will_step: happens('window')
    def after_step(self): happens('step')
    def after_batch(self):
        if self.training: happens('batch')
    def before_batch(self):
        if not self.training: happens('valid')
    def after_epoch(self): happens('epoch')
    def after_fit(self):   # (a fit's end, its last checkpoint written: not lr_find's, nor validate's)
        if not (self.learn.lock.locked() or hasattr(self.learn, 'lr_finder')): happens('fit')

class FirstBatch(Callback):
    "Where each fit of this process started training, and how many samples it had loaded by then"
    order = 101
    def before_fit(self): self.started = False
    def before_batch(self):
        if self.training and not self.started:
            self.started = True
            info.setdefault('starts', []).append([self.epoch, self.iter, seen.get('loaded', 0)])

def tear_writes(n):
    "Die half-way through writing the n-th checkpoint of this process"
    class TornFile(checkpoint_files._HashingFile):
        def __init__(self, f):
            super().__init__(f)
            seen['write'] = seen.get('write', 0) + 1
        def write(self, b):
            if seen['write'] == n and self.n > 2048: die('write')
            return super().write(b)
    checkpoint_files._HashingFile = TornFile

def ended(learn):
    "What a fit ended with: the weights, the Recorder, and the CSV log (without its times)"
    r = learn.recorder
    logged = {'csv', 'csv_append'} & set(spec.get('extras', []))
    csv = (Path(learn.path)/'history.csv').read_text().splitlines() if logged else None
    return dict(weights=[p.detach().clone() for p in learn.model.parameters()], losses=[float(v) for v in r.losses],
                lrs=r.lrs, iters=r.iters, values=r.values, hps=getattr(r, 'hps', None),
                accum_bs=getattr(r, 'accum_bs', None), csv=csv and [l.rsplit(',', 1)[0] for l in csv],
                random=(torch.rand(1).item(), np.random.rand(), random.random()))   # (the random states it left)

def script(path, checkpointed):
    "The script; after a KeyboardInterrupt of kind 'rerun', the whole script again (a notebook run again from the top)"
    while True:
        try: return whole_script(path, checkpointed)
        except KeyboardInterrupt: pass

def whole_script(path, checkpointed):
    "Each fold's Learner and fits; what each fit ended with"
    results = []
    path.mkdir(exist_ok=True)
    for fold in range(spec.get('folds', 1)):
        cbs = [TrainingCheckpoint(fname=spec.get('fname', 'checkpoint'), every_steps=spec.get('every_steps', 2),
                                  resume=True, keep=2)] if checkpointed else []
        learn = learner(fold, path, cbs + [Kill(), FirstBatch()])
        for i,(what,*epochs) in enumerate(spec['steps']):
            lr = spec.get('lrs', [1e-2]*len(spec['steps']))[i]
            while True:   # (a KeyboardInterrupt: the same step again, as a notebook's cell run again)
                try:
                    with learn.no_bar(), learn.no_logging():
                        if what == 'lr_find':
                            learn.lr_find(num_it=12, show_plot=False)
                            r = learn.recorder
                            results.append(dict(lr_find=(list(r.lrs), [float(v) for v in r.losses])))
                        else:
                            if what == 'fine_tune': learn.fine_tune(epochs[0], lr, freeze_epochs=1)
                            else: getattr(learn, what)(epochs[0], lr)
                            results.append(ended(learn))
                    break
                except KeyboardInterrupt:
                    if kill[0] != 'interrupt': raise
    return results

def run(number, chosen):
    "A process: first the uninterrupted script (without the checkpoint), then the checkpointed one, killed at `chosen`"
    global process,kill
    process,kill = number,None
    sys.stdout = open(folder/f'process{process}.out', 'w', buffering=1)
    info['process'] = process
    if process == 0 and spec.get('reference', True):
        torch.save(script(folder/'reference', False), folder/'reference.pt')
        seen.clear()
    kill = chosen
    if kill is not None and kill[0] == 'write': tear_writes(kill[1])
    torch.save(script(folder/'run', True), folder/f'final.pt')
    info.update(killed=None)
    (folder/f'process{process}.json').write_text(json.dumps(info))

def process(spec_, folder_, number, chosen):
    "One process of the script's run: a new one, as a restart makes (it may use CUDA)"
    global spec,folder,bs
    spec,folder,bs = spec_,folder_,(8 if spec_['loader'] == 'lm' else 16)
    import multiprocessing   # its loaders' workers its own children, as PyTorch's are by default on Linux
    multiprocessing.set_start_method('fork', force=True)   # gpu-ready: a new process's loader workers (outlive a kill else)
    if os.environ.get('CHECKPOINT_SCRIPT_PATCH'):   # (a test's change to fastaccum, made in every process)
        import runpy; runpy.run_path(os.environ['CHECKPOINT_SCRIPT_PATCH'])
    try: run(number, chosen)
    except BaseException: traceback.print_exc(); sys.stderr.flush(); os._exit(1)
    os._exit(0)

def new_processes():
    """Processes that start as new ones, without a fork of this one (whatever it started, CUDA included, is no matter):
    PyTorch's CUDA-safe `forkserver`, a server started afresh that has only imported fastai and fastaccum, of which
    each process is a copy (a restart's new process, without its seconds of imports)"""
    import multiprocessing
    ctx = multiprocessing.get_context('forkserver')
    ctx.set_forkserver_preload(['fastai.basics', 'fastai.callback.all', 'fastai.text.data', 'fastaccum.all'])
    return ctx

def run_script(spec_, folder_, ctx=None):
    "The script's runs, each in a new process: a kill ends it with os._exit; the next one resumes"
    ctx = ctx or new_processes()
    folder_.mkdir(parents=True, exist_ok=True)
    codes = []
    for number,chosen in enumerate(spec_.get('kills', []) + [None]):
        child = ctx.Process(target=process, args=(spec_, folder_, number, chosen))
        child.start(); child.join()
        codes.append(child.exitcode)
        if codes[-1] not in (0, 17): break
    (folder_/'exit_codes.json').write_text(json.dumps(codes))


# -- for the notebooks that run this file (importing it runs nothing)
def run_scripts(specs:list, folder:Path, env:dict|None=None, timeout:int=1800)->list:
    "Run this file on `specs` in a new process; for each script its exit codes, processes, and what its fits ended with"
    import subprocess
    res = subprocess.run([sys.executable, __file__, json.dumps(list(specs)), str(folder)], env=env, capture_output=True,
                         text=True, timeout=timeout)
    assert res.returncode == 0, res.stderr[-3000:]
    out = []
    for i,spec in enumerate(specs):
        f = Path(folder)/str(i)
        codes = json.loads((f/'exit_codes.json').read_text())
        assert codes[-1] == 0 and all(c in (0, 17) for c in codes), f'{spec}: exits {codes}\n{res.stderr[-3000:]}'
        processes = []
        for j in range(len(codes)):
            lines = (f/f'process{j}.out').read_text().splitlines()
            said = [l.split(': ', 1)[1] for l in lines if l.startswith('TrainingCheckpoint: ')]
            processes.append(dict(json.loads((f/f'process{j}.json').read_text()), said=said))
        out.append(dict(spec=spec, codes=codes, processes=processes, final=torch.load(f/'final.pt', weights_only=False),
                        reference=torch.load(f/'reference.pt', weights_only=False) if spec.get('reference', True)
                                  else None))
    return out

def differences(final:list, reference:list)->list:
    "What differs between what the fits of two runs of a script ended with: [(fit, what)], empty if nothing, to the bit"
    if len(final) != len(reference): return [('fits', f'{len(final)} and {len(reference)}')]
    out = []
    for i,(a,b) in enumerate(zip(final, reference)):
        for k in sorted(set(a) | set(b)):
            if k == 'weights': same = len(a[k]) == len(b[k]) and all(torch.equal(p, q) for p,q in zip(a[k], b[k]))
            else: same = repr(a.get(k)) == repr(b.get(k))   # (floats, and NumPy's, to the last digit)
            if not same: out.append((i, k))
    return out

if __name__ == '__main__':
    specs = json.loads(sys.argv[1])
    if isinstance(specs, dict): run_script(specs, Path(sys.argv[2]))   # one script, in FOLDER
    else:                                                                # several, the i-th in FOLDER/i
        ctx = new_processes()
        for i,one in enumerate(specs): run_script(one, Path(sys.argv[2])/str(i), ctx)
