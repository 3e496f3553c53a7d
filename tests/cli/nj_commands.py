"""What the Python tests of nj's commands share: running a command that must succeed, and ending with what was off."""
import os
import subprocess
import sys


def run(command, env=None):
    """Runs `command` with `env` added to this process's; returns (stdout, stderr), or raises naming the command."""
    result = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, **(env or {})})
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed ({result.returncode}):\n{result.stderr[-3000:]}")
    return result.stdout, result.stderr


def finish(failures, passed):
    """Prints every failure, or `passed` where there is none; returns the exit status."""
    if failures:
        print("FAILED:\n" + "\n".join(failures), file=sys.stderr)
        return 1
    print(f"PASSED: {passed}")
    return 0
