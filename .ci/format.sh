#!/usr/bin/env bash
# The house style (.clang-format: Google, 80 columns) holds for every C++
# and CUDA file in the repository. Fix with:
#   git ls-files '*.cc' '*.h' '*.cu' '*.cuh' | xargs clang-format -i
set -euo pipefail
cd "$(dirname "$0")/.."
git ls-files '*.cc' '*.h' '*.cu' '*.cuh' | xargs clang-format --dry-run -Werror
echo "format: $(git ls-files '*.cc' '*.h' '*.cu' '*.cuh' | wc -l) files in style"
