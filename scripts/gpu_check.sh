#!/usr/bin/env bash
# Run xpgrad's GPU checks on a Linux machine with an NVIDIA GPU and a CUDA 12 driver:
#   1. a fresh virtual environment with xpgrad[cupy,test,demo] and a CUDA build of torch;
#   2. the test suite with the CuPy backend and torch on CUDA (XPGRAD_BACKENDS=cupy,torch_cuda);
#   3. scripts/gpu_smoke.py: gradients on CuPy and on torch-CUDA against NumPy, the
#      policy's device selection (GPU 0 and 1 where there are two), Module.to(device=...)
#      on torch, and the demo trained on CuPy.
# Usage, from anywhere:  bash scripts/gpu_check.sh
# Environment: PYTHON (default python3), VENV (default .venv-gpu),
#   TORCH_INDEX: a PyTorch wheel index for a specific CUDA version, e.g.
#   https://download.pytorch.org/whl/cu126 (default: PyPI, whose Linux x86-64 torch
#   wheels are CUDA builds), PYTEST_ARGS (extra pytest arguments, e.g. "-x" or "-n 8"),
#   JUNIT (the suite's JUnit XML file, default gpu-check.xml; summarized per backend by
#   scripts/junit_summary.py at the end, every failure on one line).
# The CuPy extra follows the driver: xpgrad[cupy13] (cupy-cuda13x) where nvidia-smi reports
# CUDA 13 or newer, xpgrad[cupy] (cupy-cuda12x) otherwise.
#
# On a machine without network access that already has CUDA builds of torch and CuPy
# (any CUDA version) and pytest, hypothesis, pytest-xdist, scikit-learn:
#   NO_INSTALL=1 bash scripts/gpu_check.sh
# uses $PYTHON as it is and imports xpgrad from src/. WHEELS=DIR (with NO_INSTALL=1)
# first installs xpgrad's own dependencies from wheels in DIR, made on a machine with
# network by: pip download --no-deps -d DIR array-api-compat array-api-extra
# The log goes to gpu-check.log as well as the terminal. Exit status: non-zero if any step fails.
set -euo pipefail

cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
VENV=${VENV:-.venv-gpu}
JUNIT=${JUNIT:-gpu-check.xml}
# the torch CI tests (pyproject.toml's extra gives only a lower bound)
TORCH_VERSION=$(sed -n 's/^torch==\([0-9.]*\)$/\1/p' .ci/constraints.txt)
exec > >(tee gpu-check.log) 2>&1

echo "== machine"
date -u
nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv || echo "(nvidia-smi failed)"
"$PYTHON" --version

if [ -n "${NO_INSTALL:-}" ]; then
    echo "== environment: $PYTHON as it is, xpgrad from src/"
    PY="$PYTHON"
    export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
    if [ -n "${WHEELS:-}" ]; then
        "$PY" -m pip install --quiet --no-index --find-links "$WHEELS" array-api-compat array-api-extra
    fi
else
    echo "== environment ($VENV)"
    "$PYTHON" -m venv "$VENV"
    PY="$VENV/bin/python"
    "$PY" -m pip install --quiet --upgrade pip
    if [ -n "${TORCH_INDEX:-}" ]; then
        "$PY" -m pip install --quiet "torch==${TORCH_VERSION}" --index-url "$TORCH_INDEX"
    else
        "$PY" -m pip install --quiet "torch==${TORCH_VERSION}"
    fi
    # torch is already there (a CUDA build of CI's version, which the constraints
    # accept); everything else at CI's versions too
    CUPY_EXTRA=cupy
    if nvidia-smi 2>/dev/null | grep -Eq 'CUDA Version: *(1[3-9]|[2-9][0-9])'; then CUPY_EXTRA=cupy13; fi
    "$PY" -m pip install --quiet -c .ci/constraints.txt -e ".[$CUPY_EXTRA,torch,test,demo]"
fi
"$PY" - <<'EOF'
import cupy, torch, xpgrad
print(f"xpgrad {xpgrad.__version__} from {xpgrad.__file__}")
n = cupy.cuda.runtime.getDeviceCount()
print(f"cupy {cupy.__version__}: {n} GPU(s), CUDA runtime {cupy.cuda.runtime.runtimeGetVersion()}")
print(f"torch {torch.__version__}: cuda available {torch.cuda.is_available()}, {torch.cuda.device_count()} GPU(s)")
if n < 1 or not torch.cuda.is_available():
    raise SystemExit("no usable GPU for cupy and torch: stopping")
EOF

status=0
echo "== test suite on cupy and on torch-CUDA"
XPGRAD_BACKENDS=cupy,torch_cuda "$PY" -m pytest tests -q -p no:cacheprovider --tb=line --junitxml "$JUNIT" ${PYTEST_ARGS:-} || status=1

echo "== summary of $JUNIT"
"$PY" scripts/junit_summary.py "$JUNIT" || status=1

echo "== smoke checks: cupy, torch-cuda, demo"
"$PY" scripts/gpu_smoke.py || status=1

echo "== done (status $status); log in gpu-check.log"
exit $status
