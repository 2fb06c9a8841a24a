#!/usr/bin/env bash
# Warp for a GPU machine that is reached through transfers of at most 64 MiB each (the device tool
# used with gpu_check.sh) and has no package index.  Warp 1.9.1's wheel is 132 MB; on a GPU it needs
# only the Python files (0.8 MB packed) and bin/warp.so (272 MB; 66 MB with xz -9e).  bin/warp-clang.so
# (66 MB) is Warp's CPU compiler and is left out: Warp on such a machine then has cuda:0 and no CPU
# kernels, which is all vs_warp.py --arch cuda uses.
#
#   bash benchmarks/warp_pieces.sh pack            # here: .wpa/ (57 MB) and .wpb/ (9 MB), from the
#                                                  # warp-lang installed here (the "bench" extra)
#   # there, call 1 (carry .wpa):  mkdir -p /tmp/wp && cp .wpa/* /tmp/wp/
#   # there, call 2 (carry .wpb, within the 30 s the machine stays warm):
#   bash benchmarks/warp_pieces.sh unpack /tmp/wsite && export PYTHONPATH=$PYTHONPATH:/tmp/wsite
#
# Ran so on 2026-12-04 (H200): vs_warp.py --arch cuda --scale 10 with Warp on cuda:0 (README, GPU).
# .wpa/ and .wpb/ are in .gitignore: carried by name only, never sent with the working tree.
# PIECES_DIR (default: the repository root) holds .wpa/ and .wpb/; STASH_DIR (default /tmp/wp) is where
# call 1 put the first piece (tests/test_benchmarks_smoke.py runs both halves on a small stand-in).
set -eu -o pipefail
cd "$(dirname "$0")/.."
PIECE=${PIECE:-57000000}             # bytes: the first piece plus the repository stay under 64 MiB
A=${PIECES_DIR:-.}/.wpa
B=${PIECES_DIR:-.}/.wpb
STASH=${STASH_DIR:-/tmp/wp}

case "${1:-}" in
pack)
    site=$(python3 -c "import os, warp; print(os.path.dirname(os.path.dirname(warp.__file__)))")
    version=$(python3 -c "import warp; print(warp.__version__)")
    rm -rf "$A" "$B" && mkdir -p "$A" "$B"
    tar -C "$site" --exclude='warp/bin' --exclude='warp/tests' --exclude='warp/examples' \
        --exclude='__pycache__' -cJf "$A/warp_py.tar.xz" warp "warp_lang-$version.dist-info"
    xz -9e -T2 -c "$site/warp/bin/warp.so" | split -b "$PIECE" - "$A/warp_so.xz."
    [ ! -e "$A/warp_so.xz.ac" ] || { echo "warp.so packs to more than two pieces of $PIECE bytes" >&2; exit 1; }
    if [ -e "$A/warp_so.xz.ab" ]; then mv "$A/warp_so.xz.ab" "$B/"; else : >"$B/warp_so.xz.ab"; fi
    du -b "$A"/* "$B"/*
    ;;
unpack)
    dest=${2:?unpack DEST: where to put the warp package}
    mkdir -p "$dest" && tar -C "$dest" -xJf "$STASH/warp_py.tar.xz"
    mkdir -p "$dest/warp/bin"
    cat "$STASH/warp_so.xz.aa" "$B/warp_so.xz.ab" | xz -dc > "$dest/warp/bin/warp.so"
    PYTHONPATH="$dest" python3 -c "import warp; warp.init(); print('warp', warp.__version__, warp.get_cuda_devices())"
    ;;
*)
    echo "usage: $0 pack | unpack DEST" >&2
    exit 2
    ;;
esac
