"""Exact gradient accumulation callbacks for fastai: the large-batch step, whatever the micro-batch sizes"""

__version__ = "0.1.0"
