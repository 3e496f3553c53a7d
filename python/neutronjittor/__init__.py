"""Data in and results out of NeutronJittor (nj), without torch.

- ``write_dataset``, ``from_pyg``, ``from_dgl``: an nj dataset file from arrays, a PyG ``Data`` or a DGL graph.
- ``read_predictions``, ``read_metrics``: ``nj infer``'s output and ``nj train``'s JSONL metrics as numpy arrays
  and records.
- ``train``, ``infer``: ``nj train`` and ``nj infer`` (under ``mpirun`` with ``ranks=``) as subprocesses.

docs/python.md walks through them.
"""

from .dataset import from_dgl, from_pyg, write_dataset
from .results import Predictions, read_metrics, read_predictions
from .run import NjError, call, find_nj, infer, train

__all__ = [
    "NjError",
    "call",
    "Predictions",
    "find_nj",
    "from_dgl",
    "from_pyg",
    "infer",
    "read_metrics",
    "read_predictions",
    "train",
    "write_dataset",
]
