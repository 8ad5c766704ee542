#!/usr/bin/env bash
# The GPU checks in one command, on a CUDA host whose python3 has torch and triton but not
# Django (the lent H200: Python 3.12, torch 2.11, triton 3.6). Run from the repository root:
#
#   scripts/gpu_check.sh [SECTION ...]
#
# Sections: harness exploits tests runner sandbox (the default: all five), and the longer ones
# named alone: suites (the exploit and attack suites, parts side by side where they can be, and
# a table; SUITES_ONLY names the parts to run), starters (the CUDA, Triton and PyTorch starters through `kb check`, first and
# warm; STARTER_PROBLEMS), sharing (bench/gpu_sharing.py: evaluations per GPU-hour and warm
# latency with one evaluation per GPU and with several sharing it, and the timing proof), verdicts
# cpuexploits (the CPU exploit suite, tests/exploits, on this host), clock (bench/judge_clock.py:
# the judge's timing loop against the one before it, side by side; .bench-base holds the old
# `evaluation` package, CLOCK_REPEATS, CLOCK_ONLY), verdicts
# (scripts/gpu_check.py --only verdicts: our kernels of gpu_kernels/verdicts/,
# level-2 library GEMMs with a fused Triton epilogue, pure copy wrappers, a level-1 Triton matmul
# in TF32 and in IEEE fp32, a Triton kernel never launched, and the verdict, flags, notes,
# own-kernel share, speedup and TF32 hint each gets; issue 21), profile
# (scripts/profile_check.py), cost (bench/sandbox_cost.py: the sandbox's start-up and whole
# evaluations of 19_ReLU with it off and on, side by side), speed (bench/eval_speed.py, after and
# before; with two GPUs side by side, the before on GPU 1 while the sections named after it run on
# GPU 0; with one, the before of 19_ReLU alone after the after; SPEED_AFTER=0, BEFORE_ONLY and
# BEFORE_REPEATS narrow it), drain (40 level 1 evaluations on every GPU, then on GPU 0 alone),
# languages (scripts/languages_check.py: Helion, TileLang, CuTe DSL and cuTile through a real
# runner, right, wrong, never-launched and fallback kernels, first and warm; their wheels
# from scripts/fetch_language_wheels.sh in .lang/, LANGUAGES to narrow it),
# curation (scripts/gpu_curation.sh: validation and baselines, one shard per GPU; by default
# levels 1 and 2, eager; the site's database comes back as $OUT/curation.sqlite3 and
# CURATION_DB=that file resumes from it, its curation as $OUT/curation.json and
# CURATION_FROM=such a file, e.g. data/curation/h200.json, resumes from that). Its environment
# (the script's header lists it all):
# CURATION_LEVELS, CURATION_MODES, CURATION_STEPS (validate, baselines), VALIDATE_TIMEOUT,
# BASELINES_TIMEOUT, VALIDATE_BATCH, BASELINES_BATCH, COMPILE_AHEAD. Level 3, eager and compile:
#
#   CURATION_LEVELS=3 CURATION_MODES=eager,compile scripts/gpu_check.sh curation
#
# or split to fit a time limit, each call resuming from the last one's database, e.g.
#
#   CURATION_LEVELS=3 CURATION_STEPS=validate VALIDATE_BATCH=5 scripts/gpu_check.sh curation
#   CURATION_DB=curation.sqlite3 CURATION_LEVELS=3 CURATION_STEPS=baselines \
#       CURATION_MODES=eager,compile BASELINES_BATCH=1 scripts/gpu_check.sh curation
#
# or detached (below), with step timeouts longer than one command:
#
#   CURATION_DB=curation.sqlite3 CURATION_LEVELS=3 CURATION_STEPS=baselines \
#       CURATION_MODES=eager,compile BASELINES_BATCH=1 BASELINES_TIMEOUT=1500 \
#       scripts/gpu_check.sh --detach /tmp/kb-curation curation
#
# Needs, next to the code: .whl/ (scripts/fetch_gpu_wheels.sh) and .kernelbench/ (a copy of the
# KernelBench problem folder). Writes logs to $OUT when set (the device tool's output folder).
#
# A run longer than one command may last (sharing's two passes take about 13 minutes; with
# SHARING_MIX=real SHARING_COLD=1, its shared pass alone ran past 18 minutes on an H100) starts
# detached, in a process session of its own that outlives the command, and later commands on
# the same machine (while it is still held) wait for it:
#
#   scripts/gpu_check.sh --detach DIR SECTION ...   start; DIR is the run's $OUT
#   scripts/gpu_check.sh --wait DIR [SECONDS]       until it ends or SECONDS pass (default 570):
#                                                   DIR's files copied to $OUT, the log's end
#                                                   printed; its status, or 3 while it still
#                                                   runs, 4 if it was killed
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
case ${1:-} in
    --detach)
        dir=$(realpath -m "${2:?a folder for the detached run}"); shift 2
        if [ -f "$dir/pid" ] && [ ! -f "$dir/rc" ] && kill -0 "$(cat "$dir/pid")" 2>/dev/null; then
            echo "a detached run is still going in $dir"; exit 2
        fi
        mkdir -p "$dir"; rm -f "$dir/rc"
        cd "$root" || exit 2
        OUT=$dir setsid nohup bash -c '"$@"; echo $? >"$OUT/rc.part"; mv "$OUT/rc.part" "$OUT/rc"' \
            _ "$root/scripts/gpu_check.sh" "$@" >"$dir/run.log" 2>&1 </dev/null &
        echo $! >"$dir/pid"
        echo "detached: pid $(cat "$dir/pid"); its output: $dir/run.log"
        exit 0 ;;
    --wait)
        dir=$(realpath -m "${2:?the folder of the detached run}"); limit=${3:-570}
        start=$(date +%s)
        while [ ! -f "$dir/rc" ] && kill -0 "$(cat "$dir/pid" 2>/dev/null)" 2>/dev/null \
                && [ $(($(date +%s) - start)) -lt "$limit" ]; do
            sleep 2
        done
        [ -n "${OUT:-}" ] && cp -r "$dir"/. "$OUT"/
        tail -c 11000 "$dir/run.log"
        if [ -f "$dir/rc" ]; then
            echo "detached run ended: status $(cat "$dir/rc")"; exit "$(cat "$dir/rc")"
        fi
        if ! kill -0 "$(cat "$dir/pid" 2>/dev/null)" 2>/dev/null; then
            echo "detached run gone without a status (killed?)"; exit 4
        fi
        echo "detached run still running ($(($(date +%s) - start)) s waited)"
        exit 3 ;;
