"""``nj train`` and ``nj infer`` as subprocesses, with keyword options, on one process or under ``mpirun``."""

from __future__ import annotations

import os
import shutil
import subprocess
from typing import Any, List, Optional, Sequence


class NjError(RuntimeError):
    """nj exited non-zero; the message is its error line, and ``output`` all it printed."""

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


def call(arguments: Sequence[str], nj: Optional[str] = None, ranks: Optional[int] = None,
         mpirun: Sequence[str] = ("mpirun",)) -> str:
    """Runs `nj ARGUMENTS...` (under mpirun with `ranks`) and returns what it printed; raises NjError with nj's
    error line where it fails."""
    command = [find_nj(nj), *arguments]
    if ranks is not None:
        command = [*mpirun, "-np", str(ranks), *command]
    result = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, check=False)
    if result.returncode != 0:
        errors = [line for line in result.stdout.splitlines() if "nj: error:" in line]
        message = errors[0][errors[0].index("nj: error:"):] if errors else f"{command[0]} exited {result.returncode}"
        raise NjError(message, result.stdout, result.returncode)
    return result.stdout


def train(dataset: Optional[str] = None, *, nj: Optional[str] = None, ranks: Optional[int] = None,
          mpirun: Sequence[str] = ("mpirun",), **options: Any) -> str:
    """Runs ``nj train DATASET --option value ...`` (``partitions=FOLDER`` in place of a dataset) and returns what
    it printed; raises NjError with nj's error line where it fails. ``ranks``: that many processes under
    ``mpirun`` (give ``mpirun=("mpirun", "--oversubscribe")`` and the like for its own flags)."""
    return call(["train", *([dataset] if dataset else []), *_flags(options)], nj, ranks, mpirun)


def infer(checkpoint: str, dataset: Optional[str] = None, *, output: str, nj: Optional[str] = None,
          ranks: Optional[int] = None, mpirun: Sequence[str] = ("mpirun",), **options: Any) -> str:
    """Runs ``nj infer CHECKPOINT DATASET --output OUTPUT --option value ...``; as train."""
    return call(["infer", checkpoint, *([dataset] if dataset else []), "--output", output, *_flags(options)], nj,
                ranks, mpirun)
