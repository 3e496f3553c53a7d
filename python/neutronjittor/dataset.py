"""Writing nj dataset files (docs/dataset-format.md) from arrays, PyG ``Data`` objects and DGL graphs."""

from __future__ import annotations

import os
from typing import Any, Optional, Sequence

import h5py
import numpy as np

FORMAT_VERSION = 1
_SELF_LOOPS = ("kept", "removed", "added")
_INT32_MAX = 2**31 - 1


def _array(value: Any) -> np.ndarray:
    """A numpy array of a numpy array, a list, or a tensor (anything with ``.numpy()``), without importing torch."""
    for step in ("detach", "cpu"):
        if hasattr(value, step) and callable(getattr(value, step)):
            value = getattr(value, step)()
    if hasattr(value, "numpy") and callable(value.numpy):
        value = value.numpy()
    return np.asarray(value)


class _SparseRows:
    """Features as compressed sparse rows: what nj stores under /features_sparse."""

    def __init__(self, shape, indptr, indices, values):
        self.shape = shape
        self.indptr = np.asarray(indptr, dtype=np.int64)
        self.indices = np.asarray(indices, dtype=np.int32)
        self.values = np.asarray(values, dtype=np.float32)


def _features(where: str, features: Any):
    """Features as a dense float32 matrix, or, for a scipy.sparse matrix, as its sorted compressed rows without
    explicit zeros (densified only where a dense file is asked for)."""
    if hasattr(features, "tocsr") and callable(features.tocsr):
        csr = features.tocsr().astype(np.float32)
        csr.sum_duplicates()  # sorts the columns too
        csr.eliminate_zeros()
        return _SparseRows(csr.shape, csr.indptr, csr.indices, csr.data)
    out = np.ascontiguousarray(_array(features), dtype=np.float32)
    if out.ndim == 1:
        out = out.reshape(-1, 1)
    if out.ndim != 2:
        raise ValueError(f"{where}: /features: expected 2 dimensions, found {out.ndim}")
    return out


def _sparse_rows(dense: np.ndarray) -> _SparseRows:
    rows, columns = np.nonzero(dense)
    indptr = np.zeros(dense.shape[0] + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=dense.shape[0]), out=indptr[1:])
    return _SparseRows(dense.shape, indptr, columns, dense[rows, columns])


def _write_features(f: h5py.File, x, storage: str) -> None:
    """/features dense, or /features_sparse (shape, indptr, indices, values): by ``storage``, where "auto" stores
    sparse when that takes at most half the dense bytes, as nj does."""
    n, width = x.shape
    if storage not in ("auto", "dense", "sparse"):
        raise ValueError(f"feature_storage must be auto, dense or sparse, got {storage!r}")
    nonzeros = len(x.values) if isinstance(x, _SparseRows) else int(np.count_nonzero(x))
    sparse = storage == "sparse" or (storage == "auto" and n * width > 0 and 8 * nonzeros + 8 * (n + 1) <= 2 * n * width)
    if not sparse:
        dense = x if isinstance(x, np.ndarray) else _dense(x)
        f.create_dataset("features", data=dense, chunks=(max(1, min(n, 4096)), max(1, width)) if n else None)
        return
    rows = x if isinstance(x, _SparseRows) else _sparse_rows(x)
    chunk = (max(1, min(1 << 20, len(rows.values))),) if len(rows.values) else None
    f.create_dataset("features_sparse/shape", data=np.array([n, width], dtype=np.int64))
    f.create_dataset("features_sparse/indptr", data=rows.indptr)
    f.create_dataset("features_sparse/indices", data=rows.indices, chunks=chunk)
    f.create_dataset("features_sparse/values", data=rows.values, chunks=chunk)


def _dense(rows: _SparseRows) -> np.ndarray:
    dense = np.zeros(rows.shape, dtype=np.float32)
    for r in range(rows.shape[0]):
        span = slice(rows.indptr[r], rows.indptr[r + 1])
        dense[r, rows.indices[span]] = rows.values[span]
    return dense


def _mask(where: str, value: Any, n: int, split: str) -> np.ndarray:
    """A split as one 0/1 byte per vertex, from a boolean mask or from an index array."""
    if value is None:
        return np.zeros(n, dtype=np.uint8)
    array = _array(value)
    if array.dtype == bool or (array.ndim == 1 and array.shape[0] == n and set(np.unique(array)) <= {0, 1}):
        _require_vector(where, f"/masks/{split}", array, n)
        return array.astype(np.uint8)
    positions = array.astype(np.int64).reshape(-1)
    # Python would count a negative position from the end.
    outside = positions[(positions < 0) | (positions >= n)]
    if outside.size:
        raise ValueError(f"{where}: {split}_mask: position {outside[0]} outside [0, {n})")
    mask = np.zeros(n, dtype=np.uint8)
    mask[positions] = 1
    return mask


def _require_vector(where: str, name: str, array: np.ndarray, n: int) -> None:
    """nj's check of a per-vertex dataset as it reads one."""
    if array.ndim != 1:
        raise ValueError(f"{where}: {name}: expected 1 dimension, found {array.ndim}")
    if array.shape[0] != n:
        raise ValueError(f"{where}: {name}: expected {n} entries, found {array.shape[0]}")


