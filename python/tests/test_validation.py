"""write_dataset refuses what nj refuses, with nj's words: for each mistake, the file written with h5py alone
(no checks) makes `nj info` fail with the line that write_dataset raises for the same arrays. NJ_BINARY names the
nj under test."""

import os
import subprocess

import h5py
import numpy as np
import pytest

import neutronjittor as nj

pytestmark = pytest.mark.skipif(not os.environ.get("NJ_BINARY"), reason="NJ_BINARY names no nj binary")

N = 6
CLASSES = 3


def arrays():
    """A 6-cycle with 3 classes: every argument of write_dataset, valid, by keyword."""
    src = np.arange(N)
    dst = (src + 1) % N
    features = np.arange(N * 4, dtype=np.float32).reshape(N, 4) / 10 + 1
    return {
        "edge_index": np.array([np.concatenate([src, dst]), np.concatenate([dst, src])]),
        "features": features,
        "labels": np.arange(N) % CLASSES,
        "train_mask": np.array([1, 1, 0, 0, 0, 0], dtype=bool),
        "val_mask": np.array([0, 0, 1, 1, 0, 0], dtype=bool),
        "test_mask": np.array([0, 0, 0, 0, 1, 1], dtype=bool),
        "num_classes": CLASSES,
        "self_loops": "removed",
    }


def write_unchecked(path, edge_index, features, labels, train_mask, val_mask, test_mask, num_classes, self_loops):
    """The file of these arrays, mistakes and all, as the h5py script of docs/dataset-format.md writes it."""
    src, dst = np.asarray(edge_index)
    n = len(features) if not hasattr(features, "tocsr") else features.shape[0]
    order = np.lexsort((src, dst))
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(dst, minlength=n), out=indptr[1:])
    with h5py.File(path, "w") as f:
        f["graph/indptr"] = indptr
        f["graph/indices"] = src[order].astype(np.int32)
        if hasattr(features, "tocsr"):
            csr = features.tocsr()
            f["features_sparse/shape"] = np.array(csr.shape, dtype=np.int64)
            f["features_sparse/indptr"] = csr.indptr.astype(np.int64)
            f["features_sparse/indices"] = csr.indices.astype(np.int32)
            f["features_sparse/values"] = csr.data.astype(np.float32)
        else:
            f["features"] = np.asarray(features, dtype=np.float32)
        f["labels"] = np.asarray(labels, dtype=np.int32)
        for split, mask in (("train", train_mask), ("val", val_mask), ("test", test_mask)):
            f[f"masks/{split}"] = np.asarray(mask)
        f.attrs["format_version"] = 1
        f.attrs["num_classes"] = num_classes
        f.attrs["symmetrized"] = 1
        f.attrs["self_loops"] = self_loops


def nj_error(path):
    """nj info's error line for the file, without its "nj: error: "."""
    result = subprocess.run([os.environ["NJ_BINARY"], "info", path], capture_output=True, text=True, check=False)
    assert result.returncode != 0, f"nj read {path}"
    lines = [line for line in (result.stdout + result.stderr).splitlines() if line.startswith("nj: error: ")]
    assert len(lines) == 1, result.stdout + result.stderr
    return lines[0].removeprefix("nj: error: ")


def with_mistake(**changes):
    values = arrays()
    values.update(changes)
    return values


def unlabelled(*vertices):
    labels = np.arange(N) % CLASSES
    labels[list(vertices)] = -1
    return labels


def labels_with(vertex, label):
    labels = np.arange(N) % CLASSES
    labels[vertex] = label
    return labels


def features_with(row, column, value):
    features = arrays()["features"].copy()
    features[row, column] = value
    return features


