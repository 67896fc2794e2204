"""`advisor diagnose` against its peers on PyPI, `runmedic` and `trainspotter`, on the same world-corpus entries.

    python bench/diagnose_peers.py --batch 5        # the fresh held-back batch: the fair comparison
    python bench/diagnose_peers.py --split holdout  # every held-back entry (advisor learned from batches 1-4 since)

The peers run from their own virtual environment (created on first use, pinned versions, `--venv` to choose where),
through their command lines with JSON output, exactly as a user runs them; advisor runs as bench/diagnose_world.py
runs it. Each peer finding is mapped to the corpus's kinds (PEER_KINDS below). The mapping is generous on purpose:
a finding that could stand for several kinds counts as whichever one the label names, and findings about things the
corpus does not label (throughput, gradient norms, LR schedules, suspiciously low losses) are ignored instead of
counted as false alarms. So a peer is "right" on an entry when every labelled kind is matched by one of its warning-
or-worse findings and none of those findings points at a kind the label lacks; advisor is scored by the same rule
(its kinds are the corpus's, so it is diagnose_world's "right"). Also printed: problem-or-healthy right (only
whether anything was found), unreadable entries, and error-level findings on healthy runs.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "bench"))

import diagnose_world  # noqa: E402  (the bench folder is not a package)

PEERS = {"runmedic": "runmedic==0.1.1", "trainspotter": "trainspotter[tensorboard]==0.2.6"}
PER_ENTRY_SECONDS = 120
DIVERGED, JITTER, PERIODIC = "diverged", "oscillation-jitter", "oscillation-periodic"
# peer finding -> the corpus kinds it may stand for; absent = not a kind the corpus labels (ignored).
PEER_KINDS = {
    "runmedic": {
        "non_finite": {DIVERGED}, "divergence": {DIVERGED}, "anomaly_nan": {DIVERGED},
        "loss_spikes": {JITTER, PERIODIC, DIVERGED}, "no_learning": {"not-learning"},
        "constant_lr_plateau": {"slow-convergence", "not-learning"}, "overfitting": {"overfitting"},
        "cuda_oom": {"oom"}, "dataloader_killed": {"crash"}, "nccl_timeout": {"crash"},
        "device_mismatch": {"crash"}, "backward_twice": {"crash"}, "inplace_grad": {"crash"},
    },
    "trainspotter": {
        "divergence": {DIVERGED}, "spikes": {JITTER, PERIODIC, DIVERGED}, "overfitting": {"overfitting"},
        "plateau": {"slow-convergence", "not-learning"}, "eval_noise": {JITTER, PERIODIC},
    },
}
SERIOUS = {"runmedic": ("critical", "warning"), "trainspotter": ("error", "warning")}
WORST = {"runmedic": "critical", "trainspotter": "error"}


@dataclass
class PeerOutcome:
    expected: set[str]
    findings: list[tuple[str, str]] = field(default_factory=list)  # (finding name, severity), warning or worse
    unreadable: str | None = None
    seconds: float = 0.0

    def mapped(self, tool: str) -> list[set[str]]:
        return [PEER_KINDS[tool][name] for name, _ in self.findings if name in PEER_KINDS[tool]]

    def right(self, tool: str) -> bool:
        if self.unreadable:
            return False
        mapped = self.mapped(tool)
        every_label_found = all(any(kind in kinds for kinds in mapped) for kind in self.expected)
        nothing_extra = all(kinds & self.expected for kinds in mapped)
        return every_label_found and nothing_extra

    def problem_right(self, tool: str) -> bool:
        return not self.unreadable and bool(self.mapped(tool)) == bool(self.expected)

    def false_alarm(self, tool: str) -> bool:
        return not self.expected and any(sev == WORST[tool] for _, sev in self.findings)


def ensure_venv(venv: str) -> str:
    """The peers' own environment (never the project's: their numpy/tensorboard pins are theirs)."""
    python = os.path.join(venv, "bin", "python")
    marker = os.path.join(venv, ".peers-" + "-".join(sorted(PEERS.values())).replace("[", "").replace("]", ""))
    if not os.path.exists(marker):
        subprocess.run([sys.executable, "-m", "venv", venv], check=True)
        subprocess.run([python, "-m", "pip", "install", "--quiet", *PEERS.values()], check=True)
        open(marker, "w").close()
    return os.path.join(venv, "bin")


def _peer_argv(tool: str, bin_dir: str, path: str) -> list[str]:
    if tool == "runmedic":
        return [os.path.join(bin_dir, "runmedic"), "diagnose", "--json", path]
    return [os.path.join(bin_dir, "trainspotter"), "analyze", path, "--output", "json"]


def _peer_findings(tool: str, report) -> list[tuple[str, str]]:
    if tool == "runmedic":  # one report per run found under the path: a folder is one entry, so every run counts
        runs = report if isinstance(report, list) else [report]
        found = [(f["check"], f["severity"]) for run in runs for f in run.get("findings", [])]
    else:
        found = [(f["detector"], f["severity"]) for f in report.get("findings", [])]
    return [(name, sev) for name, sev in found if sev in SERIOUS[tool]]


def judge_peer(tool: str, bin_dir: str, name: str, entry: dict) -> PeerOutcome:
    outcome = PeerOutcome(set(entry["kinds"]))
    start = time.perf_counter()
    try:
        done = subprocess.run(_peer_argv(tool, bin_dir, os.path.join(diagnose_world.WORLD, name)), capture_output=True,
                              text=True, timeout=PER_ENTRY_SECONDS, cwd=diagnose_world.WORLD)
    except subprocess.TimeoutExpired:
        outcome.unreadable = f"no answer within {PER_ENTRY_SECONDS} s"
        return outcome
    finally:
        outcome.seconds = time.perf_counter() - start
    try:
        report = json.loads(done.stdout)
    except json.JSONDecodeError:
        outcome.unreadable = ((done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1])[:160]
        return outcome
    outcome.findings = _peer_findings(tool, report)
    if tool == "runmedic" and isinstance(report, list) and not report:
        outcome.unreadable = "no run found"
    if tool == "trainspotter" and not report.get("run", {}).get("metrics"):
        outcome.unreadable = "no metric read"
    return outcome


def advisor_as_peer(outcome: diagnose_world.Outcome) -> PeerOutcome:
    """advisor's outcome in the peers' terms (its kinds are the corpus's: each maps to itself)."""
    severity = {kind: ("error" if kind in outcome.error_level else "warning") for kind in outcome.found}
    return PeerOutcome(outcome.expected, [(kind, severity[kind]) for kind in sorted(outcome.found)],
                       outcome.unreadable, outcome.seconds)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="advisor diagnose against runmedic and trainspotter.")
    parser.add_argument("--split", choices=diagnose_world.SPLITS)
    parser.add_argument("--batch", type=int, action="append", metavar="N")
    parser.add_argument("--venv", default=os.path.expanduser("~/.cache/batch-advisor/peers-venv"),
                        help="the peers' virtual environment (made on first use)")
    parser.add_argument("--json", metavar="FILE", help="also write each entry's outcome per tool to FILE")
    args = parser.parse_args(argv)
    labels = diagnose_world.selected(diagnose_world.load_labels(), args.split,
                                     tuple(sorted(set(args.batch))) if args.batch else None)
    if not labels:
        print("no entries match --split/--batch in tests/corpus/world/labels.toml", file=sys.stderr)
        return 2
    bin_dir = ensure_venv(args.venv)
    PEER_KINDS["advisor"] = {kind: {kind} for kind in diagnose_world.kinds_known()}
    SERIOUS["advisor"], WORST["advisor"] = ("error", "warning"), "error"
    tools = ("advisor", "runmedic", "trainspotter")
    results: dict[str, dict[str, PeerOutcome]] = {tool: {} for tool in tools}
    for name, entry in labels.items():
        results["advisor"][name] = advisor_as_peer(diagnose_world.judge(name, entry))
        for tool in tools[1:]:
            results[tool][name] = judge_peer(tool, bin_dir, name, entry)
    healthy = sum(not e["kinds"] for e in labels.values())
    print(f"{len(labels)} entries ({healthy} healthy); split {args.split or 'any'}, batch "
          f"{','.join(map(str, args.batch)) if args.batch else 'any'}")
    print(f"{'tool':<13} {'right':>9} {'problem-or-healthy':>19} {'unreadable':>10} {'false alarms':>13} {'seconds':>8}")
    for tool in tools:
        outs = results[tool].values()
        right = sum(o.right(tool) for o in outs)
        binary = sum(o.problem_right(tool) for o in outs)
        print(f"{tool:<13} {right:>4}/{len(outs):<4} {binary:>13}/{len(outs):<5} {sum(bool(o.unreadable) for o in outs):>10} "
              f"{sum(o.false_alarm(tool) for o in outs):>13} {sum(o.seconds for o in outs):>8.1f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({tool: {name: {"expected": sorted(o.expected), "findings": o.findings, "unreadable": o.unreadable,
                                     "right": o.right(tool)} for name, o in results[tool].items()} for tool in tools},
                      f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
