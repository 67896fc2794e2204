"""Write the reproduced logs: formats this machine cannot produce (GPU, NCCL, DeepSpeed fp16, DLLogger).

Run: python tests/corpus/generate/reproduced.py tests/corpus/logs
Every line follows the format printed in the public report named beside it (the numbers are ours; the
shape of each line, its prefixes and its wording are the framework's). The loss curves before the failure
are smooth synthetic decays: these logs test reading and naming the failure, not the curve detectors.
"""

import math
import os
import sys

OUT = sys.argv[1] if len(sys.argv) > 1 else "."


def loss_at(step, start=2.3, floor=0.4, tau=60.0, wiggle=0.03):
    return floor + (start - floor) * math.exp(-step / tau) + wiggle * math.sin(step * 1.7)


def write(name, lines):
    with open(os.path.join(OUT, name), "w") as log:
        log.write("\n".join(lines) + "\n")
    print("wrote", name)


def nccl_watchdog():
    # pytorch/pytorch#118369 (Lightning bar glued to the watchdog line), hiyouga/LlamaFactory#7396 ([rankN]:[E...]
    # ProcessGroupNCCL.cpp lines), XPixelGroup/BasicSR#737 (PG ID lines)
    lines = [f"Epoch 0:   {s // 3}%|██        | {s}/300 [00:{s // 10:02d}<01:00,  1.37it/s, loss={loss_at(s):.3g}, "
             f"v_num=95nc, reduced_train_loss={loss_at(s):.3f}, global_step={s}]" for s in range(1, 120)]
    lines[-1] += ("[E ProcessGroupNCCL.cpp:458] [Rank 0] Watchdog caught collective operation timeout: "
                  "WorkNCCL(SeqNum=96120, OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 1802212 milliseconds "
                  "before timing out.")
    for rank in (1, 2, 3):
        lines.append(f"[rank{rank}]:[E1206 18:44:12.715298746 ProcessGroupNCCL.cpp:607] [Rank {rank}] Watchdog "
                     "caught collective operation timeout: WorkNCCL(SeqNum=7753, OpType=ALLREDUCE, NumelIn=9801523, "
                     "NumelOut=9801523, Timeout(ms)=1800000) ran for 1802099 milliseconds before timing out.")
        lines.append(f"[rank{rank}]:[E1206 18:44:12.715588844 ProcessGroupNCCL.cpp:1664] [PG ID 0 PG GUID "
                     f"0(default_pg) Rank {rank}] Exception (either an error or timeout) detected by watchdog at work: "
                     "7753, last enqueued NCCL work: 7755, last completed NCCL work: 7752.")
    write("repro_nccl_watchdog_lightning.log", lines)


def illegal_memory_access():
    # pytorch/pytorch#34220, yewzijian/RegTR#33 (the asynchronous-report note that follows the error)
    lines = [f"Epoch [1/10] Step [{s}/500] Loss: {loss_at(s):.4f}" for s in range(1, 131)]
    lines += ["Traceback (most recent call last):",
              '  File "/home/user/project/train.py", line 34, in <module>',
              "    loss_tmp += float(model.get_current_losses())",
              "RuntimeError: CUDA error: an illegal memory access was encountered",
              "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below "
              "might be incorrect.",
              "For debugging consider passing CUDA_LAUNCH_BLOCKING=1."]
    write("repro_illegal_memory_access.log", lines)


def hf_gradnorm_nan():
    # AnswerDotAI/ModernBERT#233 and SY-Xuan/Pink#6: the loss prints 0.0 while grad_norm is nan; epoch rounded
    lines = [f"{{'loss': {loss_at(s, 0.9, 0.2):.4f}, 'grad_norm': {3.0 + math.sin(s):.4f}, 'learning_rate': "
             f"{1e-5 * (1 - s / 1000):.6e}, 'epoch': {round(0.5 + s / 1000, 2)}}}" for s in range(1, 31)]
    lines += [f"{{'loss': 0.0, 'grad_norm': nan, 'learning_rate': {1e-5 * (1 - s / 1000):.6e}, 'epoch': "
              f"{round(0.5 + s / 1000, 2)}}}" for s in range(31, 45)]
    write("repro_hf_gradnorm_nan.log", lines)


