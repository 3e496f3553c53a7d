"""arrays -> dataset file -> nj train -> nj infer -> numpy, without torch: the accuracy computed here is the one nj
printed, and rows come back in the caller's vertex order. NJ_BINARY names the nj under test."""

import os
import re
import shutil
import types

import h5py
import numpy as np
import pytest

import neutronjittor as nj

pytestmark = pytest.mark.skipif(not os.environ.get("NJ_BINARY"), reason="NJ_BINARY names no nj binary")


def planted_graph(n=240, classes=3, seed=4):
    """A graph whose classes are communities, with features that hint at the class: learnable in a few epochs."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, classes, n)
    src, dst = [], []
    for _ in range(6 * n):
        u, v = rng.integers(0, n, 2)
        if u != v and (labels[u] == labels[v] or rng.random() < 0.1):
            src += [u, v]
            dst += [v, u]
    features = rng.normal(size=(n, 10)).astype(np.float32)
    features[np.arange(n), labels] += 1.5
    split = rng.random(n)
    return np.array([src, dst]), features, labels, split < 0.3, (split >= 0.3) & (split < 0.5), split >= 0.5


@pytest.fixture
def graph():
    return planted_graph()


def test_arrays_train_infer_and_back_in_the_callers_order(tmp_path, graph):
    edge_index, x, y, train, val, test = graph
    n = len(y)
    # The caller's ids are not 0..n-1, and not in row order.
    rng = np.random.default_rng(9)
    node_ids = rng.permutation(10 * n)[:n] + 1000
    edges_in_ids = node_ids[edge_index]
    path = nj.write_dataset(tmp_path / "g.h5", edges_in_ids, x, y, train, val, test, node_ids=node_ids, name="planted")
    # Row i is node_ids[i]: the graph is the one edge_index gives in row positions.
    plain = nj.write_dataset(tmp_path / "plain.h5", edge_index, x, y, train, val, test)
    with h5py.File(path) as f, h5py.File(plain) as g:
        for key in ("graph/indptr", "graph/indices", "features", "labels"):
            assert np.array_equal(f[key][:], g[key][:]), key

    checkpoint = str(tmp_path / "c.h5")
    metrics = str(tmp_path / "m.jsonl")
    nj.train(str(path), epochs=30, threads=1, hidden=16, save_checkpoint=checkpoint, metrics_out=metrics)
    out = str(tmp_path / "pred.h5")
    printed = nj.infer(checkpoint, str(path), output=out, threads=1, embeddings=["all"])
    result = nj.read_predictions(out, node_ids=node_ids)

    assert result.logits.shape == (n, 3)
    assert np.array_equal(result.vertex_ids, np.arange(n))  # a dataset file's vertices are 0..n-1
    assert result.embeddings[1].shape == (n, 16)
    assert np.array_equal(result.predictions, result.logits.argmax(axis=1))
    assert np.allclose(result.probabilities.sum(axis=1), 1.0, atol=1e-6)
    # The test accuracy computed here, over the caller's arrays, is what nj printed and what training ended on.
    accuracy = result.accuracy(y, test)
    shown = float(re.search(r"test (\d\.\d{4})", printed.splitlines()[-1]).group(1))
    assert accuracy == pytest.approx(shown, abs=5e-5)
    assert accuracy == result.attributes["test_accuracy"]
    epochs, summaries = nj.read_metrics(metrics)
    assert len(epochs) == 30 and epochs[-1]["epoch"] == 30
    assert summaries[-1]["final"]["test"] == pytest.approx(accuracy)
    assert accuracy > 0.6, "the planted classes are learnable"
    assert list(result.node_ids) == list(node_ids)


def test_rows_follow_node_ids_whatever_their_order(tmp_path, graph):
    edge_index, x, y, train, val, test = graph
    n = len(y)
    plain = nj.write_dataset(tmp_path / "plain.h5", edge_index, x, y, train, val, test)
    checkpoint = str(tmp_path / "c.h5")
    nj.train(plain, epochs=5, threads=1, save_checkpoint=checkpoint)
    # The same graph with its rows shuffled, vertex old[i] now at row i.
    old = np.random.default_rng(3).permutation(n)
    new_of_old = np.empty(n, dtype=np.int64)
    new_of_old[old] = np.arange(n)
    shuffled = nj.write_dataset(tmp_path / "shuffled.h5", new_of_old[edge_index], x[old], y[old], train[old], val[old],
                                test[old])
    nj.infer(checkpoint, plain, output=str(tmp_path / "a.h5"), threads=1)
    # Under other ids the edges are another structure than the checkpoint records.
    nj.infer(checkpoint, shuffled, output=str(tmp_path / "b.h5"), threads=1, allow_other_graph=True)
    a = nj.read_predictions(tmp_path / "a.h5")
    b = nj.read_predictions(tmp_path / "b.h5")
    assert np.allclose(a.logits[old], b.logits, rtol=1e-5, atol=1e-5)


def test_the_output_reads_with_h5py_alone(tmp_path, graph):
    edge_index, x, y, train, val, test = graph
    path = nj.write_dataset(tmp_path / "g.h5", edge_index, x, y, train, val, test)
    nj.train(path, epochs=2, threads=1, save_checkpoint=str(tmp_path / "c.h5"))
    nj.infer(str(tmp_path / "c.h5"), path, output=str(tmp_path / "p.h5"), threads=1, embeddings=[1])
    with h5py.File(tmp_path / "p.h5") as f:
        assert f.attrs["format"] == "nj-inference-2"
        assert f["predictions"].dtype == np.int32
        assert f["embeddings/layer1"].shape[0] == len(y)


class FakeTensor:
    """What the package needs of a torch tensor: detach(), cpu() and numpy()."""

    def __init__(self, values):
        self.values = np.asarray(values)

    def detach(self):
        return self

    def cpu(self):
        return self

    def numpy(self):
        return self.values


def test_pyg_and_dgl_objects_by_their_attributes(tmp_path, graph):
    edge_index, x, y, train, val, test = graph
    data = types.SimpleNamespace(edge_index=FakeTensor(edge_index), x=FakeTensor(x), y=FakeTensor(y),
                                 train_mask=FakeTensor(train), val_mask=FakeTensor(val), test_mask=FakeTensor(test))
    from_pyg = nj.from_pyg(data, tmp_path / "pyg.h5", name="pyg")

    class FakeDgl:
        ndata = {"feat": FakeTensor(x), "label": FakeTensor(y), "train_mask": FakeTensor(train),
                 "val_mask": FakeTensor(val), "test_mask": FakeTensor(test)}

        def edges(self):
            return FakeTensor(edge_index[0]), FakeTensor(edge_index[1])

    from_dgl = nj.from_dgl(FakeDgl(), tmp_path / "dgl.h5", name="dgl")
    direct = nj.write_dataset(tmp_path / "direct.h5", edge_index, x, y, train, val, test)
    for path in (from_pyg, from_dgl):
        with h5py.File(path) as f, h5py.File(direct) as g:
            for key in ("graph/indptr", "graph/indices", "features", "labels", "masks/train", "masks/test"):
                assert np.array_equal(f[key][:], g[key][:]), key
            assert f.attrs["symmetrized"] == 1 and f.attrs["self_loops"] == "removed"
    info = nj.train(from_pyg, epochs=1, threads=1)
    assert "done:" in info


def test_sparse_features_are_stored_sparse_and_train_as_dense_ones(tmp_path, graph):
    scipy_sparse = pytest.importorskip("scipy.sparse")
    edge_index, x, y, train, val, test = graph
    sparse = scipy_sparse.csr_matrix(np.where(np.abs(x) > 2.0, x, 0.0))  # about 5 % non-zero
    as_sparse = nj.write_dataset(tmp_path / "sparse.h5", edge_index, sparse, y, np.flatnonzero(train),
                                 np.flatnonzero(val), np.flatnonzero(test))
    as_dense = nj.write_dataset(tmp_path / "dense.h5", edge_index, sparse.toarray(), y, train, val, test,
                                feature_storage="dense")
    with h5py.File(as_sparse) as f, h5py.File(as_dense) as g:
        assert "features" not in f and "features_sparse" in f
        assert np.array_equal(f["masks/train"][:], train.astype(np.uint8))
        stored = scipy_sparse.csr_matrix((f["features_sparse/values"][:], f["features_sparse/indices"][:],
                                          f["features_sparse/indptr"][:]), shape=tuple(f["features_sparse/shape"][:]))
        assert np.array_equal(stored.toarray(), g["features"][:])
    # nj reads both to the same features: the same training, line for line.
    lines = [nj.train(path, epochs=3, threads=1, metrics_out=str(tmp_path / f"{i}.jsonl")).splitlines()[-1]
             for i, path in enumerate((as_sparse, as_dense))]
    done = [re.sub(r"median epoch .*", "", line[line.index("done:"):]) for line in lines]
    assert done[0] == done[1]
    assert '"feature_storage": "sparse"' in nj.call(["info", "--json", as_sparse])


def test_nj_errors_are_raised_with_their_line(tmp_path, graph):
    edge_index, x, y, train, val, test = graph
    path = nj.write_dataset(tmp_path / "g.h5", edge_index, x, y, train, val, test)
    with pytest.raises(nj.NjError, match=r"^nj: error: .*--epochs must be at least 1"):
        nj.train(path, epochs=0)
    with pytest.raises(ValueError, match="edge_index names a vertex that node_ids does not list"):
        nj.write_dataset(tmp_path / "bad.h5", np.array([[5], [6]]), x[:2], y[:2], node_ids=[5, 7])


@pytest.mark.skipif(shutil.which("mpirun") is None, reason="no mpirun")
def test_two_ranks_infer_what_one_does(tmp_path, graph):
    edge_index, x, y, train, val, test = graph
    path = nj.write_dataset(tmp_path / "g.h5", edge_index, x, y, train, val, test)
    checkpoint = str(tmp_path / "c.h5")
    nj.train(path, epochs=5, threads=1, save_checkpoint=checkpoint)
    nj.infer(checkpoint, path, output=str(tmp_path / "one.h5"), threads=1)
    nj.infer(checkpoint, path, output=str(tmp_path / "two.h5"), threads=1, ranks=2,
             mpirun=("mpirun", "--oversubscribe"))
    one = nj.read_predictions(tmp_path / "one.h5")
    two = nj.read_predictions(tmp_path / "two.h5")
    assert np.allclose(one.logits, two.logits, rtol=1e-6, atol=1e-6)
