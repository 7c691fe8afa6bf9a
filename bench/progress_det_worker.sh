#!/bin/sh
# issue 40: a worker that fails deterministically at step 50 (bench/RESULTS.md, "Issue 40")
i=0; while [ $i -le 60 ]; do echo $i > "$ELASTIC_HEARTBEAT_FILE"; if [ $i = 50 ]; then echo "bad batch at step 50" >&2; exit 3; fi; i=$((i+1)); done
