#!/usr/bin/env bash
# The reliability job: every test that runs in seconds, again under
# AddressSanitizer + UndefinedBehaviorSanitizer (any finding fails), and
# each libFuzzer target for a short bounded time (tests/fuzz/README.md).
# Called by `bash .ci/setup.sh test`; needs clang and libfuzzer-14-dev.
#
# Left out here (they run unsanitized in the main job, and sanitized they
# would push CI past its 30 minutes on 2 cores): the large-shape plan
# proofs (FlatRing/FlatDirect.AllOpsLargeShapes), the engine's mode and
# determinism comparisons (EngineModes.*, EngineDeterminism.*), the whole
# steps compared with and without node symmetry or collapse
# (EngineNetworkSymmetry.StepsAreTheSameOnEveryNode, Collapse.EveryStrategy
# MatchesTheFullReplay: every strategy simulated twice), the memory
# properties (Memory.*: hundreds of plans of the memory model that the
# sanitized unit tests walk), the 16,384-GPU fabric build, reports/regenerate, the hw_cpu sweep, the
# install and package tests (what they check is the layout), the golden
# outputs (they run unsanitized), the property tests that simulate
# hundreds of steps and plans (Hardware.*, Consistency.*, Plan.*), the
# searches that simulate every algorithm or preset, or search twice to
# compare (Search.WithEveryAlgorithmToo, Search.TheBestIsRankedFirstAndNo
# PresetBeatsIt, Search.WhereTwoGpusShareANic, Search.TheBoundIsSoundAnd
# PruningKeepsTheAnswer, Search.StartingPointsAheadChangesNothing,
# Search.PruningKeepsTheAnswerAcrossLayouts, Search.PointsOfOneSchedule
# ShareOneSimulation, Deployable.EveryRowMarkedAndTheBestDeployableIsExact,
# TimeLimit.GivesTheBestSoFar: the same code as the smaller searches,
# 30 s to minutes each under ASan), the traffic property at 1024 GPUs
# (Traffic.ZeroPlusPlusSendsLessBetweenNodesThanZero3: the counter the
# other traffic tests reach, at scale),
# the docs' regenerated outputs and the history grep (text checks), the
# command-line scripts cli, inputs and limits (whole runs of the same code
# the sanitized unit tests and fuzzers reach: 200, 110 and 60 s under
# ASan), and
# mpi_sweep (shardsim itself under mpirun: Open MPI's leaks would need the
# slow unwinder below in every simulation child).
set -euo pipefail
cd "$(dirname "$0")/.."
# Line tables only: reports name file and line, in a fifth less compile time.
CC=clang CXX=clang++ cmake -S . -B build-san -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -gline-tables-only -DNDEBUG" \
  -DSHARDSIM_SANITIZE=ON -DSHARDSIM_FUZZ=ON -DSHARDSIM_CUDA=OFF -DSHARDSIM_WERROR=ON >/dev/null
cmake --build build-san -j "$(nproc)"
# SimGrid switches stacks for its actors: ASan warns about it once per
# process and is told not to track fake stacks across the switch.
export ASAN_OPTIONS=halt_on_error=1:detect_leaks=1:detect_stack_use_after_return=0
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
cd build-san
ctest --output-on-failure -j "$(nproc)" -E \
  'AllOpsLargeShapes|EngineModes\.|EngineDeterminism\.|StepsAreTheSameOnEveryNode|EveryStrategyMatchesTheFullReplay|^Memory\.(MoreGpusNever|RecomputationAndFlash|PartsSumToThePeak)|DgxA100BuildsAt16384Gpus|^Hardware\.|^Consistency\.|^Plan\.|WithEveryAlgorithmToo|TheBestIsRankedFirstAndNoPresetBeatsIt|WhereTwoGpusShareANic|TheBoundIsSoundAndPruningKeepsTheAnswer|StartingPointsAheadChangesNothing|PruningKeepsTheAnswerAcrossLayouts|PointsOfOneScheduleShareOneSimulation|^Deployable\.EveryRowMarked|^TimeLimit\.|ZeroPlusPlusSendsLessBetweenNodesThanZero3|^docs$|^history$|^reports$|^cli$|^inputs$|^limits$|^hw_|^mpi_sweep$|^install$|^package$|^golden$'
# shardsim-hw under MPI: Open MPI's own leaks are suppressed by library.
# Its components are unloaded before the leak check, so the fast unwinder
# stops at an unknown module; the slow one (DWARF) reaches libmpi and
# libopen-rte, which the suppressions name. Slow on every malloc: only here.
# For the same reason the leak check's tracer can read an unloaded
# component's thread-local block (LSan prints "DTLS 9 at 0x3eb1-..." and
# dies with "Tracer caught signal 11"): use_tls=0 leaves TLS out of the
# roots. That can only report more leaks, never hide one.
LSAN_OPTIONS=suppressions=$PWD/../tests/sanitize/lsan.supp:fast_unwind_on_malloc=0:use_tls=0 \
  ctest --output-on-failure -R '^hw_fault$'
