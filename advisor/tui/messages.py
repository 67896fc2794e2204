"""Messages the step workers post to the screens (thread-safe: workers call ``post_message``)."""

from __future__ import annotations

from typing import Any

from textual.message import Message


class SessionEvent(Message):
    """One typed event from the engine (``advisor.events``), as it happened."""

    def __init__(self, event: Any) -> None:
        self.event = event
        super().__init__()


class StepDone(Message):
    """A step finished; ``result`` is what the session's call returned."""

    def __init__(self, step: str, result: Any) -> None:
        self.step, self.result = step, result
        super().__init__()


class StepFailed(Message):
    """A step raised: an AdvisorError/TrialError (``message`` is its whole text) or a bug (``unexpected``);
    ``plan_ended``: a node of a plan across nodes was lost (advisor.cluster.NodeLost), so no step can run again."""

    def __init__(self, step: str, message: str, cancelled: bool = False, unexpected: bool = False,
                 plan_ended: bool = False) -> None:
        self.step, self.message, self.cancelled, self.unexpected = step, message, cancelled, unexpected
        self.plan_ended = plan_ended
        super().__init__()
