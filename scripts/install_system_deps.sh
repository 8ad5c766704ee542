#!/usr/bin/env bash
# Installs Debian packages that are missing, through apt-get (as root, or through sudo).
#
#   scripts/install_system_deps.sh PKG[:COMMAND] ...
#
# A package is taken as present when COMMAND is on PATH (when given), or else when dpkg has it
# installed. `apt-get update` runs once, and only when something is missing.
set -euo pipefail

missing=()
for spec in "$@"; do
    pkg=${spec%%:*}
    cmd=
    [[ $spec == *:* ]] && cmd=${spec#*:}
    if [[ -n $cmd ]]; then
        command -v "$cmd" >/dev/null 2>&1 && continue
    elif dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed'; then
        continue
    fi
    missing+=("$pkg")
done

((${#missing[@]} == 0)) && exit 0

if [[ $(id -u) -eq 0 ]]; then
    sudo=()
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    sudo=(sudo -n)
else
    echo "install_system_deps: need root or passwordless sudo to install: ${missing[*]}" >&2
    echo "install_system_deps: install them by hand: apt-get install ${missing[*]}" >&2
    exit 1
fi

echo "install_system_deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -qq </dev/null
"${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" </dev/null
