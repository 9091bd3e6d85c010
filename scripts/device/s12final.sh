#!/usr/bin/env bash
# Session 12's closing device run with the shipped defaults (one fence per Simple segment, the
# in-place progress word as a GPU-scope release; pull mode, implied LL credits): the same
# commands as session 11's closing run, so the same script (correctness matrix, --procs, the
# headline all-reduce table and the other collectives against NCCL). Logs in $OUT/*.log.
exec bash "$(dirname "$0")/final4.sh" "$@"
