#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Switches etcd's auth on for elastic-agent, with one user and one role per kind of client:
#
#   elastic-agent-daemon  the node daemons (`elastic-agent serve`) and the run agents they start:
#                         readwrite of the whole prefix (every run's keys, the pools' keys)
#   elastic-agent-submit  `elastic-agent submit` and `status --pool`: read of the prefix (a run's
#                         standing, --wait), readwrite of each pool's queue/ and next key only.
#                         It cannot write a run's keys (state, nodes, ...), so it cannot stop,
#                         steer or fake a run; `cancel` (which closes a run through its state key)
#                         needs the daemon's identity: `kubectl exec ds/elastic-agent -- cancel ID`.
#   root                  this script only (etcd needs a root user before auth can be enabled)
#
# With --client-cert-auth a client's certificate CN is its user name, so no user has a password
# (--no-password). Idempotent: run it again after adding a pool (it adds users, roles and grants,
# and never removes one).
#
# Environment (the etcd-auth Job takes ELASTIC_* from the daemons' ConfigMap, so the prefix, the
# pool and the endpoints are the daemons' own):
#   ETCDCTL_CACERT ETCDCTL_CERT ETCDCTL_KEY  a client certificate with CN root (etcdctl reads them)
#   ETCDCTL_ENDPOINTS      https://host:port,...; default: ELASTIC_RDZV_ENDPOINT with https://
#   ELASTIC_PREFIX         the runs' prefix (default /elastic/)
#   ELASTIC_POOL           the pool the submit role may queue runs in (default default)
#   ETCD_AUTH_POOLS        several pools, space-separated (default: ELASTIC_POOL)
#   ETCDCTL                the etcdctl to run (default etcdctl)
set -eu

etcdctl=${ETCDCTL:-etcdctl}
prefix=${ELASTIC_PREFIX:-/elastic/}
pools=${ETCD_AUTH_POOLS:-${ELASTIC_POOL:-default}}
daemon=elastic-agent-daemon
submit=elastic-agent-submit
export ETCDCTL_API=3

if [ -z "${ETCDCTL_ENDPOINTS:-}" ]; then
  if [ -z "${ELASTIC_RDZV_ENDPOINT:-}" ]; then
    echo "etcd-auth: set ETCDCTL_ENDPOINTS or ELASTIC_RDZV_ENDPOINT" >&2
    exit 2
  fi
  ETCDCTL_ENDPOINTS=$(printf '%s' "$ELASTIC_RDZV_ENDPOINT" | sed 's#\([^,]*\)#https://\1#g')
  export ETCDCTL_ENDPOINTS
fi
case $prefix in
  /*/) ;;
  *) echo "etcd-auth: ELASTIC_PREFIX '$prefix' must start and end with /" >&2; exit 2 ;;
esac
for pool in $pools; do
  case $pool in
    *[!A-Za-z0-9._-]* | [._-]*)
      echo "etcd-auth: pool name '$pool' is not made of A-Z a-z 0-9 . _ - starting with a letter or digit" >&2
      exit 2 ;;
  esac
done

ctl() {
  "$etcdctl" --dial-timeout=5s --command-timeout=10s "$@"
}

role() { # NAME: created unless it exists
  ctl role get "$1" >/dev/null 2>&1 || ctl role add "$1" >/dev/null
}

user() { # NAME ROLE: a user without a password (its certificate's CN), granted ROLE
  ctl user get "$1" >/dev/null 2>&1 || ctl user add "$1" --no-password >/dev/null
  ctl user grant-role "$1" "$2" >/dev/null
}

grant() { # ROLE read|write|readwrite KEY [--prefix]
  ctl role grant-permission "$@" >/dev/null
}

# the one who may change all this
role root
user root root

role "$daemon"
grant "$daemon" readwrite "$prefix" --prefix
user "$daemon" "$daemon"

role "$submit"
grant "$submit" read "$prefix" --prefix
for pool in $pools; do
  base="${prefix}~pools/$pool/"
  grant "$submit" readwrite "${base}queue/" --prefix
  grant "$submit" readwrite "${base}next"
done
user "$submit" "$submit"

ctl auth enable >/dev/null
echo "etcd-auth: auth enabled; roles $daemon (readwrite $prefix) and $submit (read $prefix;" \
  "readwrite of queue/ and next of pool(s) $pools)"
