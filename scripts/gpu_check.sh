#!/usr/bin/env bash
# The GPU checks in one command, on a CUDA host whose python3 has torch and triton but not
# Django (the lent H200: Python 3.12, torch 2.11, triton 3.6). Run from the repository root:
#
#   scripts/gpu_check.sh [SECTION ...]     sections: harness exploits tests runner (default: all)
#
# Needs, next to the code: .whl/ (scripts/fetch_gpu_wheels.sh) and .kernelbench/ (a copy of the
# KernelBench problem folder). Writes logs to $OUT when set (the device tool's output folder).
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1 LITELLM_LOCAL_MODEL_COST_MAP=True
OUT=${OUT:-$(mktemp -d)}
KB=${KERNELBENCH:-.kernelbench}
sections=${*:-harness exploits tests runner}

if [ -d .whl ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .whl/*.whl || exit 1
    export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
python3 -c 'import torch, triton; print("torch", torch.__version__, "cuda", torch.version.cuda, "triton", triton.__version__, "gpus", torch.cuda.device_count())'

status=0
for section in $sections; do
    echo; echo "=== $section ==="
    case $section in
        harness) python3 scripts/gpu_check.py --problems "$KB" 2>&1 | tee "$OUT/harness.log" ;;
        exploits) python3 scripts/gpu_check.py --problems "$KB" --only exploits 2>&1 | tee "$OUT/exploits.log" ;;
        tests) python3 -m pytest -q -m gpu -p no:cacheprovider tests 2>&1 | tail -40 | tee "$OUT/tests.log" ;;
        runner) python3 scripts/runner_check.py --kernelbench "$KB" 2>&1 | tee "$OUT/runner.log" ;;
        *) echo "unknown section $section"; status=2 ;;
    esac
    [ "${PIPESTATUS[0]}" = 0 ] || status=1
done
exit $status
