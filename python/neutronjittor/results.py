"""Reading what nj wrote: ``nj infer``'s output file and ``nj train``'s JSONL metrics."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

import h5py
import numpy as np

# Format 2 numbers the embeddings by the model's layers; format 1 by the layers as nj built them (GIN's MLP and APPNP's
# propagation steps each counted), which is what a file of that format's embeddings keep.
INFERENCE_FORMATS = ("nj-inference-1", "nj-inference-2")


@dataclass
class Predictions:
    """``nj infer``'s output. Row i of every array is the dataset's vertex i: with ``node_ids`` given to
    write_dataset, the vertex ``node_ids[i]``, so the arrays line up with the caller's own. ``vertex_ids`` are the
    rows' global ids as nj knew them (0..n-1 for a dataset file; shards may carry other 64-bit ids)."""

    logits: np.ndarray
    probabilities: np.ndarray
    predictions: np.ndarray
    embeddings: Dict[int, np.ndarray] = field(default_factory=dict)  # layer (from 1) -> rows
    attributes: Dict[str, Any] = field(default_factory=dict)
    node_ids: Optional[np.ndarray] = None
    vertex_ids: Optional[np.ndarray] = None

    def accuracy(self, labels: Any, mask: Any) -> float:
        """The share of the masked vertices whose prediction is their label."""
        mask = np.asarray(mask).astype(bool)
        return float(np.mean(self.predictions[mask] == np.asarray(labels)[mask]))


def _attribute(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.decode()
    if isinstance(value, np.generic):
        return value.item()
    return value


def read_predictions(path: str | os.PathLike, node_ids: Any = None) -> Predictions:
    """Reads ``nj infer``'s file. ``node_ids``: the ids given to write_dataset, attached to the result (the rows
    are already in their order)."""
    with h5py.File(path, "r") as f:
        attributes = {key: _attribute(value) for key, value in f.attrs.items()}
        if attributes.get("format") not in INFERENCE_FORMATS:
            raise ValueError(f"{os.fspath(path)}: not an nj infer output (format {attributes.get('format')!r})")
        embeddings = {}
        if "embeddings" in f:
            # layer<L>: the model's layer L, zero-padded in a model of ten or more; files of earlier builds did not
            # pad it, so the layers are ordered by number, not by name.
            for layer, key in sorted((int(key.removeprefix("layer")), key) for key in f["embeddings"]):
                embeddings[layer] = f["embeddings"][key][:]
        result = Predictions(f["logits"][:], f["probabilities"][:], f["predictions"][:], embeddings, attributes)
        if "vertex_ids" in f:  # absent from files of builds before 64-bit ids
            result.vertex_ids = f["vertex_ids"][:]
    if node_ids is not None:
        ids = np.asarray(node_ids).reshape(-1)
        if ids.shape[0] != result.logits.shape[0]:
            raise ValueError(f"{len(ids)} node_ids for {result.logits.shape[0]} vertices")
        result.node_ids = ids
    return result


def _pandas() -> Any:
    """pandas, an optional dependency: the ``frames`` extra."""
    try:
        import pandas  # noqa: PLC0415
    except ImportError as missing:
        raise ImportError('read_metrics(as_frame=True) needs pandas: pip install "neutronjittor[frames]"') from missing
    return pandas


def read_metrics(path: str | os.PathLike, as_frame: bool = False) -> Any:
    """``nj train --metrics-out``'s records: (epochs, summaries), each a list of dicts; with ``as_frame``, the
    epochs as a pandas DataFrame (the ``frames`` extra: ``pip install "neutronjittor[frames]"``) and the summaries
    as a list."""
    epochs: List[dict] = []
    summaries: List[dict] = []
    with open(path) as f:
        for line in f:
            if not line.strip():
                continue
            record = json.loads(line)
            (epochs if record.get("type") == "epoch" else summaries).append(record)
    if as_frame:
        return _pandas().json_normalize(epochs), summaries
    return epochs, summaries
