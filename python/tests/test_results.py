"""Reading nj's metrics without the optional pandas."""

import importlib.metadata
import re
import sys

import pytest

import neutronjittor as nj


def test_frames_without_pandas_name_the_extra_to_install(tmp_path, monkeypatch):
    metrics = tmp_path / "m.jsonl"
    metrics.write_text('{"type": "epoch", "epoch": 1, "loss": 1.5}\n{"type": "summary"}\n')
    monkeypatch.setitem(sys.modules, "pandas", None)  # import pandas fails, as where it is not installed
    assert nj.read_metrics(metrics) == ([{"type": "epoch", "epoch": 1, "loss": 1.5}], [{"type": "summary"}])
    with pytest.raises(ImportError) as raised:
        nj.read_metrics(metrics, as_frame=True)
    assert str(raised.value) == 'read_metrics(as_frame=True) needs pandas: pip install "neutronjittor[frames]"'
    # The extra named is the installed package's, and brings pandas.
    extra = re.search(r"neutronjittor\[(\w+)\]", str(raised.value)).group(1)
    assert any(requirement.startswith("pandas") and f'extra == "{extra}"' in requirement
               for requirement in importlib.metadata.requires("neutronjittor"))


def test_frames_with_pandas(tmp_path):
    pytest.importorskip("pandas")
    metrics = tmp_path / "m.jsonl"
    metrics.write_text('{"type": "epoch", "epoch": 1, "loss": 1.5}\n{"type": "epoch", "epoch": 2, "loss": 1.2}\n')
    frame, summaries = nj.read_metrics(metrics, as_frame=True)
    assert list(frame["loss"]) == [1.5, 1.2] and summaries == []
