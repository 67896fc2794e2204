"""`advisor diagnose`: every reader on real output, every finding kind, the traps, and bad input."""

import io
import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from advisor.cli import main
from advisor.diagnose import Context, diagnose_source
from advisor.diagnose.readers import OOMReader, TorchrunReader
from advisor.diagnose.scan import read_source

CORPUS = Path(__file__).parent / "corpus"
LABELS = tomllib.loads((CORPUS / "labels.toml").read_text())


def kinds(path, **kw):
    return sorted({f.kind for f in diagnose_source(str(path), **kw).findings})


def write(tmp_path, name, text, mode="w"):
    path = tmp_path / name
    if mode == "wb":
        path.write_bytes(text)
    else:
        path.write_text(text)
    return path


# ------------------------------------------------------------------ corpus

@pytest.mark.parametrize("name", ["plain_healthy_noisy_batch8.log", "plain_plateau_then_drop.log",
                                  "deepspeed_healthy.log", "hf_healthy.log", "lightning_healthy_notty.log"])
def test_traps_and_healthy_runs_get_no_finding(name):
    assert kinds(CORPUS / "logs" / name) == []


@pytest.mark.parametrize("name, exception", [("torchrun_crash_not_oom.log", "ValueError"),
                                             ("plain_crash_shape_not_oom.log", None)])
def test_a_crash_that_is_not_an_oom_is_named_as_a_crash(name, exception):
    report = diagnose_source(str(CORPUS / "logs" / name))
    assert [f.kind for f in report.findings] == ["crash"]
    finding = report.findings[0]
    assert "not an out-of-memory" in finding.summary
    if exception:
        assert finding.evidence["exception"] == exception and finding.evidence["class"] == "exception"
    else:
        assert finding.evidence["class"] == "shape-mismatch" and "not a batch-size problem" in finding.actions[-1]


# ------------------------------------------------------------------ readers

@pytest.mark.parametrize("line, expected", [
    ("RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 7.79 GiB total capacity; 6.64 GiB "
     "already allocated; 13.00 MiB free; 6.70 GiB reserved in total by PyTorch)",
     {"tried_bytes": 20 * 2**20, "gpu": "0", "free_bytes": 13 * 2**20}),
    ("RuntimeError: CUDA out of memory. Tried to allocate 12.00 MiB (GPU 1; 10.00 GiB total capacity; 9.00 GiB "
     "already allocated; 0 bytes free; 40.00 MiB cached)", {"tried_bytes": 12 * 2**20, "gpu": "1", "free_bytes": 0}),
    ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.00 GiB. GPU 0 has a total capacity of 79.10 GiB "
     "of which 1.20 GiB is free. Including non-PyTorch memory, this process has 77.90 GiB memory in use. Of the "
     "allocated memory 70.00 GiB is allocated by PyTorch, and 6.00 GiB is reserved by PyTorch but unallocated.",
     {"tried_bytes": 3 * 2**30, "total_bytes": int(79.10 * 2**30), "reserved_unallocated_bytes": 6 * 2**30}),
    ("torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 8.00 MiB. GPU 0 has a total capacty of "
     "4.00 GiB of which 0 bytes is free.", {"tried_bytes": 8 * 2**20, "free_bytes": 0}),
    ("RuntimeError: CUDA error: out of memory", {"device": "cuda"}),
    ("RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`", {"device": "cuda"}),
    ("RuntimeError: [enforce fail at alloc_cpu.cpp:114] data. DefaultCPUAllocator: not enough memory: you tried to "
     "allocate 1048576 bytes.", {"device": "cpu", "tried_bytes": 1048576}),
])
def test_oom_reader_parses_every_generation(line, expected):
    events = OOMReader().read(line, 7)
    assert events and events[0].kind == "oom" and events[0].line == 7
    for key, value in expected.items():
        assert events[0].details[key] == value


