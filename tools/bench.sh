#!/usr/bin/env bash
# tools/bench.sh: the CPU benchmark moved to bench/cpu.sh; this forwards to it (same options).
exec bash "$(dirname "$0")/../bench/cpu.sh" "$@"
