"""Reading a large TensorBoard event file with `advisor diagnose`, against a bare loop over the same records.

    python bench/diagnose_events_speed.py [--size-mb 100] [--runs 3]

The event file (SummaryWriter's layout: one scalar summary an event, a training loss every step, a validation
loss every 1,000) is written to a temporary directory, never into the repository. Its records carry real
lengths and Event protos; their data CRCs are written as zero, because tensorboard's pure-Python CRC would take
minutes to write 100 MB, and advisor's reader does not recompute CRCs (it reads a real file the same way).
The bare loop walks the same records (length, slice) and parses nothing. For scale, tensorboard's own
RawEventFileLoader (CRCs checked in pure Python without TensorFlow) is timed on a 2 MB file with valid CRCs and
extrapolated per MB: an estimate, said as one.
Ends with: RESULT diagnose_events vs_bare_loop=<median ratio> diagnose_s=<median> mb=<size>
"""

import argparse
import os
import statistics
import struct
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

BARE = """
import struct, sys
data = open(sys.argv[1], "rb").read()
offset, records, unpack = 0, 0, struct.Struct("<Q").unpack_from
while offset + 12 <= len(data):
    (length,) = unpack(data, offset)
    record = data[offset + 12:offset + 12 + length]
    offset += length + 16
    records += 1
print(records)
"""

ADVISOR = """
import sys
from advisor.diagnose import diagnose_source
report = diagnose_source(sys.argv[1])
print(report.stats.lines, report.stats.series_lengths, sorted(f.kind for f in report.findings))
"""


def make_events(path: str, size_mb: int) -> int:
    from tensorboard.compat.proto import event_pb2, summary_pb2

    target, step, records = size_mb * 2**20, 0, 0
    frame = struct.Struct("<QI")
    with open(path, "wb") as out:
        version = event_pb2.Event(wall_time=1.7e9, file_version="brain.Event:2").SerializeToString()
        out.write(frame.pack(len(version), 0) + version + b"\0\0\0\0")
        while out.tell() < target:
            chunk = []
            for _ in range(20_000):
                step += 1
                loss = 2.3 * 0.9999995 ** step + 0.05 * ((step * 7919) % 13) / 13
                values = [("train/loss", loss)] + ([("val/loss", loss + 0.1)] if step % 1000 == 0 else [])
                for tag, value in values:
                    event = event_pb2.Event(wall_time=1.7e9 + step, step=step, summary=summary_pb2.Summary(
                        value=[summary_pb2.Summary.Value(tag=tag, simple_value=value)])).SerializeToString()
                    chunk.append(frame.pack(len(event), 0) + event + b"\0\0\0\0")
                    records += 1
            out.write(b"".join(chunk))
    return records


def timed(code: str, path: str) -> tuple[float, str]:
    env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    started = time.perf_counter()
    result = subprocess.run([sys.executable, "-c", code, path], capture_output=True, text=True, env=env, check=True)
    return time.perf_counter() - started, result.stdout.strip()


def tensorboard_loader_seconds_per_mb(folder: str) -> float:
    from torch.utils.tensorboard import SummaryWriter
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader

    writer = SummaryWriter(os.path.join(folder, "small"))
    for step in range(40_000):
        writer.add_scalar("train/loss", 1.0 / (step + 1), step)
    writer.close()
    [name] = os.listdir(os.path.join(folder, "small"))
    path = os.path.join(folder, "small", name)
    started = time.perf_counter()
    sum(1 for _ in EventFileLoader(path).Load())
    return (time.perf_counter() - started) / (os.path.getsize(path) / 2**20)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size-mb", type=int, default=100)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "events.out.tfevents.1700000000.bench.1.0")
        started = time.perf_counter()
        records = make_events(path, args.size_mb)
        print(f"wrote {os.path.getsize(path) / 2**20:.0f} MB, {records} records, in {time.perf_counter() - started:.0f} s")
        ratios, advisor_times = [], []
        for run in range(args.runs):
            bare, bare_out = timed(BARE, path)
            advisor, advisor_out = timed(ADVISOR, path)
            ratios.append(bare / advisor)
            advisor_times.append(advisor)
            print(f"run {run + 1}: bare loop {bare:.2f} s ({bare_out} records), advisor {advisor:.2f} s: {advisor_out}")
        per_mb = tensorboard_loader_seconds_per_mb(folder)
        print(f"tensorboard's EventFileLoader: {per_mb:.2f} s a MB measured on a small file; estimate for this file "
              f"{per_mb * args.size_mb:.0f} s")
    print(f"RESULT diagnose_events vs_bare_loop={statistics.median(ratios):.3f} "
          f"diagnose_s={statistics.median(advisor_times):.2f} mb={args.size_mb}")


if __name__ == "__main__":
    main()