def test_rank_prefix_is_stripped_and_kept_as_evidence(tmp_path):
    log = write(tmp_path, "r.log", "[rank3]: Traceback (most recent call last):\n[rank3]: torch.OutOfMemoryError: "
                "CUDA out of memory. Tried to allocate 2.00 GiB. GPU 3 has a total capacity of 79.10 GiB of which "
                "1.00 GiB is free.\n")
    finding = diagnose_source(str(log)).findings[0]
    assert finding.kind == "oom" and finding.evidence["rank"] == 3 and finding.evidence["gpu"] == 3
    assert finding.evidence["line"] == 2 and "(rank 3)" in finding.summary


def test_torchrun_failure_lines():
    reader = TorchrunReader()
    killed = reader.read("WARNING:torch.distributed.elastic.multiprocessing.api:failed (exitcode: -9) local_rank: 0 "
                         "(pid: 4242) of binary: /usr/bin/python3", 3)
    assert killed[0].kind == "killed" and killed[0].details["local_rank"] == 0
    assert reader.read("  exitcode  : 1 (pid: 77)", 4)[0].kind == "crash"
    assert reader.read("Out of memory: Killed process 1234 (python)", 5)[0].kind == "killed"


def test_oom_with_context_from_a_recipe_tailors_the_last_action(tmp_path):
    log = write(tmp_path, "o.log", "RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 7.79 GiB "
                "total capacity; 6.64 GiB already allocated; 13.00 MiB free; 6.70 GiB reserved in total by PyTorch)\n")
    ctx = Context(per_device=32, world_size=8, accumulation=1, global_batch=256, precision="bf16")
    actions = diagnose_source(str(log), context=ctx).findings[0].actions
    assert "already on" in actions[0]
    assert "from 32 to 16" in actions[-1] and "accumulation to 2" in actions[-1] and "256" in actions[-1]
    plain = diagnose_source(str(log)).findings[0].actions
    assert plain[0].startswith("Enable mixed precision") and "graph alive" in plain[1]


def test_deepspeed_overflow_lines_in_the_formats_deepspeed_prints(tmp_path):
    lines = [f"[2026-01-01 00:00:{i:02d},000] [INFO] [loss_scaler.py:183:update_scale] [deepspeed] OVERFLOW! Rank 0 "
             f"Skipping step. Attempted loss scale: {2 ** (16 - i)}, reducing to {2 ** (15 - i)}" for i in range(14)]
    lines.append("[deepspeed] OVERFLOW! Skipping step. Gradients are non-finite, weights were not updated.")
    lines.append("Current loss scale already at minimum - cannot decrease scale anymore. Exiting run.")
    report = diagnose_source(str(write(tmp_path, "ds.log", "\n".join(lines) + "\n")))
    finding = report.findings[0]
    assert finding.kind == "diverged" and finding.evidence["overflow_events"] == 15
    assert finding.evidence["loss_scale_at_minimum"] and "bf16" in finding.actions[0]


def test_hf_dict_lines_old_and_new_styles_and_custom_eval_prefix(tmp_path):
    text = ("{'loss': 0.6931, 'grad_norm': 1.5, 'learning_rate': 5e-05, 'epoch': 0.1}\n"
            "{'loss': '0.5', 'grad_norm': '1.2', 'learning_rate': '4e-05', 'epoch': '0.2'}\n"
            "{'validation_loss': 0.55, 'validation_runtime': 1.0, 'epoch': 0.2}\n"
            "{'train_runtime': 10.0, 'train_loss': 0.6, 'epoch': 1.0}\n")
    collected = read_source(io.BufferedReader(io.BytesIO(text.encode())), "hf")
    assert [p.value for p in collected.series["train_loss"]] == [0.6931, 0.5]
    assert [p.value for p in collected.series["val_loss"]] == [0.55]


