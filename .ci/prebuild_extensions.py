"""Build DeepSpeed's CPU comm op once per venv, at `make setup`, into the extension cache the tests use.

DeepSpeed JIT-builds it in the first process that initialises its CPU backend (~75 CPU-s cold on 2 cores);
built here, no test pays it inside its own timeouts. The folder is the venv's own (<venv>/torch_extensions,
tests/conftest.py sets the same), so checkouts with other venvs never share, or fight over, its build lock.
A build killed midway leaves its lock behind: the workers' stale-lock check (advisor/extensions.py) names it.
Skipped, with a line saying why, where DeepSpeed is not installed or a GPU is (its CUDA ops build elsewhere).
"""

import os
import sys
from pathlib import Path

os.environ.setdefault("TORCH_EXTENSIONS_DIR", str(Path(sys.prefix) / "torch_extensions"))
os.environ.setdefault("DS_ACCELERATOR", "cpu")
# The venv's ninja, as tests/conftest.py puts first for every test process: a build by another ninja version
# reads as "command line changed" to it (their .ninja_log hashes differ) and the op is compiled again.
_venv_bin = os.path.dirname(sys.executable)
if os.environ.get("PATH", "").split(os.pathsep)[0] != _venv_bin:
    os.environ["PATH"] = os.pathsep.join([_venv_bin, os.environ.get("PATH", "")])


def main() -> int:
    try:
        import torch

        if torch.cuda.is_available():
            print("prebuild: a GPU is present; DeepSpeed's CPU comm op is not needed")
            return 0
        from deepspeed.ops.op_builder.cpu import ShareMemCommBuilder
    except ImportError as exc:
        print(f"prebuild: skipped ({exc})")
        return 0
    ShareMemCommBuilder().load(verbose=False)
    print(f"prebuild: DeepSpeed's CPU comm op is built in {os.environ['TORCH_EXTENSIONS_DIR']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