MISTAKES = {
    "an unlabelled training vertex": with_mistake(labels=unlabelled(1)),
    "an unlabelled validation vertex": with_mistake(labels=unlabelled(3)),
    "an unlabelled test vertex": with_mistake(labels=unlabelled(5)),
    "a label of num_classes": with_mistake(labels=labels_with(2, CLASSES)),
    "a label below -1": with_mistake(labels=labels_with(4, -2)),
    "the first vertex at fault is named": with_mistake(labels=np.array([0, 1, 7, -1, 0, 1])),
    "the first vertex at fault is unlabelled": with_mistake(labels=np.array([0, -1, 7, 1, 0, 1])),
    "too few classes for the labels": with_mistake(num_classes=2),
    "no classes": with_mistake(num_classes=0),
    "more classes than 32 bits hold": with_mistake(num_classes=2**31),
    "an unknown self-loop policy": with_mistake(self_loops="sometimes"),
    "a self-loop policy with a control character": with_mistake(self_loops="kept\n"),
    # nj counts edges by their position in /graph/indices, by destination: edge 2 here.
    "a source beyond the vertices": with_mistake(edge_index=np.array([[9, 3, 1, 0], [2, 3, 0, 1]])),
    "a negative source": with_mistake(edge_index=np.array([[0, 1, -3], [1, 0, 4]])),
    "a label too few": with_mistake(labels=np.arange(N - 1) % CLASSES),
    "labels of two columns": with_mistake(labels=np.zeros((N, 2), dtype=np.int64)),
    "a mask entry too many": with_mistake(val_mask=np.zeros(N + 1, dtype=bool)),
    "a mask of two dimensions": with_mistake(test_mask=np.zeros((N, 1), dtype=bool)),
    "an empty training split": with_mistake(train_mask=np.zeros(N, dtype=bool)),
    "a NaN feature": with_mistake(features=features_with(3, 2, np.nan)),
    "a NaN with its sign bit set": with_mistake(features=features_with(2, 0, -np.nan)),
    "an infinite feature": with_mistake(features=features_with(5, 1, -np.inf)),
    "features of three dimensions": with_mistake(features=np.ones((N, 2, 2), dtype=np.float32)),
}


@pytest.mark.parametrize("mistake", MISTAKES, ids=list(MISTAKES))
def test_write_dataset_raises_what_nj_prints(tmp_path, mistake):
    values = MISTAKES[mistake]
    unchecked = str(tmp_path / "unchecked.h5")
    write_unchecked(unchecked, **values)
    expected = nj_error(unchecked)
    path = str(tmp_path / "checked.h5")
    with pytest.raises(ValueError) as raised:
        nj.write_dataset(path, **values)
    assert str(raised.value) == expected.replace(unchecked, path)
    assert not os.path.exists(path), "nothing is written"


def test_sparse_features_are_checked_as_nj_reads_them(tmp_path):
    scipy_sparse = pytest.importorskip("scipy.sparse")
    features = np.zeros((N, 8), dtype=np.float32)
    features[np.arange(N), np.arange(N)] = 1
    features[4, 6] = np.inf
    values = with_mistake(features=scipy_sparse.csr_matrix(features))
    unchecked = str(tmp_path / "unchecked.h5")
    write_unchecked(unchecked, **values)
    with pytest.raises(ValueError) as raised:
        nj.write_dataset(unchecked + ".checked", **values)
    assert str(raised.value) == nj_error(unchecked).replace(unchecked, unchecked + ".checked")


def test_what_nj_reads_is_written(tmp_path):
    """Overlapping splits and unlabelled vertices outside every split are no mistakes for nj."""
    values = with_mistake(labels=unlabelled(2), val_mask=np.array([1, 0, 0, 1, 0, 0], dtype=bool),
                          test_mask=np.array([0, 1, 0, 0, 1, 1], dtype=bool))
    path = nj.write_dataset(tmp_path / "g.h5", **values)
    assert "splits:" in nj.call(["info", path])


@pytest.mark.parametrize("edge_index, message", [
    (np.array([[0, 1], [1, 6]]), "edge_index: edge 1 has destination 6 outside [0, 6)"),
    (np.array([[0, 1], [-1, 0]]), "edge_index: edge 0 has destination -1 outside [0, 6)"),
])
def test_a_destination_outside_the_vertices(tmp_path, edge_index, message):
    """A file has no destination to get wrong (they are its CSR's rows): this message is the package's own."""
    with pytest.raises(ValueError) as raised:
        nj.write_dataset(tmp_path / "g.h5", **with_mistake(edge_index=edge_index))
    assert str(raised.value) == f"{tmp_path / 'g.h5'}: {message}"


def test_a_split_position_outside_the_vertices(tmp_path):
    with pytest.raises(ValueError) as raised:
        nj.write_dataset(tmp_path / "g.h5", **with_mistake(train_mask=np.array([0, -1])))
    assert str(raised.value) == f"{tmp_path / 'g.h5'}: train_mask: position -1 outside [0, 6)"
