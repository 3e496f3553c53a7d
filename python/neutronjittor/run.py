"""``nj train`` and ``nj infer`` as subprocesses, with keyword options, on one process or under ``mpirun``."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from typing import Any, Callable, List, Optional, Sequence, Tuple

LineCallback = Callable[[str], Any]


class NjError(RuntimeError):
    """nj exited non-zero; the message is its error line, and ``output`` all it printed (standard output and error
    together)."""

    def __init__(self, message: str, output: str, returncode: int):
        super().__init__(message)
        self.output = output
        self.returncode = returncode


def find_nj(nj: Optional[str] = None) -> str:
    """The nj binary: ``nj``, else $NJ_BINARY, else ``nj`` on the PATH."""
    found = nj or os.environ.get("NJ_BINARY") or "nj"
    if not os.path.exists(found):
        found = shutil.which(found)  # a bare name, looked up on the PATH
    if not found:
        raise FileNotFoundError("no nj binary: pass nj=, set NJ_BINARY, or put nj on the PATH")
    return found


def _flags(options: dict) -> List[str]:
    """keyword=value as nj's flags: device_memory="64M" -> --device-memory 64M; True -> a bare flag; False and
    None -> left out; a list -> the flag then every value (--embeddings 1 2)."""
    argv: List[str] = []
    for key, value in options.items():
        flag = "--" + key.replace("_", "-")
        if value is None or value is False:
            continue
        if value is True:
            argv.append(flag)
        elif isinstance(value, (list, tuple)):
            argv.append(flag)
            argv.extend(str(v) for v in value)
        else:
            argv.extend([flag, str(value)])
    return argv


def _stream(command: List[str], on_line: LineCallback, stop: int) -> Tuple[int, str]:
    """Runs the command, handing each line it prints to ``on_line`` as it comes; returns the exit status and all it
    printed. Its standard output and error share one pipe, so that lines come in the order it wrote them (a pipe
    each, read by two threads, can swap a log line and the result written after it); read as it fills, the pipe
    never blocks the process. An exception on the way (Ctrl-C, one out of ``on_line``) stops the process with the
    signal ``stop`` before it is raised on."""
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, encoding="utf-8",
                               errors="replace")
    printed: List[str] = []
    with process:
        try:
            for line in process.stdout:
                printed.append(line)
                on_line(line.rstrip("\n"))
        except BaseException:
            _stop(process, stop)
            raise
    return process.returncode, "".join(printed)


def _stop(process: subprocess.Popen, stop: int) -> None:
    """Signals the process and waits for its end, reading what it prints meanwhile: nj train finishes its epoch and
    writes the checkpoints asked for, which a closed pipe would cut short. A second interruption kills it."""
    process.send_signal(stop)
    try:
        for _ in process.stdout:
            pass
        process.wait()
    except BaseException:
        process.kill()
        raise


def _to_stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _echo(quiet: bool, on_line: Optional[LineCallback]) -> LineCallback:
    if on_line is not None:
        return on_line
    return (lambda line: None) if quiet else _to_stderr


def call(arguments: Sequence[str], nj: Optional[str] = None, ranks: Optional[int] = None,
         mpirun: Sequence[str] = ("mpirun",), *, quiet: bool = False, on_line: Optional[LineCallback] = None) -> str:
    """Runs `nj ARGUMENTS...` (under mpirun with `ranks`) and returns what it printed, standard output and error
    together; raises NjError with nj's error line where it fails. Each line is shown on the caller's stderr as it
    comes, or handed to ``on_line`` (without its newline) in its place; ``quiet=True``: shown nowhere. An exception
    on the way (Ctrl-C, one out of ``on_line``) stops nj as Slurm would, SIGTERM (SIGUSR1 to mpirun), waits for its
    end and is raised on."""
    command = [find_nj(nj), *arguments]
    # mpirun kills its job on SIGTERM, without a checkpoint, but hands SIGUSR1 on to every rank.
    stop = signal.SIGTERM
    if ranks is not None:
        command = [*mpirun, "-np", str(ranks), *command]
        stop = signal.SIGUSR1
    returncode, printed = _stream(command, _echo(quiet, on_line), stop)
    if returncode != 0:
        errors = [line for line in printed.splitlines() if "nj: error:" in line]
        message = errors[0][errors[0].index("nj: error:"):] if errors else f"{command[0]} exited {returncode}"
        raise NjError(message, printed, returncode)
    return printed


def train(dataset: Optional[str] = None, *, nj: Optional[str] = None, ranks: Optional[int] = None,
          mpirun: Sequence[str] = ("mpirun",), quiet: bool = False, on_line: Optional[LineCallback] = None,
          **options: Any) -> str:
    """Runs ``nj train DATASET --option value ...`` (``partitions=FOLDER`` in place of a dataset), showing its
    lines as they come (on stderr; to ``on_line`` in their place; nowhere with ``quiet=True``), and returns all it
    printed; raises NjError with nj's error line where it fails. ``ranks``: that many processes under ``mpirun``
    (give ``mpirun=("mpirun", "--oversubscribe")`` and the like for its own flags)."""
    return call(["train", *([dataset] if dataset else []), *_flags(options)], nj, ranks, mpirun, quiet=quiet,
                on_line=on_line)


def infer(checkpoint: str, dataset: Optional[str] = None, *, output: str, nj: Optional[str] = None,
          ranks: Optional[int] = None, mpirun: Sequence[str] = ("mpirun",), quiet: bool = False,
          on_line: Optional[LineCallback] = None, **options: Any) -> str:
    """Runs ``nj infer CHECKPOINT DATASET --output OUTPUT --option value ...``; as train."""
    return call(["infer", checkpoint, *([dataset] if dataset else []), "--output", output, *_flags(options)], nj,
                ranks, mpirun, quiet=quiet, on_line=on_line)
