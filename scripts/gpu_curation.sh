#!/usr/bin/env bash
# Validation and baselines of KernelBench levels (default 1 and 2) on this host's GPUs, one shard
# per GPU (issue 4's run on an H200 host; level 3: issue 21). Called by scripts/gpu_check.sh
# curation; alone:
#
#   scripts/gpu_curation.sh KERNELBENCH_FOLDER OUT_FOLDER
#
# The site is a throwaway SQLite database. A database carried from an earlier run
# (CURATION_DB=path) or a curation file (CURATION_FROM=path: `manage.py curation_export`'s JSON,
# imported after the problems) is started from, and only what it lacks is done (--missing-only),
# so a run cut short by the device's time limit resumes where it stopped. The database comes back
# as OUT_FOLDER/curation.sqlite3 (also when a step's timeout stopped it; a consistent copy is also
# made there every SNAPSHOT_EVERY seconds, default 60, so a killed run loses at most that), and
# the selected levels' curation as OUT_FOLDER/curation.json when the script ends (from a
# snapshot: `manage.py curation_export` run against it).
#
# Environment:
#   CURATION_LEVELS    the levels, space- or comma-separated (default "1 2"), for the import, the
#                      validation and the baselines
#   CURATION_STEPS     which steps run: validate and/or baselines (default both), to split a long
#                      run over several calls
#   CURATION_MODES     the baselines: eager, compile or eager,compile (default eager); with
#                      compile, each shard builds COMPILE_AHEAD (default 4; 0: off) problems'
#                      graphs at a time, then times them, in rounds of twice that many, each
#                      round's baselines stored before the next (a step cut short keeps them)
#   VALIDATE_BATCH, BASELINES_BATCH   problems per sandboxed process (default 25 and 10); what a
#                      batch has not finished when its step's timeout ends it is lost, so use
#                      small batches where each problem is slow (level 3)
#   VALIDATE_TIMEOUT, BASELINES_TIMEOUT   seconds per step (default 400 each)
#   BUILD_CACHE_DIR    the build cache (default /tmp/kb-builds): compiled graphs kept there are
#                      found again by a later run on the same host
set -uo pipefail
cd "$(dirname "$0")/.."
KB=${1:?the KernelBench folder}
OUT=${2:?a folder for the results}
VAR=$(mktemp -d)
export SECRET_KEY=${SECRET_KEY:-$(python3 -c 'import secrets; print(secrets.token_urlsafe(50))')}
export KBSITE_VAR_DIR=$VAR DJANGO_SETTINGS_MODULE=kbsite.settings LOG_LEVEL=WARNING PYTHONUNBUFFERED=1
export BUILD_CACHE_DIR=${BUILD_CACHE_DIR:-/tmp/kb-builds}
LEVELS=${CURATION_LEVELS:-1 2}
LEVELS=${LEVELS//,/ }
STEPS=${CURATION_STEPS:-validate baselines}
STEPS=${STEPS//,/ }
MODES=${CURATION_MODES:-eager}
MODES=${MODES// /,}
levels=()
for level in $LEVELS; do
    case $level in
        [1-4]) levels+=(--level "$level") ;;
        *) echo "CURATION_LEVELS: not a level: $level"; exit 2 ;;
    esac
done
for step in $STEPS; do
    case $step in
        validate|baselines) ;;
        *) echo "CURATION_STEPS: not a step: $step (validate, baselines)"; exit 2 ;;
    esac
