#!/usr/bin/env bash
# Static analysis of the tree (CI, from scripts/test.sh): cppcheck's warning and portability
# checks on the whole tree (program, tests, benchmarks); any finding
# fails. False positives are suppressed in
# scripts/cppcheck.supp (or inline with `// cppcheck-suppress ID` and a reason), never wholesale.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v cppcheck >/dev/null || { echo "lint: cppcheck is not installed" >&2; exit 1; }
dirs=(common backends rendezvous launcher agent tests bench include examples/c)
incs=()
for d in common backends rendezvous launcher agent agent/cli agent/driver agent/nic agent/tracker agent/health agent/observe agent/daemon agent/warm agent/liveness agent/log agent/preempt agent/progress agent/straggler agent/checkpoint include tests/helpers tests/e2e tests/etcd tests/fuzz tests/netns tests/ssh tests/unit tests/chaos; do
  incs+=(-I "$d")
done
existing=()
for d in "${dirs[@]}"; do
  [[ -d $d ]] && existing+=("$d")
done
echo "lint: cppcheck on ${existing[*]}" >&2
cppcheck --quiet --enable=warning,portability --std=c11 --inline-suppr -j"$(nproc)" \
  --suppressions-list=scripts/cppcheck.supp --include=scripts/cppcheck-criterion.h \
  --error-exitcode=1 \
  -D_GNU_SOURCE -DEA_VERSION=\"0\" -DEA_AGENT_BIN=\"x\" -DEA_HELPERS_DIR=\"x\" \
  -DEA_SOURCE_DIR=\"x\" "${incs[@]}" "${existing[@]}"
echo "lint: cppcheck clean"
