"""The optimizers training actually runs, by name; LAMB and LARS for real, no stand-ins.

``build_optimizer`` returns the optimizer together with the implementation that runs, so the
recipe can say which one the advisor measured. LAMB is DeepSpeed's rule (FusedLamb, which is
CUDA-only): written out here so CPU runs, DDP and Accelerate apply the same update DeepSpeed's
config ``"Lamb"`` applies on a GPU. LARS comes from pytorch-optimizer (DeepSpeed has none).
torch is imported inside the functions: listing names stays light.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .method.lr import LAYERWISE_OPTIMIZERS

# The defaults of deepspeed.ops.lamb.FusedLamb; an export's "Lamb" block spells them out.
LAMB_DEFAULTS = {"betas": (0.9, 0.999), "eps": 1e-8, "bias_correction": True, "max_coeff": 10.0, "min_coeff": 0.01}
LARS_TRUST_COEFFICIENT = 1e-3  # You et al. 2017's eta
# Layer-wise adaptive optimizers: their trust ratio is computed per parameter tensor, so they must see whole
# tensors (no flattened or partitioned fp32 copies).
LAYERWISE = LAYERWISE_OPTIMIZERS
ADAM_DEFAULTS = {"betas": (0.9, 0.999), "eps": 1e-8}  # torch.optim.Adam/AdamW's own
# The hyper-parameters each optimizer takes besides the LR (what a recipe and every export must carry).
HYPERPARAMETERS = {"sgd": ("momentum", "weight_decay"), "lars": ("momentum", "weight_decay"),
                   "adam": ("betas", "eps", "weight_decay"), "adamw": ("betas", "eps", "weight_decay"),
                   "lamb": ("betas", "eps", "weight_decay"), "adagrad": ("weight_decay",),
                   "rmsprop": ("weight_decay",)}


@dataclass(frozen=True)
class BuiltOptimizer:
    optimizer: object  # a torch.optim.Optimizer
    implementation: str  # e.g. "advisor.optimizers.Lamb (DeepSpeed FusedLamb rule)", "torch.optim.SGD"


def unavailable_reason(name: str) -> str | None:
    """Why ``name`` cannot run in this environment (a missing package), or None."""
    if name.lower() == "lars":
        try:
            import pytorch_optimizer  # noqa: F401
        except ImportError:
            return ("the optimizer 'lars' needs the pytorch-optimizer package: "
                    "pip install 'batch-advisor[large-batch]' (or pytorch-optimizer)")
    return None


def _lamb_class():
    import torch

    class Lamb(torch.optim.Optimizer):
        """LAMB exactly as DeepSpeed's FusedLamb kernel computes it (csrc/lamb/fused_lamb_cuda_kernel.cu).

        Per parameter tensor, at step t:
          m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2
          u = m / (sqrt(v) + eps) + weight_decay * w          (eps inside the root with eps_inside_sqrt)
          coeff = clamp(|w| / |u|, min_coeff, max_coeff), 1 when either norm is 0
          w -= lr * sqrt(1 - b2^t) / (1 - b1^t) * coeff * u  (lr alone without bias_correction)
        The bias correction sits in the step size, not in the trust ratio: that is DeepSpeed's rule, which
        differs from the paper's (and from pytorch-optimizer's Lamb) in the first few hundred steps.
        """

        def __init__(self, params, lr=1e-3, betas=LAMB_DEFAULTS["betas"], eps=LAMB_DEFAULTS["eps"],
                     weight_decay=0.0, bias_correction=True, max_coeff=LAMB_DEFAULTS["max_coeff"],
                     min_coeff=LAMB_DEFAULTS["min_coeff"], eps_inside_sqrt=False):
            if not lr > 0:
                raise ValueError(f"LAMB needs a positive learning rate, not {lr}")
            if not 0 < min_coeff <= max_coeff:
                raise ValueError(f"LAMB needs 0 < min_coeff <= max_coeff, not {min_coeff}, {max_coeff}")
            defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                            bias_correction=bias_correction, max_coeff=max_coeff, min_coeff=min_coeff)
            super().__init__(params, defaults)
            self.eps_inside_sqrt = eps_inside_sqrt
            self.lamb_coeffs: list[float] = []

        @torch.no_grad()
        def step(self, closure=None):
            loss = None
            if closure is not None:
                with torch.enable_grad():
                    loss = closure()
            self.lamb_coeffs = []
            for group in self.param_groups:
                beta1, beta2 = group["betas"]
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    if p.grad.is_sparse:
                        raise RuntimeError("LAMB does not support sparse gradients")
                    grad = p.grad.float()
                    state = self.state[p]
                    if not state:
                        state["step"] = 0
                        state["exp_avg"] = torch.zeros_like(p, dtype=torch.float32)
                        state["exp_avg_sq"] = torch.zeros_like(p, dtype=torch.float32)
                    state["step"] += 1
                    t = state["step"]
                    exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
                    exp_avg.mul_(beta1).add_(grad, alpha=1 - beta1)
                    exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
                    weight = p.float()
                    if self.eps_inside_sqrt:
                        denom = (exp_avg_sq + group["eps"]).sqrt_()
                    else:
                        denom = exp_avg_sq.sqrt().add_(group["eps"])
                    update = exp_avg / denom
                    if group["weight_decay"]:
                        update.add_(weight, alpha=group["weight_decay"])
                    w_norm, u_norm = float(weight.norm()), float(update.norm())
                    coeff = 1.0
                    if w_norm != 0 and u_norm != 0:
                        coeff = min(max(w_norm / u_norm, group["min_coeff"]), group["max_coeff"])
                    self.lamb_coeffs.append(coeff)
                    step_size = group["lr"]
                    if group["bias_correction"]:
                        step_size *= math.sqrt(1 - beta2 ** t) / (1 - beta1 ** t)
                    p.copy_(weight.sub_(update, alpha=step_size * coeff))
            return loss

    return Lamb


_LAMB = None


def Lamb(params, **kwargs):
    """A DeepSpeed-rule LAMB optimizer (see ``_lamb_class``); built lazily so importing this module needs no torch."""
    global _LAMB
    if _LAMB is None:
        _LAMB = _lamb_class()
    return _LAMB(params, **kwargs)


def preload(name: str) -> None:
    """Build ``name`` once on a one-element tensor. A worker does this before its memory budget applies: the
    first optimizer imports torch._dynamo (~70 MiB of host memory) and, for LARS, pytorch-optimizer; none of
    that is training memory, and under a small budget the import itself failed."""
    import torch

    if unavailable_reason(name) is None:
        build_optimizer(name, [torch.zeros(1, requires_grad=True)], lr=1e-3)


def hyperparameters(name: str, momentum: float = 0.9, weight_decay: float = 0.0,
                    betas: tuple[float, float] = ADAM_DEFAULTS["betas"], eps: float = ADAM_DEFAULTS["eps"]) -> dict:
    """The hyper-parameters (besides the LR) that the optimizer ``name`` takes, with these values: what
    ``build_optimizer``, the recipe and every export use, so none of them drops one."""
    given = {"momentum": float(momentum), "weight_decay": float(weight_decay),
             "betas": [float(b) for b in betas], "eps": float(eps)}
    return {key: given[key] for key in HYPERPARAMETERS.get(name.lower(), ("weight_decay",))}


def build_optimizer(name: str, params, lr: float, momentum: float = 0.9, weight_decay: float = 0.0,
                    betas: tuple[float, float] = ADAM_DEFAULTS["betas"],
                    eps: float = ADAM_DEFAULTS["eps"]) -> BuiltOptimizer:
    """The optimizer called ``name``, as the user's training runs it."""
    import torch

    name = name.lower()
    if name == "sgd":
        return BuiltOptimizer(torch.optim.SGD(params, lr=lr, momentum=momentum, weight_decay=weight_decay),
                              "torch.optim.SGD")
    if name == "adam":
        return BuiltOptimizer(torch.optim.Adam(params, lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay),
                              "torch.optim.Adam")
    if name == "adamw":
        return BuiltOptimizer(torch.optim.AdamW(params, lr=lr, betas=tuple(betas), eps=eps,
                                                weight_decay=weight_decay), "torch.optim.AdamW")
    if name == "adagrad":
        return BuiltOptimizer(torch.optim.Adagrad(params, lr=lr, weight_decay=weight_decay), "torch.optim.Adagrad")
    if name == "rmsprop":
        return BuiltOptimizer(torch.optim.RMSprop(params, lr=lr, weight_decay=weight_decay), "torch.optim.RMSprop")
    if name == "lamb":
        return BuiltOptimizer(Lamb(params, lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay),
                              "advisor.optimizers.Lamb (DeepSpeed FusedLamb rule: trust ratio clamped to "
                              f"[{LAMB_DEFAULTS['min_coeff']}, {LAMB_DEFAULTS['max_coeff']}])")
    if name == "lars":
        why = unavailable_reason("lars")
        if why:
            raise ImportError(why)
        from importlib.metadata import version

        from pytorch_optimizer import LARS

        return BuiltOptimizer(LARS(params, lr=lr, momentum=momentum, weight_decay=weight_decay,
                                   trust_coefficient=LARS_TRUST_COEFFICIENT),
                              f"pytorch_optimizer.LARS {version('pytorch-optimizer')} "
                              f"(trust coefficient {LARS_TRUST_COEFFICIENT:g})")
    raise ValueError(f"unknown optimizer {name!r}")
