"""Errors the user sees: one paragraph that names the problem and the fix."""


class AdvisorError(Exception):
    """A problem the user can act on. ``str(err)`` is the whole message."""

    exit_code = 2


class RecipeError(AdvisorError):
    """A recipe file is missing, malformed, or fails validation."""

    def __init__(self, message: str, path: str | None = None, line: int | None = None, key: str | None = None):
        self.path = path
        self.line = line
        self.key = key
        super().__init__(message)


class WorkloadError(AdvisorError):
    """A workload spec cannot be resolved into a usable Workload."""


class AdapterError(AdvisorError):
    """An adapter is unknown, failed to import, or does not satisfy the protocol."""


class TrialError(AdvisorError):
    """A launched trial crashed, hung, or was interrupted."""

    exit_code = 1


class WorkerCrashed(TrialError):
    """A worker died without reporting an error (a signal, a native crash); ``exit_code_of_worker`` is its code."""

    def __init__(self, message: str, exit_code_of_worker: int | None = None):
        self.exit_code_of_worker = exit_code_of_worker
        super().__init__(message)

    @property
    def by_signal(self) -> bool:
        return self.exit_code_of_worker is not None and self.exit_code_of_worker < 0


class SetupError(AdvisorError):
    """The inputs of a plan are inconsistent or impossible; found before any process starts."""


class CancelledError(TrialError):
    """The user cancelled a running step; every worker process was stopped."""

    exit_code = 130


class ExportError(AdvisorError):
    """A recipe cannot be expressed in the asked-for launcher's configuration."""