def _edges(edge_index: Any, node_ids: Any, n: int) -> np.ndarray:
    """edge_index as rows of vertex positions 0..n-1, translated from ``node_ids`` where given."""
    edges = _array(edge_index)
    if edges.ndim != 2 or edges.shape[0] != 2:
        raise ValueError(f"edge_index must have shape (2, E), got {edges.shape}")
    if node_ids is None:
        return edges.astype(np.int64)
    ids = _array(node_ids).reshape(-1)
    if ids.shape[0] != n:
        raise ValueError(f"node_ids has {ids.shape[0]} entries for {n} vertices")
    order = np.argsort(ids, kind="stable")
    sorted_ids = ids[order]
    if np.any(sorted_ids[1:] == sorted_ids[:-1]):
        raise ValueError("node_ids repeats an id")
    positions = np.minimum(np.searchsorted(sorted_ids, edges.reshape(-1)), n - 1)
    if np.any(sorted_ids[positions] != edges.reshape(-1)):
        raise ValueError("edge_index names a vertex that node_ids does not list")
    return order[positions].reshape(2, -1)


def _in_edge_csr(where: str, src: np.ndarray, dst: np.ndarray, n: int):
    """The in-edge CSR (indptr, indices) of the edges, checked as nj checks /graph: sources in range, counted by
    their position in /graph/indices. Destinations are the CSR's rows, so one out of range cannot be written."""
    outside = np.flatnonzero((dst < 0) | (dst >= n))
    if outside.size:
        raise ValueError(f"{where}: edge_index: edge {outside[0]} has destination {dst[outside[0]]} outside [0, {n})")
    indices = src[np.lexsort((src, dst))]  # by destination, then source
    outside = np.flatnonzero((indices < 0) | (indices >= n))
    if outside.size:
        raise ValueError(f"{where}: /graph: edge {outside[0]} has source {indices[outside[0]]} outside [0, {n})")
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(dst, minlength=n), out=indptr[1:])
    return indptr, indices.astype(np.int32)


def _require_attributes(where: str, num_classes: int, self_loops: str) -> None:
    """nj's checks of the root attributes num_classes and self_loops."""
    if not 1 <= num_classes <= _INT32_MAX:
        raise ValueError(f"{where}: attribute num_classes must be in [1, {_INT32_MAX}], got {num_classes}")
    if self_loops not in _SELF_LOOPS:
        # nj writes control characters as \xNN.
        shown = "".join(f"\\x{ord(c):02x}" if ord(c) < 0x20 or ord(c) == 0x7F else c for c in str(self_loops))
        raise ValueError(f"{where}: attribute self_loops: unknown self-loop policy '{shown}' "
                         f"(expected {', '.join(_SELF_LOOPS[:-1])} or {_SELF_LOOPS[-1]})")


def _require_labelled_splits(where: str, labels: np.ndarray, num_classes: int, masks: dict) -> None:
    """nj's checks of labels and splits, reporting the first vertex at fault as nj does: a label outside
    [-1, num_classes), or -1 in a split; then a training set that is not empty."""
    unlabelled_in = {split: (labels == -1) & (mask != 0) for split, mask in masks.items()}
    outside = (labels < -1) | (labels >= num_classes)
    at_fault = np.flatnonzero(outside | unlabelled_in["train"] | unlabelled_in["val"] | unlabelled_in["test"])
    if at_fault.size:
        v = at_fault[0]
        if labels[v] != -1:
            raise ValueError(f"{where}: /labels: vertex {v} has label {labels[v]} outside [0, {num_classes})")
        split = next(split for split, unlabelled in unlabelled_in.items() if unlabelled[v])
        raise ValueError(f"{where}: /masks/{split}: vertex {v} is in the split but has no label")
    if not masks["train"].any():
        raise ValueError(f"{where}: the train split is empty")


def _require_finite(where: str, x) -> None:
    """nj's check of the feature values: the first non-finite one, by row then column."""
    if isinstance(x, _SparseRows):
        entries = np.flatnonzero(~np.isfinite(x.values))
        if entries.size == 0:
            return
        e = entries[0]
        row, column, value = np.searchsorted(x.indptr, e, side="right") - 1, x.indices[e], x.values[e]
    else:
        cells = np.argwhere(~np.isfinite(x))
        if cells.size == 0:
            return
        row, column = cells[0]
        value = x[row, column]
    # As nj prints them: nan, -nan, inf, -inf.
    shown = ("-" if np.signbit(value) else "") + ("nan" if np.isnan(value) else "inf")
    raise ValueError(f"{where}: /features: vertex {row}, column {column} is {shown} (features must be finite)")