def test_lightning_cr_joined_frames_and_sparse_csv():
    tty = read_source(open(CORPUS / "logs" / "lightning_jitter_tty.log", "rb"), "tty")
    assert tty.stats.formats.get("lightning", 0) > 100 and len(tty.series["train_loss"]) > 100
    csv = read_source(open(CORPUS / "logs" / "lightning_overfit_metrics.csv", "rb"), "csv")
    assert len(csv.series["val_loss"]) == 120 and len(csv.series["train_loss"]) > 100


def test_glued_checkpoint_message_and_rich_bar(tmp_path):
    text = ("Epoch 2: 100%|##########| 45/45 [00:00<00:00, 90.1it/s, v_num=0, train_loss_step=0.210, val_loss=0.300]"
            "Epoch 2, global step 135: 'val_loss' reached 0.30000 (best 0.30000), saving model to 'ckpt.ckpt' as top 1\n"
            "\x1b[2KEpoch 3/9  \x1b[38;5;237m━━━━━━━━━━\x1b[0m 12/45 0:00:01 • 0:00:02 9.50it/s v_num: 0 "
            "train_loss_step: 0.180 val_loss: 0.300\n")
    collected = read_source(io.BufferedReader(io.BytesIO(text.encode())), "pl")
    assert [p.value for p in collected.series["train_loss"]] == [0.21, 0.18]
    assert [p.value for p in collected.series["val_loss"]] == [0.3, 0.3]


@pytest.mark.parametrize("line, name, value", [
    ("Epoch [3/20] Step [100/600] Loss: 0.28", "train_loss", 0.28),
    ("Train Epoch: 1 [4672/60000 (31%)]\tLoss: 0.126806", "train_loss", 0.126806),
    ("step 3000: train loss 4.0312, val loss 4.0421", "val_loss", 4.0421),
    ("iter 100: loss 2.3400, time 30.50ms, mfu 1.20%", "train_loss", 2.34),
    ("2026-01-01 INFO step=10 loss=0.5 val_loss=0.6 lr=0.001", "val_loss", 0.6),
    ('{"step": 5, "loss": NaN, "lr": 0.1}', "train_loss", "nan"),
    ("Epoch [1/5] Step [10/100] Loss: inf", "train_loss", "inf"),
])
def test_plain_formats(line, name, value):
    collected = read_source(io.BufferedReader(io.BytesIO((line + "\n").encode())), "x")
    got = collected.series[name][0].value
    assert (str(got) == value) if isinstance(value, str) else got == pytest.approx(value)


# ------------------------------------------------------------------ context-tailored actions

def test_jitter_actions_depend_on_the_per_device_batch(tmp_path):
    path = CORPUS / "logs" / "plain_jitter_batch4_kv.log"
    small = diagnose_source(str(path), context=Context(per_device=4)).findings[0]
    assert "(< 16): raise it" in small.actions[0] and "GroupNorm" in small.actions[1]
    large = diagnose_source(str(path), context=Context(per_device=128)).findings[0]
    assert "LR is the likely cause" in large.actions[0]


# ------------------------------------------------------------------ CLI, bad input, scale

def run_cli(*args, stdin=None):
    return subprocess.run([sys.executable, "-m", "advisor.cli", "diagnose", *args], capture_output=True, text=True,
                          input=stdin)


def test_exit_codes_and_json(tmp_path):
    healthy = run_cli(str(CORPUS / "logs" / "plain_healthy_brackets.log"))
    assert healthy.returncode == 0 and "No problem found" in healthy.stdout
    bad = run_cli("--json", str(CORPUS / "logs" / "plain_overfit_nanogpt.log"))
    assert bad.returncode == 1
    doc = json.loads(bad.stdout)
    finding = doc["findings"][0]
    assert set(finding) >= {"kind", "severity", "evidence", "actions", "source"} and finding["kind"] == "overfitting"
    assert doc["read"][0]["formats"] == {"plain": 330} and doc["read"][0]["series_lengths"]["val_loss"] == 30
    assert doc["read"][0]["verdict"] == "findings" and doc["read"][0]["cannot_judge"] is None


