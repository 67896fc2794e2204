#!/usr/bin/env bash
# GPU smoke check (under 5 minutes on one GPU): the CUDA paths that a CPU-only CI cannot run.
#
#   bash bench/gpu_smoke.sh            # from the repository root, in an env with a CUDA torch and the project
#
# 1. A ceiling probe on cuda:0 under a budget far smaller than the card: the budget is enforced by
#    set_per_process_memory_fraction (a real CUDA OOM past it) and the peak comes from
#    torch.cuda.max_memory_allocated. The script checks every probe that fitted peaked under the budget,
#    and that the search met a real OOM.
# 2. A short `advisor plan` on CUDA (NCCL, synchronised step times) with the same budget; the recipe's
#    per-device batch is checked against a plain loop on the GPU that must survive 50 steps under it.
# 3. A bf16 probe at one batch: its peak must be below the fp32 peak.
# Prints RESULT lines; exits non-zero on any failed check.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python}
BUDGET=${BUDGET:-512MiB}  # far below the card, above the model: the search must meet a real OOM
NPROC=${NPROC:-1}
OUT=${OUT_DIR:-$(mktemp -d)}
export PYTHONUNBUFFERED=1

$PY - <<'EOF'
import torch, sys
if not torch.cuda.is_available():
    sys.exit("gpu_smoke: torch sees no CUDA GPU here (torch.cuda.is_available() is False)")
p = torch.cuda.get_device_properties(0)
print(f"RESULT gpu name={p.name!r} memory_gib={p.total_memory / 2**30:.1f} torch={torch.__version__} "
      f"bf16={torch.cuda.is_bf16_supported()}")
EOF

echo "== 1+2. plan on CUDA with a ${BUDGET} budget (workload synthetic-bn-cnn)"
timeout 240 $PY -m advisor.cli plan --workload synthetic-bn-cnn --device cuda --nproc "$NPROC" \
    --device-memory "$BUDGET" --trial-steps 8 --sweep-steps 30 --out "$OUT/smoke.toml" --force --json \
    > "$OUT/plan.json"

$PY - "$OUT/smoke.toml" "$BUDGET" <<'EOF'
import sys
import advisor
from advisor.units import parse_size

recipe = advisor.load_recipe(sys.argv[1])
budget = parse_size(sys.argv[2])
ledger = recipe.data["ledger"]
probes = [r for r in ledger if r["phase"] == "ceiling"]
ok = [r for r in probes if r["status"] == "ok"]
over = [r for r in ok if r["peak_bytes"] > budget]
print(f"RESULT ceiling per_device_max={recipe.data['ceiling']['per_device_max']} probes={len(probes)} "
      f"ooms={len(probes) - len(ok)} max_peak_mib={max(r['peak_bytes'] for r in ok) / 2**20:.0f} "
      f"budget_mib={budget / 2**20:.0f} measured_by={recipe.data['ceiling'].get('measured_by')!r}")
assert recipe.data["ceiling"].get("measured_by") == "torch.cuda.max_memory_allocated", "CUDA peak not used"
assert not over, f"probes peaked over the budget: {over}"
assert len(ok) < len(probes), "no real CUDA OOM was met under the budget"
trial = [r for r in ledger if r["phase"] == "trial" and r["status"] == "ok"]
print("RESULT trial " + " ".join(f"{r['per_device']}:{r['throughput']:.0f}/s,{r['step_seconds'] * 1e3:.1f}ms"
                                 for r in trial))
print(f"RESULT recipe per_device={recipe.batch.per_device} world={recipe.batch.world_size} "
      f"acc={recipe.batch.accumulation_steps} lr={recipe.lr.value:.4g} precision={recipe.precision}")
EOF

echo "== 2b. the advised batch in a plain loop on the GPU under the same budget, 50 steps"
$PY - "$OUT/smoke.toml" "$BUDGET" <<'EOF'
import sys
import torch
import advisor
from advisor.units import parse_size
from advisor.workload import resolve_workload

recipe = advisor.load_recipe(sys.argv[1])
recipe.apply_env()  # train as the recipe says (its [launch.env]; empty on CUDA)
budget = parse_size(sys.argv[2])
w = resolve_workload("synthetic-bn-cnn")
torch.cuda.set_per_process_memory_fraction(budget / torch.cuda.get_device_properties(0).total_memory, 0)
model = w.build_model().cuda()
opt = w.make_optimizer(model.parameters(), recipe.lr.value)
x, y = w.train_data.tensors
b = recipe.batch.per_device
torch.cuda.reset_peak_memory_stats()
for step in range(50):
    idx = torch.randint(0, len(x), (b,))
    loss = w.loss_fn(model(x[idx].cuda()), y[idx].cuda())
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
torch.cuda.synchronize()
peak = torch.cuda.max_memory_allocated()
print(f"RESULT plain_loop batch={b} steps=50 peak_mib={peak / 2**20:.0f} budget_mib={budget / 2**20:.0f}")
assert peak <= budget
EOF

echo "== 3. bf16 vs fp32 probe peak at one batch"
$PY - <<'EOF'
import json, os
from advisor.adapters import load_adapter
from advisor.job import TrialJob
from advisor.launch import run_job

ddp = load_adapter("ddp")
peaks = {}
for precision in ("fp32", "bf16"):
    job = TrialJob(kind="probe", workload="synthetic-bn-cnn", per_device_batch=256, steps=2, precision=precision,
                   device="cuda", memory_budget_bytes=8 * 2**30, workdir=os.getcwd())
    peaks[precision] = run_job(ddp.command, job, 1, 180, env=ddp.environment("cuda")).first("probe")["peak_bytes"]
print(f"RESULT bf16_probe fp32_mib={peaks['fp32'] / 2**20:.1f} bf16_mib={peaks['bf16'] / 2**20:.1f}")
assert peaks["bf16"] < peaks["fp32"]
EOF
echo "gpu_smoke: all checks passed ($OUT)"
