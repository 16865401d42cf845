"""The cost of `GradientAccumulation(batchnorm='window')` (issue 26): a training epoch of the vision recipe's ResNet-18
(nbs/03_vision.ipynb: `vision_learner(..., resnet18, pretrained=False)`, digits as 32x32 images, micro-batches of 16,
`accum_bs` 128), on the CPU with one thread, with the window's running statistics (`'window'`) against PyTorch's
per-micro-batch update (`'micro'`).

Not part of the package. Run it in the vision environment, from the repository root:

    bash tools/setup_vision.sh && PYTHONPATH=$PWD .venv-vision/bin/python bench/batchnorm_cost.py [--pairs 10]

It writes `bench/batchnorm_cost.md`. The two learners are built once, each warmed up with one epoch, then timed in
pairs of epochs, one of each, the order alternating from pair to pair (AB, BA, AB, ...); the result is the median
and quartiles of the pairs' ratios (window / micro), which cancels most of the drift of a shared machine. The time
is the process's CPU time, not the wall clock: with one thread it is the epoch's own work, much steadier on a machine
shared with other jobs. Only the training phase of the epoch is timed (validation runs in eval mode, where the two do
the same work), so the ratio is the larger one a whole epoch could show.
"""
from __future__ import annotations
import argparse, os, platform, statistics, sys, tempfile, time, warnings
from pathlib import Path

os.environ.setdefault('OMP_NUM_THREADS', '1')
import torch
torch.set_num_threads(1)
from sklearn.datasets import load_digits
with warnings.catch_warnings():
    warnings.filterwarnings('ignore', message='`torch.jit.script` is deprecated', category=FutureWarning)
    from fastai.vision.all import *
from fastaccum.all import *   # after fastai's star import, which brings fastai's own GradientAccumulation

root = Path(__file__).resolve().parent.parent
out = root/'bench'/'batchnorm_cost.md'


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


def main():
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    p.add_argument('--pairs', type=int, default=10, help='timed pairs of epochs')
    args = p.parse_args()
    dls = ImageDataLoaders.from_folder(digits_folder(), valid_pct=0.2, seed=0, bs=16, num_workers=0)
    learners = {bn:learner(dls, bn) for bn in ('window', 'micro')}
    n_bn = sum(isinstance(m, nn.modules.batchnorm._BatchNorm) for m in learners['window'].model.modules())
    for learn in learners.values(): epoch(learn)   # warm-up
    times = {bn:[] for bn in learners}
    for i in range(args.pairs):
        order = ('window', 'micro') if i%2 == 0 else ('micro', 'window')
        for bn in order: times[bn].append(epoch(learners[bn]))
        print(f'pair {i+1}: window {times["window"][-1]:.2f} s, micro {times["micro"][-1]:.2f} s', flush=True)
    ratios = [w/m for w,m in zip(times['window'], times['micro'])]
    q1,med,q3 = statistics.quantiles(ratios, n=4)
    n_train = len(dls.train_ds)
    lines = [
        '# The cost of `batchnorm=\'window\'`',
        '',
        f'`bench/batchnorm_cost.py`: the training phase of one epoch of the vision recipe\'s ResNet-18 (`pretrained=False`, '
        f'unfrozen, {n_bn} BatchNorm layers), {n_train} digits as 32x32 images in micro-batches of 16, '
        f'`GradientAccumulation(128)`, on the CPU with one thread, timed in CPU seconds of the process; {args.pairs} pairs of epochs, the order alternating, '
        'after one warm-up epoch each.',
        '',
        '| | CPU seconds per epoch (median) | ratio to `\'micro\'`: median | lower quartile | upper quartile |',
        '|---|---|---|---|---|',
        f'| `batchnorm=\'window\'` | {statistics.median(times["window"]):.2f} | {med:.3f} | {q1:.3f} | {q3:.3f} |',
        f'| `batchnorm=\'micro\'` | {statistics.median(times["micro"]):.2f} | 1 | | |',
        '',
        f'Ratios of the pairs: {", ".join(f"{r:.3f}" for r in ratios)}.',
        '',
        f'Target (issue 26): at most 1.03. Machine: {platform.machine()}, {os.cpu_count()} cores (shared), '
        f'load average {os.getloadavg()[0]:.1f} at the end; torch {torch.__version__}, Python {platform.python_version()}.',
        '',
    ]
    out.write_text('\n'.join(lines))
    print('\n'.join(lines))


if __name__ == '__main__': main()
