#!/usr/bin/env bash
# Downloads into .lang/LANGUAGE/ (ignored by git) the wheels that a kernel language beside CUDA
# and Triton needs on the GPU host (Python 3.12, torch 2.11 and triton 3.6 already there, with
# cuda-bindings, cuda-pathfinder, numpy, scipy, psutil, cloudpickle, ml-dtypes, protobuf...),
# for `scripts/gpu_check.sh languages` (issue 39):
#
#   scripts/fetch_language_wheels.sh helion|tilelang|cute [CHUNK_MIB]
#
# The languages are not in the lock (no site needs them; a GPU runner offers a language only
# where its package imports): the pins are here. The device tool carries at most 64 MiB a call,
# and TileLang's and CuTe DSL's wheels are larger, so the wheels are packed into numbered
# folders of at most CHUNK_MIB (default 28), a wheel larger than that split across them
# (NAME.whl.part-000, -001, ...): carry .lang/LANGUAGE/1 with one call, .lang/LANGUAGE/2 with the
# next, on the same machine (what a call leaves in ignored folders stays there while the machine
# is held). MANIFEST lists each wheel with its sha256; gpu_check.sh joins the parts, checks the
# sums and installs the wheels only when all are there.
set -euo pipefail

cd "$(dirname "$0")/.."
language=${1:?"a language: helion, tilelang or cute"}
chunk_mib=${2:-28}
case $language in
    # Helion compiles to Triton; filecheck is the one dependency the GPU host lacks. 1.5.0, not
    # 1.5.1: 1.5.1 imports IntelGPUError from torch._inductor, which torch 2.11 has not.
    helion) packages=(helion==1.5.0 filecheck==1.0.6) ;;
    # TileLang lowers through TVM (apache-tvm-ffi) and compiles with the host's nvcc.
    tilelang) packages=(tilelang==0.1.15 apache-tvm-ffi==0.1.12 torch-c-dlpack-ext==0.1.5
                        z3-solver==4.15.4.0) ;;
    # CuTe DSL: the shell package, its Python core and its compiler libraries (the CUDA 12
    # build, which the R580 driver runs).
    cute) packages=(nvidia-cutlass-dsl==4.8.1 nvidia-cutlass-dsl-libs-core==4.8.1
                    nvidia-cutlass-dsl-libs-base==4.8.1 nvidia-cutlass-dsl-libs-cu12==4.8.1) ;;
    *) echo "fetch_language_wheels: unknown language $language (helion, tilelang, cute)" >&2
       exit 2 ;;
esac

dest=.lang/$language
rm -rf "$dest"
mkdir -p "$dest/download"
python3 -m pip download --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
    --python-version 3.12 --implementation cp --abi cp312 --abi abi3 --abi none \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
    --platform manylinux_2_24_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 --platform any \
    -d "$dest/download" "${packages[@]}"

count=$(ls "$dest/download"/*.whl | wc -l)
if ((count != ${#packages[@]})); then
    echo "fetch_language_wheels: expected ${#packages[@]} wheels, got $count" >&2
    exit 1
fi
(cd "$dest/download" && sha256sum ./*.whl | sed 's#  \./#  #') >"$dest/MANIFEST"

# Pack: whole wheels and the pieces of large ones, in order, into folders of at most chunk_mib.
limit=$((chunk_mib * 1024 * 1024))
folder=1 used=0
place() {  # place FILE SIZE: into the current folder, or the next one once it would overflow
    if ((used > 0 && used + $2 > limit)); then folder=$((folder + 1)); used=0; fi
    mkdir -p "$dest/$folder"
    mv "$1" "$dest/$folder/"
    used=$((used + $2))
}
for wheel in "$dest/download"/*.whl; do
    size=$(stat -c %s "$wheel")
    if ((size <= limit)); then
        place "$wheel" "$size"
        continue
    fi
    # 4 MiB pieces, so that the folders fill up to their limit.
    split -b 4194304 -d -a 3 "$wheel" "$wheel.part-"
    rm "$wheel"
    for part in "$wheel".part-*; do
        place "$part" "$(stat -c %s "$part")"
    done
done
rmdir "$dest/download"
echo "fetch_language_wheels: $count wheels of $language, $(du -sh --exclude=MANIFEST "$dest" | cut -f1), in $folder folder(s):"
du -sh "$dest"/[0-9]*