def test_stdin_and_recipe_context(tmp_path):
    recipe = tmp_path / "r.toml"
    from advisor.recipe import write_recipe

    write_recipe({"schema_version": 1, "batch": {"per_device": 4, "world_size": 2, "accumulation_steps": 1,
                                                 "global": 8},
                  "lr": {"value": 0.1, "base": 0.1, "base_global_batch": 8, "rule": "unchanged"},
                  "warmup": {"steps": 0}}, recipe)
    text = (CORPUS / "logs" / "plain_jitter_batch4_kv.log").read_text()
    result = run_cli("--recipe", str(recipe), "-", stdin=text)
    assert result.returncode == 1 and "per-device batch is 4 (< 16)" in result.stdout


@pytest.mark.parametrize("content, mode, expected", [
    ("", "w", "it is empty"),
    (b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)) * 40, "wb", "looks binary"),
    ("hello world\nthis is a shopping list\nmilk, eggs\n", "w", "none of its"),
])
def test_unreadable_inputs_exit_2_with_the_known_formats(tmp_path, content, mode, expected):
    result = run_cli(str(write(tmp_path, "x.log", content, mode)))
    assert result.returncode == 2 and expected in result.stderr and "hf-trainer" in result.stderr
    assert "Traceback" not in result.stderr


def test_missing_file_directory_and_unknown_format(tmp_path, capsys):
    assert main(["diagnose", str(tmp_path / "nope.log")]) == 2
    assert main(["diagnose", str(tmp_path)]) == 2
    assert main(["diagnose", "--format", "nonsense", str(CORPUS / "logs" / "hf_healthy.log")]) == 2
    assert main(["diagnose", "--format", "tensorboard", str(CORPUS / "logs" / "hf_healthy.log")]) == 2
    err = capsys.readouterr().err
    # A folder is read as a run folder (issue 37): an empty one says no log was found in it.
    assert "no such log file" in err and "no training log found in this folder" in err
    assert "Unknown format 'nonsense'" in err and "not a readable TensorBoard event file" in err


