#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# elastic-agent --preflight check: at least MIN_GB gigabytes free on PATH (default: 10 GB on /tmp).
#   elastic-agent --preflight '/usr/share/doc/elastic-agent/examples/preflight/disk_free.sh /data 50' ...
path=${1:-/tmp}
min_gb=${2:-10}
avail_kb=$(df -Pk "$path" | awk 'NR == 2 { print $4 }')
[ -n "$avail_kb" ] || { echo "disk_free: cannot read free space of $path" >&2; exit 2; }
avail_gb=$((avail_kb / 1024 / 1024))
if [ "$avail_gb" -lt "$min_gb" ]; then
  echo "disk_free: only ${avail_gb} GB free on $path, need ${min_gb} GB" >&2
  exit 1
fi
echo "disk_free: ${avail_gb} GB free on $path"