esac
cd "$root" || exit 2
export PYTHONUNBUFFERED=1 LITELLM_LOCAL_MODEL_COST_MAP=True
# Throwaway sites and tests: a secret key of their own (DEBUG is off unless asked for).
export SECRET_KEY=${SECRET_KEY:-$(python3 -c 'import secrets; print(secrets.token_urlsafe(50))')}
# The checks' runners do only the work each check gives them (no validations asked for at start).
export RUNNER_VALIDATE_MISSING=${RUNNER_VALIDATE_MISSING:-0}
OUT=${OUT:-$(mktemp -d)}
KB=${KERNELBENCH:-.kernelbench}
sections=${*:-harness exploits tests runner sandbox}

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
        verdicts) python3 scripts/gpu_check.py --problems "$KB" --only verdicts 2>&1 | tee "$OUT/verdicts.log" ;;
        # The exploit and attack suites in one go, as a change to the judge, the runner or the
        # build cache needs them (issues 36, 40): the CPU exploit suite in two halves beside the
        # attack suite (a real runner serving the GPU; a host's 16 cores hold the three) and the
        # builds ahead of admission (tests/harness/test_build_ahead.py, a CUDA one), then,
        # each alone, the noisy neighbours (their medians are the point) and the limits (they
        # read the host's room); a table of each part's pytest summary at the end.
        suites)
            ex=tests/exploits
            : >"$OUT/suites.tsv"
            suite() {  # suite NAME PYTEST_ARGS...: its log to $OUT/suite_NAME.log, a row to the table
                local name=$1 start=$SECONDS; shift
                # SUITES_ONLY="exploits-a attacks ...": the parts to run (all by default).
                [[ -z ${SUITES_ONLY:-} || " $SUITES_ONLY " == *" $name "* ]] || return 0
                python3 -m pytest -q -rfE --tb=short -p no:cacheprovider "$@" \
                    >"$OUT/suite_$name.log" 2>&1
                local rc=$?
                printf '%s\t%s\t%s\t%s\n' "$name" "$rc" "$((SECONDS - start))" \
                    "$(grep -E '[0-9]+ (passed|failed|errors?|skipped)' "$OUT/suite_$name.log" | tail -n 1)" \
                    >>"$OUT/suites.tsv"
                return $rc
            }
            limit=${EVALUATION_TIME_LIMIT:-240}
            suite exploits-a $ex/test_exploits.py & a=$!
            suite exploits-b $ex --ignore=$ex/test_exploits.py \
                --ignore=$ex/test_noisy_neighbours.py & b=$!
            KB_SANDBOX_TEST_DEVICE=cuda EVALUATION_TIME_LIMIT=$limit suite attacks \
                tests/sandbox --ignore=tests/sandbox/test_limits.py & c=$!
            # A cold CUDA build ahead of its evaluation's memory (evaluator/runner/sandbox.py).
            suite build tests/harness/test_build_ahead.py & d=$!
            # The judge's other CUDA tests (faults, the build cache, models built on the device).
            suite harness tests/harness/test_gpu.py & e=$!
            for pid in $a $b $c $d $e; do wait $pid || status=1; done
            suite noisy $ex/test_noisy_neighbours.py || status=1
            KB_SANDBOX_TEST_DEVICE=cuda EVALUATION_TIME_LIMIT=$limit suite limits \
                tests/sandbox/test_limits.py || status=1
            echo; printf '%-11s %3s %6s  %s\n' part rc s "pytest"
            while IFS=$'\t' read -r name rc secs summary; do
                printf '%-11s %3s %6s  %s\n' "$name" "$rc" "$secs" "$summary"
            done <"$OUT/suites.tsv"
            for part in exploits-a exploits-b attacks build harness noisy limits; do
                [[ -f $OUT/suite_$part.log ]] || continue
                grep -E '^(FAILED|ERROR) ' "$OUT/suite_$part.log" | head -n 10
            done
            true ;;  # each part's status is counted above
        # The CPU exploit suite (tests/exploits) on this host, whose cores are idle.
        cpuexploits) python3 -m pytest -q -p no:cacheprovider tests/exploits 2>&1 \
                   | tee "$OUT/cpuexploits.log" | tail -30 ;;
        # The judge's timing loop against the one before it (bench/judge_clock.py), side by
        # side: medians and wall times; .bench-base holds the old `evaluation` package.
        clock) python3 bench/judge_clock.py --base .bench-base --problems "$KB" \
                   --repeats "${CLOCK_REPEATS:-2}" ${CLOCK_ONLY:+--only "$CLOCK_ONLY"} \
                   --json "$OUT/clock.json" 2>&1 \
                   | tee "$OUT/clock.log" ;;
        # One GPU shared by several evaluations (issue 22): the level 1 mix drained before and
        # after, side by side, on GPU 0 (bench/gpu_sharing.py; SHARING_COPIES, SHARING_ONLY,
        # SHARING_LATENCY: the one-at-a-time evaluations of each pass; SHARING_MIX=real and
        # SHARING_COLD=1: our kernels at KernelBench's real sizes, nothing compiled ahead, issue
        # 41; SHARING_BIG: how many of its 4096 x 393216 problems, SHARING_PAIRS=1: two
        # kernels each, SHARING_RESTATED: PyTorch kernels of that many level-2 GEMM problems;
        # SHARING_TIMEOUT: each drain's limit in seconds; SHARING_REUSE_BUILDS=1: with
        # SHARING_COLD, the one-per-GPU pass takes the shared pass's builds;
        # SHARING_ALONE_PROFILER=1: the one-per-GPU pass keeps the profiling process).
        sharing) python3 bench/gpu_sharing.py --kernelbench "$KB" --copies "${SHARING_COPIES:-5}" \
                     --mix "${SHARING_MIX:-level1}" ${SHARING_COLD:+--cold} \
                     ${SHARING_REUSE_BUILDS:+--reuse-builds} \
                     ${SHARING_ALONE_PROFILER:+--alone-profiler} \
                     ${SHARING_BIG:+--big "$SHARING_BIG"} ${SHARING_PAIRS:+--pairs} \
                     ${SHARING_RESTATED:+--restated "$SHARING_RESTATED"} \
                     --timeout "${SHARING_TIMEOUT:-400}" \
                     ${SHARING_ONLY:+--only "$SHARING_ONLY"} \
                     ${SHARING_LATENCY:+--latency "$SHARING_LATENCY"} --json "$OUT/sharing.json" \
                     2>&1 | tee "$OUT/sharing.log" ;;
        # The whole log goes to $OUT as it comes (a run cut short keeps what it printed); the
        # console gets its end. Only the files with gpu tests: the others import what this
        # host lacks (daphne).
        tests) python3 -m pytest -q -m gpu -p no:cacheprovider $(grep -rl --include='*.py' "mark.gpu" tests) \
                   2>&1 | tee "$OUT/tests.log" | tail -40 ;;
        # The attack suite (tests/sandbox) through a real runner serving this host's GPU.
        # A cold nvcc build of the victim's CUDA kernel takes longer than the tests' default
        # 60 s limit (each test run has its own empty build cache); SANDBOX_K narrows the suite.
        # One file at a time, the limits first, failures told short as each file ends: a run
        # cut short (a machine given back) still shows why the files it finished failed.
        sandbox) for file in tests/sandbox/test_limits.py \
                         $(ls tests/sandbox/test_*.py | grep -v '/test_limits.py$'); do
                     KB_SANDBOX_TEST_DEVICE=cuda EVALUATION_TIME_LIMIT=${EVALUATION_TIME_LIMIT:-240} \
                         python3 -m pytest -q -rfE --tb=short -p no:cacheprovider "$file" \
                         ${SANDBOX_K:+-k "$SANDBOX_K"} 2>&1 | tee -a "$OUT/sandbox.log" | tail -40
                 done ;;
        # The site's starter kernels (evaluator/backends/starters.py) for CUDA, Triton and
        # PyTorch, through `kb check` on this GPU: each must come out correct, first and warm.
        # STARTER_BACKENDS="cuda triton torch helion" adds Helion where its wheel was carried.
        starters) for slug in ${STARTER_PROBLEMS:-level1/19_ReLU level2/76_Gemm_Add_ReLU}; do
                      for backend in ${STARTER_BACKENDS:-cuda triton torch}; do
                          file="$OUT/starter_${backend}_${slug//\//_}.py"
                          python3 -c 'import sys; from evaluator.backends.starters import starter_file
