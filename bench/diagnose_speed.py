"""Parse speed and peak memory of `advisor diagnose` on a large log, against a bare Python line loop.

    python bench/diagnose_speed.py [--size-mb 1024] [--runs 5] [--keep PATH]

Both contenders run in fresh subprocesses over the same file, alternating, --runs times each; the bare loop
only counts lines (`for line in f`). The subprocesses keep their bytecode in a temporary PYTHONPYCACHEPREFIX,
written by one untimed diagnose run first: as an installed package loads its .pyc, diagnose is timed without
compiling its modules (under PYTHONDONTWRITEBYTECODE a stale cache would add ~30 ms a run). The ratio is bare time / diagnose time per pair, and the RESULT line
prints the median over the pairs. Goal (issue 9): >= 0.8x the bare loop, peak memory flat (independent of
the file size). The log is written to a temporary directory, never into the repository.
Ends with: RESULT diagnose_speed vs_bare_loop=<median ratio> peak_mib=<max peak RSS>
"""

import argparse
import math
import statistics
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

BARE = """
import sys
n = 0
with open(sys.argv[1], "rb") as f:
    for line in f:
        n += 1
print(n)
"""

ADVISOR = """
import sys
from advisor.diagnose import diagnose_source
report = diagnose_source(sys.argv[1])
print(report.stats.lines, sorted(f.kind for f in report.findings), report.stats.sampling_stride)
"""


def make_log(path: str, size_mb: int) -> None:
    """A plain training log: a falling, noisy loss, a val line every 2,000 steps, a nan near the end."""
    target = size_mb * 2**20
    step = 0
    with open(path, "w") as log:
        while log.tell() < target:
            lines = []
            for _ in range(20_000):
                step += 1
                loss = 2.3 * math.exp(-step / 3e6) + 0.05 * ((step * 7919) % 13) / 13
                lines.append(f"2026-11-29 12:00:00,000 INFO train.py:88 Epoch [{step // 50_000 + 1}/400] "
                             f"Step [{step % 50_000}/50000] Loss: {loss:.4f} lr: 0.1 grad_norm: 1.23\n")
                if step % 2_000 == 0:
                    lines.append(f"step {step}: train loss {loss:.4f}, val loss {loss + 0.1:.4f}\n")
            log.write("".join(lines))
        log.write("Epoch [400/400] Step [1/50000] Loss: nan lr: 0.1 grad_norm: nan\n")


PEAK = """
import resource, subprocess, sys, time
start = time.perf_counter()
out = subprocess.run([sys.executable, "-c", sys.argv[1], sys.argv[2]], capture_output=True, text=True, check=True)
elapsed = time.perf_counter() - start
print(elapsed, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, out.stdout.strip(), sep="\t")
"""


ENV = dict(os.environ)


def timed(code: str, path: str) -> tuple[float, float, str]:
    """Seconds, peak RSS (MiB) of that one run (measured by a fresh parent), and what it printed."""
    out = subprocess.run([sys.executable, "-c", PEAK, code, path], capture_output=True, text=True, check=True,
                         env=ENV).stdout
    elapsed, peak, printed = out.rstrip("\n").split("\t")
    return float(elapsed), float(peak), printed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size-mb", type=int, default=1024)
    parser.add_argument("--runs", type=int, default=5, help="pairs of runs; the RESULT is their median ratio")
    parser.add_argument("--keep", help="reuse (or create) the log at this path")
    args = parser.parse_args()
    path = args.keep or os.path.join(tempfile.mkdtemp(), "big.log")
    if not os.path.exists(path):
        print(f"writing a {args.size_mb} MiB log to {path} ...", flush=True)
        make_log(path, args.size_mb)
    size_mib = os.path.getsize(path) / 2**20
    ENV.pop("PYTHONDONTWRITEBYTECODE", None)
    ENV["PYTHONPYCACHEPREFIX"] = tempfile.mkdtemp(prefix="pycache-")
    timed(BARE, path)  # warm the page cache so both read from memory
    timed(ADVISOR, path)  # and write diagnose's bytecode (into the prefix, never the source tree)
    ratios, peaks = [], []
    for run in range(args.runs):
        bare_s, _, bare_out = timed(BARE, path)
        adv_s, adv_mib, adv_out = timed(ADVISOR, path)
        ratios.append(bare_s / adv_s)
        peaks.append(adv_mib)
        print(f"run {run + 1}: bare {bare_s:6.2f} s ({size_mib / bare_s:6.1f} MiB/s)  diagnose {adv_s:6.2f} s "
              f"({size_mib / adv_s:6.1f} MiB/s)  ratio {bare_s / adv_s:.2f}  peak RSS {adv_mib:.0f} MiB  "
              f"({adv_out})", flush=True)
    print(f"file: {size_mib:.0f} MiB, {bare_out} lines")
    if not args.keep:
        os.remove(path)
    shutil.rmtree(ENV["PYTHONPYCACHEPREFIX"], ignore_errors=True)
    print(f"RESULT diagnose_speed vs_bare_loop={statistics.median(ratios):.2f} peak_mib={max(peaks):.0f}")


if __name__ == "__main__":
    main()
