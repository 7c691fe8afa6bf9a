#!/bin/sh
# A tiny worker: prints what the agent told it, works for a moment, exits 0.
echo "hello from rank $RANK of $WORLD_SIZE (local rank $LOCAL_RANK on node $ELASTIC_NODE_ID," \
     "round $ELASTIC_ROUND, master $MASTER_ADDR:$MASTER_PORT)"
sleep "${HELLO_SECONDS:-3}"
echo "rank $RANK done"
