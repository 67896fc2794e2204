"""A deterministic stand-in for the real runner, for the app's tests: the JobRunner surface
(probe, train, ledger, model_info, env, options, nproc) and its typed events, without processes.

Memory = fixed + per_sample x batch (halved by mixed precision); throughput saturates at ``saturate``
samples/s; validation accuracy and losses are fixed functions of the batch, so every screen is the
same on every run."""

from __future__ import annotations

from advisor.method.ceiling import ProbeTrial
from advisor.events import EvalPoint, ProbeFinished, RunStarted, TrialFinished, TrialProgress
from advisor.ledger import TrialRecord

MIB = 1024 * 1024
CHECK_TIMEOUT = 120  # the Setup's workload check and the first Start import torch (a child process, then the app)


class EventStubRunner:
    # The default speed (5 samples/s per sample of global batch, up to 400): steps of 0.1-0.3 s, as a small CPU job
    # takes, so a side-by-side timing round (advisor/method/speed.py: long enough to last 2 s) is 10-20 steps. At
    # ten times that speed the rounds ran 100 steps each, a thousand progress events a walk for the app to draw
    # (3-7 s of every walk's trial and sweep); the ratios, and so every decision, are the same at either speed.
    def __init__(self, emit, nproc=2, fixed=20 * MIB, per_sample=int(0.5 * MIB), budget=128 * MIB, saturate=400,
                 fail_probe_at=None, rate=5, at_chance=False):
        self.emit, self.nproc = emit, nproc
        self.fixed, self.per_sample, self.budget, self.saturate = fixed, per_sample, budget, saturate
        self.fail_probe_at = fail_probe_at
        self.at_chance = at_chance  # a model that learns nothing: a flat loss, validation at chance (1/10)
        self.rate = rate  # samples/s per sample of global batch, until ``saturate``
        self.ledger: list[TrialRecord] = []
        self.model_info = {"parameters": 12_345, "has_batchnorm": False}
        self.env, self.options = {"MALLOC_MMAP_THRESHOLD_": "65536"}, {}

    def peak(self, batch, precision="fp32"):
        return self.fixed + self.per_sample * batch * (0.5 if precision != "fp32" else 1)

    def probe(self, batch, purpose, precision="fp32"):
        from advisor.errors import TrialError

        if self.fail_probe_at is not None and batch >= self.fail_probe_at:
            raise TrialError(f"The ceiling probe at batch {batch} failed on rank 0: RuntimeError: shape '[-1, 3]' "
                             "is invalid for input of size 1024\n    last worker lines: ...")
        peak = self.peak(batch, precision)
        fits = peak <= self.budget * 0.9
        trial = ProbeTrial(batch, "ok" if fits else "oom", int(peak) if fits else None, 1.5, purpose,
                           "" if fits else "DefaultCPUAllocator: can't allocate memory",
                           measured_by="stub tracker")
        self.ledger.append(TrialRecord("ceiling", batch, 1, 1, batch, trial.status, 1.5,
                                       peak_bytes=trial.peak_bytes, note=f"{purpose} probe"))
        self.emit(ProbeFinished(trial))
        return trial

    def train(self, phase, per_device, steps, lr, warmup_steps=0, accumulation=1, evaluate=False,
              precision="fp32", eval_points=1, seed=0):
        g = per_device * self.nproc * accumulation
        self.emit(RunStarted(phase, per_device, self.nproc, accumulation, steps, precision, lr))
        peak = self.peak(per_device, precision)
        if peak > self.budget:
            record = TrialRecord(phase, per_device, self.nproc, accumulation, g, "oom", 0.5, lr=lr,
                                 precision=precision, steps=steps, note="out of memory")
        else:
            throughput = float(min(g * self.rate, self.saturate))
            step_seconds = g / throughput
            losses = []
            for step in range(1, steps + 1):
                loss = round(2.3 + 0.01 * (step % 3), 4) if self.at_chance else round(2.3 / (1 + step * per_device / 200), 4)
                losses.append(loss)
                self.emit(TrialProgress(phase, per_device, step, steps, loss, step_seconds))
            metric = (0.1 if self.at_chance else round(0.70 + 0.1 * min(per_device, 64) / 64, 3)) if evaluate else None
            evals = []
            if evaluate:
                for point in range(1, eval_points + 1):
                    at = steps * point // eval_points
                    value = round(metric * point / eval_points, 3)
                    evals.append({"step": at, "train_seconds": round(at * step_seconds, 3), "val_metric": value,
                                  "val_loss": round(1 - value, 3)})
                    self.emit(EvalPoint(phase, per_device, at, round(at * step_seconds, 3), round(1 - value, 3),
                                        value))
            record = TrialRecord(phase, per_device, self.nproc, accumulation, g, "ok", round(steps * step_seconds, 3),
                                 lr=lr, warmup_steps=warmup_steps, precision=precision, steps=steps, seed=seed,
                                 peak_bytes=int(peak), step_seconds=step_seconds, throughput=throughput,
                                 final_loss=losses[-1], val_loss=(1 - metric) if evaluate else None,
                                 val_metric=metric, train_seconds=round(steps * step_seconds, 3), losses=losses,
                                 evals=evals)
        self.ledger.append(record)
        self.emit(TrialFinished(record))
        return record


