#!/usr/bin/env bash
# Packs a build of this checkout for a GPU machine that cannot build it.
#
# Why: a typical GPU machine has CUDA, cuDNN, NCCL, Open MPI and PyTorch,
# but not SimGrid, Abseil or Protobuf, and often nothing can be installed
# there. The pack carries what the binaries need that such a machine
# lacks: the binaries (shardsim, and shardsim-hw where CUDA was found),
# every shared library they load except the C/C++ runtime, CUDA, cuDNN,
# NCCL and MPI (the GPU machine's own must be used: they match its driver
# and its launcher), and the data the binaries read (platforms/,
# scenarios/, tests/data/).
#
# Usage, from anywhere in the checkout, after building into BUILD_DIR
# (default: build):
#   bash hw/pack.sh [BUILD_DIR]
# It writes .devpack/pkg.tar.xz and .devpack/run.sh at the repository root
# (.devpack/ ignores itself in git). Copy .devpack/ into the same checkout
# on the GPU machine, then run any command through it from the repository
# root, e.g.
#   bash .devpack/run.sh shardsim-hw run scenarios/quickstart.textproto
#   bash hw/measure_h100.sh OUT_DIR   # hw/README.md's checks, in one go
# run.sh unpacks into /tmp/w, puts the pack's bin/ and lib/ first on PATH
# and LD_LIBRARY_PATH (with the GPU machine's CUDA and cuDNN libraries),
# copies the data to the path this checkout has here, and runs the command
# from there, so that the same relative paths (scenarios/...) work on both
# machines. The packed binaries are outside any build or install tree, so
# run.sh points SHARDSIM_DATA_DIR at that copy unless it is set
# (sim/scenario/data_dir.h).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
build=${1:-build}
[ -x "$build/shardsim" ] || {
  echo "hw/pack.sh: $build/shardsim is missing: build first" \
       "(cmake --build $build)" >&2
  exit 1
}
[ -x "$build/shardsim-hw" ] || echo "hw/pack.sh: no $build/shardsim-hw" \
  "(hw/ needs MPI, its CUDA backend nvcc and NCCL): packing shardsim only" >&2

pack=.devpack
stage=$pack/stage
rm -rf "$pack"
mkdir -p "$stage/bin" "$stage/lib" "$stage/src/tests"
echo '*' > "$pack/.gitignore"
for b in shardsim shardsim-hw; do
  [ -x "$build/$b" ] && cp "$build/$b" "$stage/bin/"
done
# Debug information is most of a RelWithDebInfo binary's size.
strip "$stage"/bin/* 2>/dev/null || true

# Libraries the loader resolves to a file, less those the GPU machine
# must supply itself (the C/C++ runtime, CUDA, cuDNN, NCCL, cuBLAS, and
# Open MPI with what it loads: PMIx, hwloc, libevent, UCX, libfabric).
system='/(libc|libm|libdl|libpthread|librt|libgcc_s|libstdc\+\+)\.so'
system+='|/usr/local/cuda|libcudart|libcublas|libcudnn|libnccl'
system+='|libmpi|libopen-(pal|rte)|libpmix|libhwloc|libevent|libfabric'
system+='|libuc[pst]'
for b in "$stage"/bin/*; do
  ldd "$b" | awk '$3 ~ /^\// {print $3}'
done | sort -u | { grep -v -E "$system" || true; } | while read -r f; do
  cp -L "$f" "$stage/lib/"
done
strip --strip-unneeded "$stage"/lib/* 2>/dev/null || true

cp -r platforms scenarios "$stage/src/"
[ -d tests/data ] && cp -r tests/data "$stage/src/tests/"
echo "$root" > "$stage/SRCDIR"
tar cJf "$pack/pkg.tar.xz" -C "$stage" .
rm -rf "$stage"

cat > "$pack/run.sh" <<'RUN'
#!/usr/bin/env bash
# Written by hw/pack.sh. On the GPU machine: unpacks pkg.tar.xz beside
# this script into /tmp/w and runs "$@" from a copy of the data at the
# path the checkout had where it was packed.
set -eo pipefail
here=$(cd "$(dirname "$0")" && pwd)
w=/tmp/w
mkdir -p "$w" && tar xJf "$here/pkg.tar.xz" -C "$w"
src=$(cat "$w/SRCDIR")
mkdir -p "$src" && cp -r "$w/src/." "$src/"
export SHARDSIM_DATA_DIR=${SHARDSIM_DATA_DIR:-$src}
# cuBLAS from the CUDA toolkit, cuDNN from PyTorch's wheel: where they are.
cuda=$(find /usr/local/cuda/ /usr/local/cuda*/ -name 'libcublasLt.so.*' \
  2>/dev/null | head -1)
cuda=${cuda:+$(dirname "$cuda")}
cudnn=$(python3 -c 'import nvidia.cudnn, os
print(os.path.join(nvidia.cudnn.__path__[0], "lib"))' 2>/dev/null || true)
export LD_LIBRARY_PATH="$w/lib${cuda:+:$cuda}${cudnn:+:$cudnn}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PATH="$w/bin:$PATH"
# Open MPI refuses root without these; GPU machines often run as root.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
cd "$src"
exec "$@"
RUN
chmod +x "$pack/run.sh"
du -sh "$pack"
