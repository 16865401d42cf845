"""Exact gradient accumulation callbacks for fastai: the large-batch step, whatever the micro-batch sizes

Modules:

- `fastaccum.sharded`: When the model, its gradients and its optimizer state outgrow one device: PyTorch's FSDP2 with fastai, and the accumulation stays exact"""

__version__ = "0.1.0"