def test_truncated_and_mixed_logs_give_a_partial_diagnosis(tmp_path):
    whole = (CORPUS / "logs" / "plain_diverged_nan.log").read_bytes()
    cut = write(tmp_path, "cut.log", whole[: len(whole) // 2] + b"Epoch [1/2] Step [4", "wb")
    assert kinds(cut) == ["diverged"]
    oom_tail = [l for l in (CORPUS / "logs" / "plain_oom_cpu_rlimit.log").read_text().splitlines()
                if "Loss:" not in l]
    mixed = write(tmp_path, "mixed.log", (CORPUS / "logs" / "hf_healthy.log").read_text()
                  + "\x00\x01\x02 garbage \x00\n" + "\n".join(oom_tail) + "\n")
    report = diagnose_source(str(mixed))
    assert {f.kind for f in report.findings} == {"oom"}
    assert {"hf-trainer", "pytorch-oom"} <= set(report.stats.formats)
    assert any("skipped 1 binary" in n for n in report.stats.notes)


def test_forced_format_reads_only_that_format(tmp_path):
    mixed = write(tmp_path, "m.log", "{'loss': 0.5, 'epoch': 0.1}\nEpoch [1/1] Step [1/9] Loss: 0.4\n")
    forced = read_source(open(mixed, "rb"), "m", forced_format="plain")
    assert [p.value for p in forced.series["train_loss"]] == [0.4]


def test_a_long_log_is_sampled_but_keeps_every_failure_and_validation_line(tmp_path):
    path = tmp_path / "long.log"
    with open(path, "w") as log:
        for step in range(1, 400_001):
            log.write(f"Epoch [1/1] Step [{step}/400000] Loss: {2.3 * (0.99999 ** step) + 0.01 * (step % 7):.4f}\n")
            if step % 20_000 == 0:
                log.write(f"step {step}: train loss 1.0, val loss {1.0 + step / 1e6:.4f}\n")
            if step == 333_333:
                log.write("Epoch [1/1] Step [333333/400000] Loss: nan\n")
    report = diagnose_source(str(path))
    assert report.stats.sampling_stride > 1 and any("sampled" in n for n in report.stats.notes)
    assert max(report.stats.series_lengths.values()) <= 20_000
    assert report.stats.series_lengths["val_loss"] == 20
    diverged = next(f for f in report.findings if f.kind == "diverged")
    # 333,333 loss lines and 16 val lines come before the nan line
    assert diverged.evidence["first_non_finite"]["line"] == 333_333 + 333_333 // 20_000 + 1


@pytest.mark.parametrize("head, block", [(7, 13), (64, 100), (1000, 5000)])
@pytest.mark.parametrize("size_hint", [None, 5_000_000])
def test_block_boundaries_never_lose_or_misnumber_a_line(monkeypatch, head, block, size_hint):
    """Tiny blocks cut lines everywhere; a size hint forces sampling. Must-read lines and numbering hold."""
    import random

    from advisor.diagnose import scan

    rng = random.Random(1)
    lines = []
    for i in range(5000):
        r = rng.random()
        if r < 0.01:
            lines.append(f"step {i}: train loss 1.0, val loss {i / 1000:.3f}")
        elif r < 0.012:
            lines.append("RuntimeError: CUDA error: out of memory")
        elif r < 0.02:
            lines.append("x" * rng.randint(0, 300))
        else:
            lines.append(f"Epoch [1/1] Step [{i}/5000] Loss: {1 / (i + 1):.5f}")
    monkeypatch.setattr(scan, "HEAD_BYTES", head)
    monkeypatch.setattr(scan, "BLOCK_BYTES", block)
    scanner = scan.Scanner()
    scanner.scan_stream(io.BytesIO("\n".join(lines).encode()), size_hint)
    collected = scanner.collected
    assert collected.stats.lines == 5000
    assert {p.line: p.value for p in collected.series["val_loss"]} == {
        n + 1: float(l.split("val loss ")[1]) for n, l in enumerate(lines) if "val loss" in l}
    assert [e.line for e in collected.events if e.kind == "oom"] == [
        n + 1 for n, l in enumerate(lines) if "out of memory" in l][:50]
    for point in collected.series["train_loss"]:
        text = lines[point.line - 1]
        expected = 1 / (int(text.split("Step [")[1].split("/")[0]) + 1) if "Step [" in text else 1.0
        assert point.value == pytest.approx(expected, abs=1e-5)


def test_every_reader_reads_real_output_in_the_corpus():
    from advisor.diagnose.readers import known_formats

    seen = {}
    for name in LABELS:
        for fmt, count in diagnose_source(str(CORPUS / "logs" / name)).stats.formats.items():
            seen[fmt] = seen.get(fmt, 0) + count
    # darknet's console log: a real one committed in a public repository, in the world corpus (batch 7).
    # And a Keras History saved as JSON, committed in a public repository (world corpus batch 7).
    for world in (CORPUS / "world" / "gh-darknet-yolov3" / "train.log",
                  CORPUS / "world" / "gh-keras-fruits-history" / "history.json"):
        for fmt, count in diagnose_source(str(world)).stats.formats.items():
            seen[fmt] = seen.get(fmt, 0) + count
    # Event files and JSON-lines metric files are read from what the real libraries write, in test_diagnose_files.py.
    whole_files = {"tensorboard", "metrics-jsonl"}
    assert set(known_formats()) - whole_files <= set(seen), set(known_formats()) - whole_files - set(seen)
    deepspeed = read_source(open(CORPUS / "logs" / "deepspeed_healthy.log", "rb"), "ds")
    assert [p.value for p in deepspeed.series["lr"]][:2] == [0.003, 0.003]
    assert deepspeed.series["lr"][0].step == 20
