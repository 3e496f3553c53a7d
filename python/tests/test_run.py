"""train() and infer() hand nj's lines over as they come, whether nj prints them on standard output or error, and
still return all it printed and raise NjError with its error line. NJ_BINARY names the nj under test."""

import os
import re
import shutil
import threading
import time

import h5py
import numpy as np
import pytest

import neutronjittor as nj

pytestmark = pytest.mark.skipif(not os.environ.get("NJ_BINARY"), reason="NJ_BINARY names no nj binary")

EPOCH = re.compile(r"epoch +\d+ \| loss")


@pytest.fixture
def dataset(tmp_path):
    rng = np.random.default_rng(1)
    n = 60
    src = rng.integers(0, n, 300)
    dst = rng.integers(0, n, 300)
    labels = rng.integers(0, 3, n)
    return nj.write_dataset(tmp_path / "g.h5", np.array([np.r_[src, dst], np.r_[dst, src]]),
                            rng.normal(size=(n, 4)), labels, np.arange(n) < 30, np.arange(n) >= 30)


def gated_nj(tmp_path, stream):
    """An nj that runs the one under test with all its lines moved to `stream`, then, before it exits, waits for the
    file `gate` that the test's callback creates: a caller that handed lines over only once the process ended would
    never create it, and this nj then fails."""
    gate = tmp_path / "gate"
    script = tmp_path / f"nj-on-{stream}"
    script.write_text(f"""#!/bin/sh
"{os.environ['NJ_BINARY']}" "$@" {"2>&1" if stream == "stdout" else "1>&2"}
status=$?
for _ in $(seq 100); do [ -e "{gate}" ] && exit $status; sleep 0.1; done
echo "nj: error: no line was handed over before the end" >&2
exit 99
""")
    script.chmod(0o755)
    return str(script), gate


@pytest.mark.parametrize("stream", ["stdout", "stderr"])
def test_train_hands_each_epoch_over_before_nj_ends(tmp_path, dataset, stream):
    fake, gate = gated_nj(tmp_path, stream)
    seen = []

    def on_line(line):
        seen.append(line)
        if EPOCH.search(line):
            gate.touch()

    printed = nj.train(dataset, nj=fake, epochs=3, threads=1, on_line=on_line)
    assert len([line for line in seen if EPOCH.search(line)]) == 3
    assert printed == "".join(line + "\n" for line in seen)
    assert "done:" in seen[-1]


@pytest.mark.parametrize("stream", ["stdout", "stderr"])
def test_infer_hands_lines_over_before_nj_ends(tmp_path, dataset, stream):
    checkpoint = str(tmp_path / "c.h5")
    nj.train(dataset, epochs=1, threads=1, save_checkpoint=checkpoint, quiet=True)
    fake, gate = gated_nj(tmp_path, stream)
    seen = []

    def on_line(line):
        seen.append(line)
        gate.touch()

    printed = nj.infer(checkpoint, dataset, output=str(tmp_path / "p.h5"), nj=fake, threads=1, on_line=on_line)
    assert printed == "".join(line + "\n" for line in seen)
    assert "done: 60 vertices" in seen[-1]


@pytest.mark.parametrize("stream", ["stdout", "stderr"])
def test_a_failure_raises_nj_error_with_its_line(tmp_path, dataset, stream):
    fake, gate = gated_nj(tmp_path, stream)
    gate.touch()
    seen = []
    with pytest.raises(nj.NjError, match=r"^nj: error: .*--epochs must be at least 1, not '0'$") as raised:
        nj.train(dataset, nj=fake, epochs=0, on_line=seen.append)
    assert str(raised.value) in seen
    assert raised.value.returncode == 2  # a mistake in the command line


def test_lines_go_to_stderr_unless_quiet(dataset, capsys):
    nj.train(dataset, epochs=2, threads=1)
    shown = capsys.readouterr()
    assert len(EPOCH.findall(shown.err)) == 2 and shown.out == ""
    nj.train(dataset, epochs=2, threads=1, quiet=True)
    assert capsys.readouterr() == ("", "")


def fake_nj(tmp_path, script):
    path = tmp_path / "fake-nj"
    path.write_text("#!/bin/sh\n" + script)
    path.chmod(0o755)
    return str(path)


def test_lines_come_in_the_order_they_were_written(tmp_path):
    """As nj writes its log on one stream and its result on the other."""
    fake = fake_nj(tmp_path, 'i=1; while [ $i -le 2000 ]; do echo "out $i"; echo "err $i" >&2; i=$((i + 1)); done\n')
    seen = []
    printed = nj.call([], nj=fake, on_line=seen.append)
    assert seen == [f"{stream} {i}" for i in range(1, 2001) for stream in ("out", "err")]
    assert printed == "".join(line + "\n" for line in seen)


def test_a_full_pipe_does_not_block(tmp_path):
    """A process that fills its stderr pipe while nothing yet came on stdout, then the reverse."""
    fake = fake_nj(tmp_path, "seq 1 30000 >&2\nseq 1 30000\nseq 30001 60000 >&2\n")
    result = []
    caller = threading.Thread(target=lambda: result.append(nj.call([], nj=fake, quiet=True)), daemon=True)
    caller.start()
    caller.join(60)
    assert result, "call() blocked"
    assert result[0].splitlines() == [str(i) for i in [*range(1, 30001), *range(1, 30001), *range(30001, 60001)]]


def test_a_callback_that_raises_stops_nj_and_lets_it_finish(tmp_path):
    """As nj train does on SIGTERM, this process ends after lines enough to fill the pipe, then a file: closing the
    pipe on it would have killed it first."""
    finished = tmp_path / "finished"
    # The shell's own echo, so that a closed pipe kills the shell itself.
    fake = fake_nj(tmp_path, f"""closing() {{ j=0; while [ $j -lt 20000 ]; do echo $j; j=$((j + 1)); done; }}
trap 'closing; echo > {finished}; exit 143' TERM
echo started
i=0; while [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
""")

    def on_line(line):
        raise KeyboardInterrupt(line)

    start = time.monotonic()
    with pytest.raises(KeyboardInterrupt, match="started"):
        nj.call([], nj=fake, on_line=on_line)
    assert time.monotonic() - start < 20, "the process ran on"
    assert finished.exists()


def interrupted_training(checkpoint, **where):
    """Trains until its third epoch's line, where the callback raises as Ctrl-C would; returns the epochs the
    checkpoint holds."""

    def on_line(line):
        if re.search(r"epoch +3 \|", line):
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        nj.train(epochs=100000, threads=1, save_checkpoint=str(checkpoint), on_line=on_line, **where)
    with h5py.File(checkpoint) as f:
        return f.attrs["epochs_done"]


def test_an_interrupted_training_writes_its_checkpoint(tmp_path, dataset):
    assert 3 <= interrupted_training(tmp_path / "c.h5", dataset=dataset) < 100000


@pytest.mark.skipif(shutil.which("mpirun") is None, reason="no mpirun")
def test_an_interrupted_training_under_mpirun_writes_its_checkpoint(tmp_path, dataset):
    parts = str(tmp_path / "parts")
    nj.call(["partition", dataset, "--parts", "2", "--output", parts], quiet=True)
    epochs = interrupted_training(tmp_path / "c.h5", partitions=parts, ranks=2, mpirun=("mpirun", "--oversubscribe"))
    assert 3 <= epochs < 100000