print(starter_file(open(sys.argv[1]).read(), sys.argv[2], slug=sys.argv[3]))' \
                              "$KB/$slug.py" "$backend" "$slug" >"$file" || status=1
                          for pass in first warm; do
                              start=$(date +%s%N)
                              python3 -m kbcli check "$file" --reference "$KB/$slug.py" \
                                  --backend "$backend" --device "${STARTER_DEVICE:-cuda}" \
                                  >"$file.$pass.log" 2>&1
                              rc=$?; [ $rc -eq 0 ] || status=1
                              echo "$slug $backend $pass: rc $rc in" \
                                   "$((($(date +%s%N) - start) / 1000000)) ms," \
                                   "$(grep -m1 'verdict' "$file.$pass.log")" | tee -a "$OUT/starters.log"
                          done
                      done
                  done ;;
        cost) python3 bench/sandbox_cost.py --kernelbench "$KB" --only "${COST_ONLY:-19_ReLU}" \
                  --repeats "${COST_REPEATS:-3}" --json "$OUT/sandbox_cost.json" 2>&1 \
                  | tee "$OUT/sandbox_cost.log" ;;
        # The per-kernel table, the roofline and an Nsight Compute report for a CUDA, a Triton
        # and a PyTorch kernel, through a real runner (scripts/profile_check.py).
        profile) python3 scripts/profile_check.py --kernelbench "$KB" --out "$OUT" 2>&1 \
                     | tee "$OUT/profile.log"
                 [ "${PIPESTATUS[0]}" = 0 ] || status=1 ;;
        runner) python3 scripts/runner_check.py --kernelbench "$KB" \
                    --time-limit "${TIME_LIMIT:-120}" 2>&1 | tee "$OUT/runner.log" ;;
        speed)
            gpus=$(nvidia-smi -L | wc -l)
            if [ "${SPEED_BEFORE:-1}" = 1 ] && [ "$gpus" -ge 2 ]; then
                # Side by side: the whole set on the slow path on GPU 1 while the fast path runs
                # on GPU 0 (and the sections after this one). Each has its own build cache, so
                # that their compiles ahead do not race; its output is shown at the end.
                CUDA_VISIBLE_DEVICES=1 BUILD_CACHE_DIR=/tmp/kb-before timeout "${BEFORE_TIMEOUT:-560}" \
                    python3 bench/eval_speed.py --kernelbench "$KB" --before \
                    --only "${BEFORE_ONLY:-}" --repeats "${BEFORE_REPEATS:-1}" \
                    --json "$OUT/before.json" >"$OUT/before.log" 2>&1 &
                before_pid=$!
            fi
            if [ "${SPEED_AFTER:-1}" = 1 ]; then
                CUDA_VISIBLE_DEVICES=0 python3 bench/eval_speed.py --kernelbench "$KB" \
                    --json "$OUT/after.json" 2>&1 | tee "$OUT/after.log"
                [ "${PIPESTATUS[0]}" = 0 ] || status=1
            fi
            if [ "${SPEED_BEFORE:-1}" = 1 ] && [ "$gpus" -lt 2 ]; then
                python3 bench/eval_speed.py --kernelbench "$KB" --before \
                    --only "${BEFORE_ONLY:-19_ReLU}" --repeats "${BEFORE_REPEATS:-1}" \
                    --json "$OUT/before.json" 2>&1 | tee "$OUT/before.log"
                [ "${PIPESTATUS[0]}" = 0 ] || status=1
            fi
            true ;;  # each run's status is counted above; a skipped one is not a failure
        drain)
            # Both drains use one build cache, filled ahead: like for like.
            export BUILD_CACHE_DIR=${BUILD_CACHE_DIR:-/tmp/kb-builds}
            python3 scripts/runner_check.py --kernelbench "$KB" --set level1 --copies 5 \
                --precompile --timeout "${DRAIN_TIMEOUT:-300}" 2>&1 | tee "$OUT/drain_all.log"
            python3 scripts/runner_check.py --kernelbench "$KB" --set level1 --copies 5 \
                --precompile --devices 0 --timeout "${DRAIN_TIMEOUT:-300}" 2>&1 \
                | tee "$OUT/drain_one.log" ;;
        # Kernel languages beside CUDA and Triton (issue 39) through a real runner
        # (scripts/languages_check.py): each language of LANGUAGES (default: those whose wheels
        # lie complete in .lang/, scripts/fetch_language_wheels.sh) installed from its wheels,
        # its parts joined and checked against its MANIFEST first; cuTile needs no wheel here
        # (its compiler does not target a Hopper GPU: the check expects it left out).
        languages)
            # One build cache for the calls on this host: the runner's self-test builds its
            # starters (the CUDA one takes the longest) once, not in every call.
            export BUILD_CACHE_DIR=${BUILD_CACHE_DIR:-/tmp/kb-builds}
            langs=${LANGUAGES:-}
            for dir in .lang/*/; do
                [ -f "$dir/MANIFEST" ] || continue
                lang=$(basename "$dir") missing=0
                # Emptied first: a wheel joined by an earlier call (another pin) must not stay.
                rm -rf "/tmp/lang/$lang"; mkdir -p "/tmp/lang/$lang"
                while read -r sum name; do
                    if [ -f "$(ls "$dir"/*/"$name" 2>/dev/null | head -n 1)" ]; then
                        cp "$dir"/*/"$name" "/tmp/lang/$lang/"
                    else
                        find "$dir" -name "$name.part-*" | awk -F'part-' '{print $NF, $0}' \
                            | sort | cut -d' ' -f2- | xargs -r cat >"/tmp/lang/$lang/$name"
                    fi
                    echo "$sum  /tmp/lang/$lang/$name" | sha256sum -c --quiet - || missing=1
                done <"$dir/MANIFEST"
                if [ $missing = 1 ]; then
                    echo "$lang: wheels incomplete (a folder of .lang/$lang not carried yet?)"
                    continue
                fi
                # Into the interpreter's own environment, where a deployment installs them: the
                # sandboxed worker sees that environment's site-packages, never /tmp/site.
                python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
                    --upgrade "/tmp/lang/$lang"/*.whl || status=1
                [ -n "${LANGUAGES:-}" ] || langs="${langs:+$langs,}$lang"
            done
            python3 scripts/languages_check.py --kernelbench "$KB" --languages "${langs:-cutile}" \
                2>&1 | tee "$OUT/languages.log" ;;
        curation) scripts/gpu_curation.sh "$KB" "$OUT" 2>&1 | tee "$OUT/curation.log" ;;
        *) echo "unknown section $section"; status=2 ;;
    esac
    [ "${PIPESTATUS[0]}" = 0 ] || status=1
done
if [ -n "${before_pid:-}" ]; then
    echo; echo "=== speed, slow path (GPU 1) ==="
    wait "$before_pid" || status=1
    cat "$OUT/before.log"
fi
exit $status