def write_dataset(
    path: str | os.PathLike,
    edge_index: Any,
    features: Any,
    labels: Any,
    train_mask: Any = None,
    val_mask: Any = None,
    test_mask: Any = None,
    *,
    num_classes: Optional[int] = None,
    node_ids: Any = None,
    name: str = "",
    symmetrized: Optional[bool] = None,
    self_loops: Optional[str] = None,
    feature_storage: str = "auto",
) -> str:
    """Writes an nj dataset file and returns its path. Arrays that nj would refuse to read raise ValueError with
    nj's message for them, naming the path, before anything is written.

    edge_index: shape (2, E), row 0 the sources and row 1 the destinations of the directed edges (PyG's
        convention; an undirected graph lists each edge both ways). Ids are 0..n-1, or, with ``node_ids``, values
        of ``node_ids``.
    features: (n, width) floats, a numpy array, a tensor or a scipy.sparse matrix (kept sparse for a
        sparse file).
    labels: n class ids, a vector or a column (as OGB gives them); -1 for an unlabelled vertex (allowed only outside
        every split).
    train_mask, val_mask, test_mask: boolean masks of n entries, or arrays of vertex positions. The training
        split must not be empty; splits may overlap.
    num_classes: default ``labels.max() + 1``.
    node_ids: the caller's id of each vertex, in the row order of ``features``, ``labels`` and the masks: nj's vertex
        i is ``node_ids[i]``, and ``read_predictions`` returns rows in this order.
    symmetrized: whether every edge's reverse is present; default: checked.
    self_loops: "kept", "removed" or "added"; default "removed" where the graph has none, else "kept".
    feature_storage: "dense", "sparse", or "auto": sparse where that takes at most half the bytes (bag-of-words).
    """
    where = os.fspath(path)
    x = _features(where, features)
    n = x.shape[0]
    y = _array(labels).astype(np.int64)
    if y.ndim == 2 and y.shape[1] == 1:  # OGB's labels: a column
        y = y[:, 0]
    src, dst = _edges(edge_index, node_ids, n)
    if symmetrized is None:
        forward = set(zip(src.tolist(), dst.tolist()))
        symmetrized = all((d, s) in forward for s, d in forward)
    if self_loops is None:
        self_loops = "kept" if np.any(src == dst) else "removed"
    classes = (int(y.max()) + 1 if y.size else 0) if num_classes is None else int(num_classes)
    # In the order nj checks what it reads, so that the first mistake is the one nj would name.
    _require_attributes(where, classes, self_loops)
    indptr, indices = _in_edge_csr(where, src, dst, n)
    _require_vector(where, "/labels", y, n)
    masks = {split: _mask(where, m, n, split) for split, m in (("train", train_mask), ("val", val_mask),
                                                                 ("test", test_mask))}
    _require_labelled_splits(where, y, classes, masks)
    _require_finite(where, x)

    with h5py.File(path, "w") as f:
        f.create_dataset("graph/indptr", data=indptr)
        f.create_dataset("graph/indices", data=indices, chunks=(max(1, min(1 << 20, indices.size)),) if indices.size else None)
        _write_features(f, x, feature_storage)
        f.create_dataset("labels", data=y.astype(np.int32))
        for split, mask in masks.items():
            f.create_dataset(f"masks/{split}", data=mask)
        f.attrs["format_version"] = FORMAT_VERSION
        f.attrs["name"] = name
        f.attrs["num_classes"] = classes
        f.attrs["num_vertices"] = n
        f.attrs["num_edges"] = int(indices.size)
        f.attrs["symmetrized"] = int(bool(symmetrized))
        f.attrs["self_loops"] = self_loops
    return where


def _first_attribute(obj: Any, names: Sequence[str]) -> Any:
    for attribute in names:
        value = getattr(obj, attribute, None)
        if value is not None:
            return value
    return None


def from_pyg(data: Any, path: str | os.PathLike, *, name: str = "", **options: Any) -> str:
    """Writes a PyG ``Data``-like object (``edge_index``, ``x``, ``y``, ``train_mask``, ``val_mask``,
    ``test_mask``), read by its attributes: torch itself is not imported. Other options go to write_dataset."""
    return write_dataset(
        path,
        data.edge_index,
        data.x,
        data.y,
        _first_attribute(data, ("train_mask",)),
        _first_attribute(data, ("val_mask",)),
        _first_attribute(data, ("test_mask",)),
        name=name,
        **options,
    )


def from_dgl(graph: Any, path: str | os.PathLike, *, name: str = "", feature: str = "feat", label: str = "label",
             **options: Any) -> str:
    """Writes a DGL graph: its edges (``graph.edges()``), and ``ndata[feature]``, ``ndata[label]`` and the
    ``train_mask``, ``val_mask`` and ``test_mask`` node data, read by their names. Other options go to
    write_dataset."""
    src, dst = graph.edges()
    edge_index = np.stack([_array(src), _array(dst)])
    ndata = graph.ndata
    return write_dataset(
        path,
        edge_index,
        ndata[feature],
        ndata[label],
        ndata.get("train_mask") if hasattr(ndata, "get") else None,
        ndata.get("val_mask") if hasattr(ndata, "get") else None,
        ndata.get("test_mask") if hasattr(ndata, "get") else None,
        name=name,
        **options,
    )
