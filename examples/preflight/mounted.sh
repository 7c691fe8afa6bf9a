#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# elastic-agent --preflight check: PATH is a mount point and readable (a shared checkpoint or
# data file system that failed to mount would otherwise fill the local disk).
#   elastic-agent --preflight '/usr/share/doc/elastic-agent/examples/preflight/mounted.sh /shared' ...
path=${1:?usage: mounted.sh PATH}
if ! mountpoint -q "$path"; then
  echo "mounted: $path is not a mount point" >&2
  exit 1
fi
ls "$path" >/dev/null || { echo "mounted: cannot list $path" >&2; exit 1; }
echo "mounted: $path"