def deepspeed_overflow_cascade():
    # DeepSpeed fp16 loss scaler (runtime/fp16/loss_scaler.py): five overflows in a row, scale 64 -> 2
    lines = [f"[2026-11-30 05:00:{s % 60:02d},000] [INFO] [logging.py:96:log_dist] [Rank 0] step={s}, skipped=0, "
             f"lr=[0.0001], mom=[(0.9, 0.999)]" for s in range(10, 200, 10)]
    scale = 64
    for i in range(5):
        lines.append(f"[2026-11-30 05:01:{i:02d},000] [INFO] [loss_scaler.py:183:update_scale] [deepspeed] OVERFLOW! "
                     f"Rank 0 Skipping step. Attempted loss scale: {scale}, reducing to {scale // 2}")
        scale //= 2
    write("repro_deepspeed_overflow_64_to_2.log", lines)


def nanogpt_timestamp_nan():
    # the issue's own example: a timestamp before nanoGPT's "iter N: loss X" line
    lines = [f"2023-03-22 09:{30 + s // 600:02d}:{(s // 10) % 60:02d} iter {s}: loss {loss_at(s / 10, 4.2, 2.9):.4f}, "
             f"time 312.50ms, mfu 38.12%" for s in range(2500, 3010, 10)]
    lines += [f"2023-03-22 09:32:{52 + i} iter {3010 + 10 * i}: loss nan, time 311.90ms, mfu 38.20%" for i in range(3)]
    write("repro_nanogpt_timestamp_nan.log", lines)


def dllogger_nan():
    # NVIDIA DeepLearningExamples (BERT pretraining, dllogger StdOutBackend)
    lines = ["DLL 2023-03-22 09:00:00.000000 - PARAMETER batch_size : 8192  learning_rate : 0.006  "
             "loss_scale : 0  fp16 : True"]
    for s in range(1, 61):
        value = f"{loss_at(s, 11.0, 6.5, 30):.4f}" if s < 55 else "nan"
        lines.append(f"DLL 2023-03-22 09:{s // 60:02d}:{s % 60:02d}.123456 - Training Epoch: 0 Training Iteration: {s}  "
                     f"average_loss : {value}  step_loss : {value}  learning_rate : 0.006")
    write("repro_dllogger_nan.log", lines)


def megatron_scale_floor():
    # bigscience-workshop/Megatron-DeepSpeed#396: loss scale at 1.0 with grad norm nan, step after step
    lines = []
    for s in range(5400, 5430):
        scale, norm = (f"{2 ** max(0, 5420 - s):.1f}", "nan") if s >= 5414 else ("65536.0", f"{0.9 + 0.1 * math.sin(s):.3f}")
        lines.append(f" iteration     {s}/  250000 | consumed samples:        {s * 8} | elapsed time per iteration (ms): "
                     f"4247.9 | learning rate: 2.999E-04 | global batch size:     8 | loss scale: {scale} | grad norm: "
                     f"{norm} | actual seqlen:  2048 | number of skipped iterations:   {int(s >= 5414)} | number of nan "
                     "iterations:   0 | samples per second: 1.886 | TFLOPs: 78.46 |")
    write("repro_megatron_scale_floor.log", lines)


def mmengine_transient_nan():
    # InternLM/xtuner#187 / JiaquanYe/TableMASTER-mmocr#32 format; one non-finite grad norm from fp16 loss
    # scaling, then training goes on (the maintainer: normal under mixed precision) - a trap
    lines = []
    for i, s in enumerate(range(10, 1210, 10)):
        norm = "nan" if s == 240 else f"{3.0 - i / 100:.4f}"
        lines.append(f"10/30 22:{18 + i // 60:02d}:{(i * 29) % 60:02d} - mmengine - INFO - Epoch(train) [1][{s}/1200]  "
                     f"lr: 1.9870e-04  eta: 2:46:39  time: 2.8906  data_time: 0.0042  memory: 10762  loss: "
                     f"{loss_at(s / 10, 2.8, 1.2, 40):.4f}  grad_norm: {norm}")
    write("repro_mmengine_transient_nan.log", lines)


if __name__ == "__main__":
    os.makedirs(OUT, exist_ok=True)
    for make in (nccl_watchdog, illegal_memory_access, hf_gradnorm_nan, deepspeed_overflow_cascade,
                 nanogpt_timestamp_nan, dllogger_nan, megatron_scale_floor, mmengine_transient_nan):
        make()