def stub_factory(**kwargs):
    """A runner_factory for create_app: (adapter, settings, emit) -> EventStubRunner."""
    return lambda adapter, settings, emit: EventStubRunner(emit, nproc=settings.nproc, **kwargs)


# -- driving the app in tests ----------------------------------------------------------------------------

async def wait_for(pilot, predicate, timeout: float = 60.0, what: str = "the condition"):
    """Pause the pilot until ``predicate()`` holds (the app keeps running meanwhile)."""
    import time

    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        await pilot.pause(0.1)


def cpu_host(cores: int = 2):
    from advisor.device import HostDevices

    return HostDevices("cpu", cpu_count=cores)


def stub_app(runner_kwargs: dict | None = None, **prefill):
    """The app as the tests drive it: digits-mlp on 2 CPU processes under 128 MiB, a stub runner."""
    from advisor.tui.app import Prefill, create_app

    values = dict(workload="digits-mlp", adapter="ddp", nproc=2, device_memory="128MiB", trial_steps=8,
                  sweep_steps=12)
    values.update(prefill)
    return create_app(Prefill(**values), runner_factory=stub_factory(**(runner_kwargs or {})), host=cpu_host())


def screen_text(app, selector: str) -> str:
    """The plain text a Static shows."""
    widget = app.screen.query_one(selector)
    return str(widget.render())


async def start_walk(pilot, timeout: float = 60.0):
    """On Setup: wait for the workload check, then Start; returns on the Memory ceiling screen."""
    app = pilot.app
    # The check runs in a child process that imports torch: on a loaded machine that alone takes a while.
    await wait_for(pilot, lambda: screen_text(app, "#workload-status").strip() and "checking" not in screen_text(
        app, "#workload-status"), max(timeout, CHECK_TIMEOUT), "the workload check")
    await pilot.press("ctrl+r")
    await wait_for(pilot, lambda: app.session is not None and app.screen.name == "ceiling", max(timeout, CHECK_TIMEOUT),
                   "the Setup check to finish")
    # The first Start imports the workload in the app's process (its check ran in a child): a key pressed
    # before the new screen has focused its Run button is lost, as it would be for a user.
    await wait_for(pilot, lambda: app.screen.focused is not None, timeout, "the ceiling screen to be ready")


async def run_step(pilot, step: str, timeout: float = 60.0):
    """On a step screen: press r (unless it runs by itself) and wait until the step is done."""
    app = pilot.app
    assert app.screen.name == step, f"on {app.screen.name}, not {step}"
    if not type(app.screen).AUTO_RUN and step not in app.done and app.running != step:
        await pilot.press("r")
    await wait_for(pilot, lambda: step in app.done or (app.running is None and app.screen.query_one(
        ".error-panel").has_class("shown")), timeout, f"the {step} step")
    await pilot.pause(0.1)


async def walk_to(pilot, target: str, timeout: float = 60.0):
    """From Setup, run every step up to ``target`` and stop on its screen."""
    from advisor.tui.app import STEP_NAMES

    app = pilot.app
    await start_walk(pilot, timeout)
    for step in STEP_NAMES[1:]:
        if step == target:
            break
        await run_step(pilot, step, timeout)
        assert step in app.done, f"{step} did not finish: {screen_text(app, '.error-panel')}"
        await pilot.press("n")
        await wait_for(pilot, lambda: app.screen.name != step, timeout, f"leaving {step}")
    await pilot.pause(0.2)


def rendered_lines(widget) -> list[str]:
    """The text a line-API widget (a DataTable) shows now, one string a screen row: what the user reads,
    after any cutting by the widget's width."""
    return ["".join(segment.text for segment in widget.render_line(y)) for y in range(widget.size.height)]


def all_rendered_lines(table) -> list[str]:
    """Every line of a DataTable as it shows at its width, rows scrolled out of view included (a row below
    the fold is reached by scrolling down; a value cut at the table's right edge is what the user misses)."""
    scroll_x = table.scroll_offset.x
    return ["".join(segment.text for segment in table._render_line(y, scroll_x, scroll_x + table.size.width,
                                                                      table.rich_style))
            for y in range(table.virtual_size.height)]


def cut_cells(table) -> list[str]:
    """The cells of ``table`` whose whole value does not show on screen (a value cut by its column or by the
    table's edge shows only as its beginning)."""
    import re

    from rich.text import Text

    shown = {token for line in all_rendered_lines(table) for token in re.split(r"[\s│|▏▕]+", line) if token}
    values = [Text.from_markup(str(cell)).plain for index in range(table.row_count) for cell in table.get_row_at(index)]
    return [value for value in values if value.strip() and any(t not in shown for t in value.split())]
