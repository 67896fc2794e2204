"""The seeded draw that split the world corpus into `tune` and `holdout` (about 60/40), stratified by kind and by
format. It was run once, after every entry was labelled and before any detector read any entry; its result is
recorded in labels.toml (each entry's `split`) and the seed in the file's header. Re-running it on the same
entries gives the same split (`python tests/corpus/world/split.py --check`). Entries added later carry a new
`batch` number and are drawn on their own (seed SEED + 100 x (batch - 1)), so nothing already drawn moves.

Rule: order the entries by stratum (their kinds, healthy apart), then by format, then by a seeded random key;
walk that order with a running share of 0.4 starting from a seeded phase, and hold back the entry each time the
running share crosses a whole number: every kind is spread over both parts in proportion. Formats are balanced by
rejection: draws are tried with the seeds SEED, SEED + 1, ... and the first one where every format with 3 entries
or more holds back between 15% and 65% of them is kept (only the counts are looked at, never a score).
"""

from __future__ import annotations

import math
import random
import sys
import tomllib
from pathlib import Path

SEED = 37
HOLDOUT_SHARE = 0.4
LABELS = Path(__file__).with_name("labels.toml")
# batch 3: collected after batches 1-2's held-back part had been scored once (23/30) and so spent; all of it held back.
# batch 4: collected after batch 3 had been scored once (37/45) and so spent; all of it held back too
# batch 5: collected after batch 4 had been scored once (28/41) and so spent; all of it held back, scored once by the lead
# batch 6: collected after batch 5 had been scored once (31/50) and so spent; all of it held back, scored once by the lead
# batch 7: collected after batch 6 had been scored once (27/31) and so spent; all of it held back, scored once by the lead
# batch 8: collected after batch 7 had been scored once (39/51) and so spent; all of it held back, scored once by the lead
# batch 9: collected after batch 8 had been scored once (25/32) and so spent; all of it held back, scored once by the lead
# batch 10: collected after batch 9 had been scored once (30/39) and so spent; all of it held back, scored once by the lead
# batch 11: collected after batch 10 had been scored once (27/37) and so spent; all of it held back, scored once by the lead
# batch 12: collected after batch 11 had been scored once (29/36) and so spent; all of it held back, scored once by the lead
# batch 13: collected after batch 12 had been scored once (24/30) and so spent; all of it held back, scored once by the lead
# batch 14: collected after batch 13 had been scored once (28/37) and so spent; all of it held back, scored once by the lead
# batch 15: collected after batch 14 had been scored once (23/36) and so spent; all of it held back, scored once by the lead
# batch 16: collected after batch 15 had been scored once (24/37) and so spent; all of it held back, scored once by the lead
# batch 17: collected after batch 16 had been scored once (21/36) and so spent; all of it held back, scored once by the lead
# batch 18: collected after batch 17 had been scored once (19/32) and so spent; all of it held back, scored once by the lead
# batch 19: collected after batch 18 had been scored once (15/30) and so spent; all of it held back, scored once by the lead (19/31)
# batch 20: collected while batch 19 was scored (00:13), from repositories no earlier batch used; all of it held back, scored once by the lead (24/34)
# batch 21: collected after batch 20 had been scored once (24/34) and so spent, from repositories no earlier batch used; all of it held back, scored once by the lead (20/33)
# batch 22: collected after batch 21 had been scored once (20/33) and so spent, from repositories no earlier batch used; all of it held back, scored once by the lead (25/39)
# batch 23: collected after batch 22 had been scored once (25/39) and so spent, from repositories no earlier batch used; all of it held back, scored once by the lead (23/37)
FRESH_BATCHES = frozenset({3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23})


def draw(entries: dict[str, dict], seed: int = SEED, share: float = HOLDOUT_SHARE) -> dict[str, str]:
    split = {}
    for batch in sorted({e.get("batch", 1) for e in entries.values()}):
        members = {n: e for n, e in entries.items() if e.get("batch", 1) == batch}
        if batch in FRESH_BATCHES:
            split.update(dict.fromkeys(members, "holdout"))
        else:
            split.update(draw_batch(members, seed + 100 * (batch - 1), share))
    return split


def draw_batch(entries: dict[str, dict], seed: int, share: float) -> dict[str, str]:
    for attempt in range(1000):
        split = draw_once(entries, seed + attempt, share)
        if formats_balanced(entries, split):
            return split
    raise ValueError("no balanced draw in 1000 seeds")


def formats_balanced(entries: dict[str, dict], split: dict[str, str]) -> bool:
    formats = {e.get("format", "") for e in entries.values()}
    for fmt in formats:
        parts = [split[n] for n, e in entries.items() if e.get("format", "") == fmt]
        if len(parts) >= 3 and not 0.15 <= parts.count("holdout") / len(parts) <= 0.65:
            return False
    return True


def draw_once(entries: dict[str, dict], seed: int, share: float) -> dict[str, str]:
    rng = random.Random(seed)
    keys = {name: rng.random() for name in sorted(entries)}
    phase = rng.random()
    order = sorted(entries, key=lambda n: (",".join(sorted(entries[n]["kinds"])) or "~healthy",
                                           entries[n].get("format", ""), keys[n]))
    split = {}
    for k, name in enumerate(order):
        crossed = math.floor((k + 1) * share + phase) > math.floor(k * share + phase)
        split[name] = "holdout" if crossed else "tune"
    return split


def main() -> int:
    entries = tomllib.loads(LABELS.read_text())["entries"]
    drawn = draw(entries)
    moved = {name: (entry["split"], drawn[name]) for name, entry in entries.items() if entry["split"] != drawn[name]}
    if "--check" in sys.argv:
        print("split as drawn" if not moved else f"differs from the draw: {moved}")
        return 1 if moved else 0
    for name, part in sorted(drawn.items(), key=lambda kv: kv[1]):
        print(f"{part:<8} {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
