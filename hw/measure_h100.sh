#!/usr/bin/env bash
# The GPU checks of hw/README.md, on one GPU, in one go: PyTorch's LLaMA-7B
# blocks, shardsim-hw's replay of the same blocks (4 x 512 and 10 x 512
# tokens) with per-kernel traces and memory, and the out-of-memory case.
# Run from the repository root on the GPU machine, after packing the build
# where it was built (bash hw/pack.sh) and copying .devpack/ over:
#   bash hw/measure_h100.sh OUT_DIR
set -uo pipefail
out=${1:?usage: hw/measure_h100.sh OUT_DIR}
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$out/gpu.csv"
python3 validate/reference/torch_reference.py "$out/torch_blocks.json" blocks \
  --blocks llama7b:4:512,llama7b:10:512 > "$out/torch.log" 2>&1
for b in 10 4; do
  bash .devpack/run.sh shardsim-hw run scenarios/hw/h100_blocks.textproto \
    --micro-batch-size $b --steps 3 --json "$out/hw_${b}x512.json" \
    --trace "$out/hw_${b}x512.trace.json" > "$out/hw_${b}x512.log" 2>&1
  echo "exit $?" >> "$out/hw_${b}x512.log"
done
bash .devpack/run.sh shardsim-hw run scenarios/hw/h100_oom.textproto \
  > "$out/hw_oom.log" 2>&1
echo "exit $?" >> "$out/hw_oom.log"
