#!/bin/sh
# tools/cuda_bench.sh: the CUDA benchmark moved to bench/cuda.sh; this forwards to it.
exec sh "$(dirname "$0")/../bench/cuda.sh" "$@"
