"""The peer comparison's scoring rule (bench/diagnose_peers.py): generous to the peers, the same rule for advisor."""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))

import diagnose_peers as peers  # noqa: E402


def test_a_peer_finding_counts_as_whichever_of_its_kinds_the_label_names():
    spikes_on_divergence = peers.PeerOutcome({"diverged"}, [("loss_spikes", "warning")])
    spikes_on_jitter = peers.PeerOutcome({"oscillation-jitter"}, [("loss_spikes", "warning")])
    assert spikes_on_divergence.right("runmedic") and spikes_on_jitter.right("runmedic")


def test_a_finding_the_label_lacks_is_wrong_and_an_unlabelled_kind_of_finding_is_ignored():
    extra = peers.PeerOutcome({"diverged"}, [("non_finite", "critical"), ("overfitting", "warning")])
    ignored = peers.PeerOutcome(set(), [("grad_spikes", "warning"), ("slow_steps", "warning")])
    missed = peers.PeerOutcome({"overfitting", "diverged"}, [("non_finite", "critical")])
    assert not extra.right("runmedic") and ignored.right("runmedic") and not missed.right("runmedic")
    assert ignored.problem_right("runmedic") and missed.problem_right("runmedic")


def test_unreadable_is_never_right_and_only_the_worst_severity_on_a_healthy_run_is_a_false_alarm():
    unreadable = peers.PeerOutcome(set(), [], unreadable="cannot guess format")
    alarmed = peers.PeerOutcome(set(), [("divergence", "error")])
    warned = peers.PeerOutcome(set(), [("divergence", "warning")])
    assert not unreadable.right("trainspotter") and not unreadable.problem_right("trainspotter")
    assert alarmed.false_alarm("trainspotter") and not warned.false_alarm("trainspotter")
    assert peers._peer_findings("trainspotter", {"findings": [{"detector": "plateau", "severity": "info"}]}) == []
