#!/usr/bin/env bash
# Validation and baselines of KernelBench levels 1 and 2 on this host's GPUs, one shard per GPU
# (issue 4's run on an H200 host). Called by scripts/gpu_check.sh curation; alone:
#
#   scripts/gpu_curation.sh KERNELBENCH_FOLDER OUT_FOLDER
#
# The site is a throwaway SQLite database. A database carried from an earlier run
# (CURATION_DB=path) is started from, and only what it lacks is done (--missing-only), so a run
# cut short by the device's time limit resumes where it stopped. The database comes back as
# OUT_FOLDER/curation.sqlite3. CURATION_MODES picks the baselines (default: eager); with compile,
# each shard builds COMPILE_AHEAD (default 4) problems' graphs at a time before timing them.
set -uo pipefail
cd "$(dirname "$0")/.."
KB=${1:?the KernelBench folder}
OUT=${2:?a folder for the results}
VAR=$(mktemp -d)
export SECRET_KEY=${SECRET_KEY:-$(python3 -c 'import secrets; print(secrets.token_urlsafe(50))')}
export KBSITE_VAR_DIR=$VAR DJANGO_SETTINGS_MODULE=kbsite.settings LOG_LEVEL=WARNING PYTHONUNBUFFERED=1
export BUILD_CACHE_DIR=${BUILD_CACHE_DIR:-/tmp/kb-builds}
[ -n "${CURATION_DB:-}" ] && cp "$CURATION_DB" "$VAR/db.sqlite3"
# Whatever happens below, the database comes back.
trap 'cp "$VAR/db.sqlite3" "$OUT/curation.sqlite3"' EXIT

python3 manage.py migrate -v0 || exit 1
python3 manage.py import_kernelbench "$KB" --level 1 --level 2 || exit 1
# Registered once here, so that the shards below do not race to create it.
python3 -c '
import django; django.setup()
from evaluation.services import hardware_register
from gpu_runner.detect import detect
found = detect("h200"); found.pop("slug"); hardware_register(slug="h200", **found)' || exit 1

gpus=$(python3 -c 'import torch; print(max(1, torch.cuda.device_count()))')
each() {  # each GPU runs one shard of the command; their outputs go to $OUT/NAME-K.log
    local name=$1; shift
    local pids=()
    for ((k = 0; k < gpus; k++)); do
        CUDA_VISIBLE_DEVICES=$k "$@" --shard "$k/$gpus" >"$OUT/$name-$k.log" 2>&1 &
        pids+=($!)
    done
    for pid in "${pids[@]}"; do wait "$pid"; done
    cat "$OUT/$name"-*.log | grep -E "^(validated|measured|nothing)" || true
}

start=$(date +%s)
each validate timeout "${VALIDATE_TIMEOUT:-400}" python3 manage.py validate_problems \
    --hardware h200 --level 1 --level 2 --here --batch 25 --missing-only
echo "validation: $(($(date +%s) - start)) s on $gpus GPU(s)"
python3 manage.py validate_problems --hardware h200 --level 1 --level 2 --report \
    >"$OUT/validation_report.txt" 2>&1
grep -v ": passed" "$OUT/validation_report.txt" | head -80

start=$(date +%s)
each baselines timeout "${BASELINES_TIMEOUT:-400}" python3 manage.py baselines \
    --hardware h200 --level 1 --level 2 --modes "${CURATION_MODES:-eager}" \
    --include-unpublished --missing-only --compile-ahead "${COMPILE_AHEAD:-4}"
echo "baselines (${CURATION_MODES:-eager}): $(($(date +%s) - start)) s on $gpus GPU(s)"
