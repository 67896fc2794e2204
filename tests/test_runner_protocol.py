"""The runner protocols say what the session reads: the real launcher has every member, a stub the runs' ones."""

from __future__ import annotations

import typing

from advisor.adapters import load_adapter
from advisor.launch import CancelToken
from advisor.method import MethodSettings
from advisor.method.inputs import LauncherReports, SessionRunner
from advisor.runner import JobRunner


def _members(protocol) -> set[str]:
    """The attributes and methods a protocol (and the protocols it extends) declares."""
    bases = [base for base in protocol.__mro__ if base not in (object, typing.Protocol, typing.Generic)]
    return {name for base in bases for name in [*getattr(base, "__annotations__", {}), *vars(base)]
            if not name.startswith("_")}


def test_the_launcher_has_every_member_the_session_reads():
    settings = MethodSettings("digits-mlp", "ddp", 1, "cpu", 64 * 2**20)
    runner = JobRunner(load_adapter("ddp"), settings, lambda event: None, CancelToken(), {}, warm_workers=False)
    assert isinstance(runner, LauncherReports)  # the session reads its reports only through this check
    missing = {name for name in _members(SessionRunner) | _members(LauncherReports) if not hasattr(runner, name)}
    assert not missing, missing
    runner.close()


def test_a_stub_runner_is_not_taken_for_the_launcher():
    class Stub:
        nproc, ledger, model_info, env, options = 1, [], None, {}, {}

        def probe(self, batch, purpose, precision="fp32"): ...

        def train(self, *args, **kwargs): ...

    assert not isinstance(Stub(), LauncherReports)
