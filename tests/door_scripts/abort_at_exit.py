"""A 2-process torchrun script that does its work, prints its result, and then (rank 1) dies at interpreter exit
the way gloo's process-group teardown sometimes does (ENVIRONMENT.md: "terminate called without an active
exception", SIGABRT). Rank 0 prints the result only once rank 1 has done its part (a file stands in for the last
collective). With --early, rank 1 aborts before its part: the work was not done."""

import argparse
import atexit
import os
import sys
import time
from pathlib import Path

parser = argparse.ArgumentParser()
parser.add_argument("--shared", required=True)  # a folder both ranks see
parser.add_argument("--early", action="store_true")
args = parser.parse_args()
rank, done = int(os.environ["RANK"]), Path(args.shared) / "rank1-done"
printed = Path(args.shared) / "rank0-printed"


def gloo_like_abort():
    sys.stderr.write("terminate called without an active exception\n")
    sys.stderr.flush()
    os.abort()


if rank == 1:
    if args.early:
        gloo_like_abort()
    done.write_text("ok")
    # The teardown abort comes after the last collective, when every rank's work is done: wait until rank 0 has
    # printed its result (else torchrun may stop rank 0 before its poll sees the file: a race the real job lacks).
    deadline = time.monotonic() + 60
    while not printed.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    atexit.register(gloo_like_abort)
else:
    deadline = time.monotonic() + 60
    while not done.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    if done.exists():
        print("result: every rank finished", flush=True)
        printed.write_text("ok")