done
echo "curation: levels $LEVELS; steps $STEPS; baselines $MODES${CURATION_DB:+; from $CURATION_DB}\
${CURATION_FROM:+; from $CURATION_FROM}"
# (writable whatever the carried file's mode: files that came back from a device run are read-only)
[ -n "${CURATION_DB:-}" ] && cp "$CURATION_DB" "$VAR/db.sqlite3" && chmod u+w "$VAR/db.sqlite3"
# Whatever happens below, the database comes back; while it runs, a consistent copy of it every
# minute (SQLite's backup), so that a run detached and waited for (gpu_check.sh --detach/--wait)
# returns what it has stored so far.
snapshot() {
    [ -f "$VAR/db.sqlite3" ] || return 0
    rm -f "$OUT/curation.sqlite3.part"
    python3 -c 'import sqlite3, sys
source, copy = sqlite3.connect(sys.argv[1]), sqlite3.connect(sys.argv[2])
source.backup(copy)
copy.close()' "$VAR/db.sqlite3" "$OUT/curation.sqlite3.part" \
        && mv "$OUT/curation.sqlite3.part" "$OUT/curation.sqlite3"
}
# Its output goes to a file of its own (not the caller's pipe, which it would hold open), and it
# stops when this script is gone, however it went.
(while sleep "${SNAPSHOT_EVERY:-60}" && kill -0 $$ 2>/dev/null; do snapshot; done) \
    >>"$OUT/snapshots.log" 2>&1 </dev/null &
snapshots=$!
trap 'kill $snapshots 2>/dev/null; wait $snapshots 2>/dev/null
      snapshot || cp "$VAR/db.sqlite3" "$OUT/curation.sqlite3"
      python3 manage.py curation_export --hardware h200 "${levels[@]}" \
          --output "$OUT/curation.json" >/dev/null 2>&1 || true' EXIT

python3 manage.py migrate -v0 || exit 1
python3 manage.py import_kernelbench "$KB" "${levels[@]}" || exit 1
if [ -n "${CURATION_FROM:-}" ]; then
    python3 manage.py curation_import "$CURATION_FROM" || exit 1
fi
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
    cat "$OUT/$name"-*.log | grep -E "^(validated|measured|nothing|compiled ahead)" || true
}

if [[ " $STEPS " == *" validate "* ]]; then
    start=$(date +%s)
    each validate timeout "${VALIDATE_TIMEOUT:-400}" python3 manage.py validate_problems \
        --hardware h200 "${levels[@]}" --here --batch "${VALIDATE_BATCH:-25}" --missing-only
    echo "validation: $(($(date +%s) - start)) s on $gpus GPU(s)"
fi
# The report covers every selected problem, validated in this run or an earlier one.
python3 manage.py validate_problems --hardware h200 "${levels[@]}" --report \
    >"$OUT/validation_report.txt" 2>&1
grep -v ": passed" "$OUT/validation_report.txt" | head -80

if [[ " $STEPS " == *" baselines "* ]]; then
    start=$(date +%s)
    each baselines timeout "${BASELINES_TIMEOUT:-400}" python3 manage.py baselines \
        --hardware h200 "${levels[@]}" --modes "$MODES" --batch "${BASELINES_BATCH:-10}" \
        --include-unpublished --missing-only --compile-ahead "${COMPILE_AHEAD:-4}"
    echo "baselines ($MODES): $(($(date +%s) - start)) s on $gpus GPU(s)"
fi
# What the database holds now for the selected levels (this run and the ones before it): the
# figures for the note.
LEVELS=$LEVELS python3 -c '
import os
from collections import Counter

import django

django.setup()
from problems.models import Baseline, Problem, Validation

for level in os.environ["LEVELS"].split():
    problems = Problem.objects.filter(level=int(level), current_version__isnull=False)
    versions = list(problems.values_list("current_version_id", flat=True))
    latest = {}
    for version, status in Validation.objects.filter(
            hardware__slug="h200", problem_version_id__in=versions).order_by("id").values_list(
            "problem_version_id", "status"):
        latest[version] = status
    measured = Baseline.objects.filter(hardware__slug="h200", source="measured",
                                       problem_version_id__in=versions)
    eager, compiled = (len(set(measured.filter(mode=m).values_list("problem_version_id",
                                                                   flat=True)))
                       for m in ("eager", "compile"))
    print(f"level {level}: {len(versions)} problems; validated {len(latest)} "
          f"{dict(Counter(latest.values()))}; baselines: eager {eager}, compile {compiled}")
' || true
