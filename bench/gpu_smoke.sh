#!/usr/bin/env bash
# GPU acceptance test (under 5 minutes on one GPU, no network): fails if a GPU item of engine v3 regressed.
#
#   bash bench/gpu_smoke.sh        # from the repository root, in an env with a CUDA torch and the project
#
# Every check below can fail (a `peak <= budget` check cannot: the memory fraction enforces it by itself):
#   probe  ddp / accelerate / deepspeed (ZeRO 0 and 2), fp32: a probe's peak within TOL of a plain loop's
#          max_memory_allocated at the same batch (the plain loop plus the flavour's own state: DDP's buckets
#          for ddp and accelerate, since Accelerate wraps DDP only with >1 process; ZeRO's flat fp32 copy);
#          the accelerate probe's peak >= DDP's bucket bytes above the bare loop; the precision it reports
#          is the one asked; bf16 and fp16 probes peak below fp32.
#   plan   a short `advisor plan` per adapter under BUDGET: it meets a real CUDA OOM, the recipe's
#          [ceiling] measured_by is max_memory_allocated and it records what the context/NCCL took off the
#          budget, the recipe's precision is the one that ran, and the advised ceiling survives 50 steps of
#          a plain loop under the same cap.
#   lamb   a DeepSpeed probe with --optimizer lamb (ZeRO stage 0) runs.
#   zero3  a model whose parameters exceed the capped budget gets a ceiling under ZeRO-3 (NPROC >= 8 GPUs:
#          per process ZeRO-3 holds 3/world of the fp32 model plus gathered layers; fewer GPUs: skipped).
# Prints one `RESULT gpu_smoke pass=N fail=M skip=K` line; exits 1 if any check failed.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python}
BUDGET=${BUDGET:-1GiB}   # far below the card: the searches must meet a real OOM
TOL=${TOL:-0.15}         # probe peak vs plain-loop peak, relative
NPROC=${NPROC:-1}
OUT=${OUT_DIR:-$(mktemp -d)}
export PYTHONUNBUFFERED=1 OUT BUDGET TOL NPROC

if ! $PY -c "import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
    echo "gpu_smoke: torch sees no CUDA GPU here (torch.cuda.is_available() is False, or torch is missing)." \
         "This is the GPU acceptance test: run it on a host with a GPU and a CUDA build of torch." >&2
    echo "RESULT gpu_smoke pass=0 fail=1 skip=0 reason=no-cuda"
    exit 1
fi
exec timeout 290 $PY bench/gpu_smoke_checks.py
