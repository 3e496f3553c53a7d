"""What the benchmark scripts beside this file share: running nj, and reading its budget errors."""
import re
import subprocess


def run(cmd, env=None):
    """Runs a command; returns its exit code and its stdout and stderr together."""
    result = subprocess.run(cmd, capture_output=True, text=True, env=env)
    return result.returncode, result.stdout + result.stderr


def minimum_budget(message):
    """The smallest budget a 'budget too small' error of nj names, or None."""
    match = re.search(r"use --device-memory (\S+) or more", message or "")
    return match.group(1) if match else None
