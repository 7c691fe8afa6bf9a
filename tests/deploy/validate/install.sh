#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Installs the schema validator of tests/deploy (package.json and package-lock.json beside this
# script: kubernetes-models and @kubernetes-models/cert-manager, exact versions and integrity
# hashes) into a cache directory, once per lock file, with `npm ci`; prints its node_modules.
# Nothing is vendored: a fresh machine fetches it from the npm registry the first time; after
# that it works offline. The cache: $EA_DEPLOY_NODE_CACHE, else ${XDG_CACHE_HOME:-~/.cache}/elastic-agent.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
command -v npm >/dev/null || { echo "install.sh: npm is missing (scripts/install-deps.sh --test)" >&2; exit 1; }
key=$(cat "$here/package.json" "$here/package-lock.json" | sha256sum | cut -c1-16)
root=${EA_DEPLOY_NODE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/elastic-agent}
dir=$root/deploy-validate-$key
if [[ ! -e $dir/.complete ]]; then
  mkdir -p "$root"
  tmp=$(mktemp -d "$root/.deploy-validate.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  cp "$here/package.json" "$here/package-lock.json" "$tmp/"
  (cd "$tmp" && npm ci --no-audit --no-fund --ignore-scripts --loglevel=error >&2)
  touch "$tmp/.complete"
  # another run may have finished first: keep theirs
  mv -T "$tmp" "$dir" 2>/dev/null || true
fi
echo "$dir/node_modules"
