#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Checks deploy/ without a cluster, a cloud or a container engine:
#   Kubernetes  `kubectl kustomize` renders deploy/k8s (with cert-manager), the base alone, the
#               GPU overlay and examples/ (offline); every object validates against the API's
#               schema and cert-manager's CRDs (kubernetes-models, tests/deploy/validate); the
#               rendered objects agree with each other and with the binary (check_deploy.py k8s):
#               the DaemonSet runs `serve`, its ConfigMap carries no run; locked by default
#               (check_locked.py): etcd TLS flags, Pod Security `restricted`, the NetworkPolicies
#               (simulated), the etcd-auth Job's roles, each pod's certificate CN (cert-manager's
#               and make-certs.sh's agree); the daemon starts with the ConfigMap and its mounted
#               certificates; the example Job runs `submit --wait` against the daemons' pool and
#               store as the submit user (check_deploy.py k8s-submit)
#   package     scripts/build-deb.sh builds the .deb; its Depends cover the libraries the binary
#               links; it unpacks into a scratch root where the binary runs; man page; postinst
#   systemd     `systemd-analyze verify` on the packaged units; the units' settings (the one-shot
#               elastic-agent@.service, the daemon elastic-agent-serve.service); the one-shot
#               ExecStart line run here: a job succeeds, SIGTERM to the agent alone stops the
#               workers (KillMode=mixed), the lifecycle hook's preemption file makes it leave;
#               the hook stops the daemon's unit (systemctl stubbed)
#   cloud-init  the user data parses, starts elastic-agent-serve.service with no run baked in;
#               its embedded scripts pass shellcheck
#   container   the Dockerfile, statically (built too when a container engine is available)
#   scripts     shellcheck on every shell script in deploy/, scripts/build-deb.sh, tests/deploy/
# Usage: test_deploy.sh SOURCE_DIR ELASTIC_AGENT_BINARY
# Prints one PASS/FAIL/SKIP line per check and a summary; exits 1 when a check failed.
#
# `serve` and `submit` (issue 23): the files are checked against `elastic-agent serve --help` /
# `submit --help`, and the daemon is started with the DaemonSet's and the unit's configuration
# (the checks marked "needs serve"; serve_cli=0 checks against check_deploy.py's SERVE_FLAGS and
# SUBMIT_FLAGS instead, for a binary without them).
set -uo pipefail

src=$(cd "${1:?usage: test_deploy.sh SOURCE_DIR ELASTIC_AGENT_BINARY}" && pwd)
bin=$(realpath "${2:?usage: test_deploy.sh SOURCE_DIR ELASTIC_AGENT_BINARY}")
here=$src/tests/deploy
checker=(python3 "$here/check_deploy.py")
tmp=$(mktemp -d)
bg_pids=()
# a signing key of the test's own, as one allowed_signers line (what an admin adds)
ssh-keygen -q -t ed25519 -N '' -C tester -f "$tmp/signer" </dev/null
echo "tester@example.com $(cut -d' ' -f1,2 "$tmp/signer.pub")" >"$tmp/signer.line"
cleanup() {
  local p
  for p in "${bg_pids[@]}"; do kill "$p" 2>/dev/null; done
  rm -rf "$tmp"
}
trap cleanup EXIT

npass=0 nfail=0 nskip=0
failed=()
pass() { npass=$((npass + 1)); echo "PASS  $*"; }
fail() { nfail=$((nfail + 1)); failed+=("$*"); echo "FAIL  $*"; }
skip() { nskip=$((nskip + 1)); echo "SKIP  $*"; }
section() { printf '\n== %s ==\n' "$*"; }
indent() { sed 's/^/      /'; }
# step NAME COMMAND...: PASS when COMMAND succeeds; its output is shown either way
step() {
  local name=$1 out rc
  shift
  out=$("$@" 2>&1)
  rc=$?
  [[ -n "$out" ]] && printf '%s\n' "$out" | indent
  if ((rc == 0)); then pass "$name"; else fail "$name"; fi
  return $rc
}
have() { command -v "$1" >/dev/null 2>&1; }
# verdict NAME COMMAND...: PASS when COMMAND succeeds (its output hidden)
verdict() {
  local name=$1
  shift
  if "$@" >/dev/null 2>&1; then pass "$name"; else fail "$name"; fi
}

# the environment for running the agent here: nothing from the caller's but PATH and sanitizer
# settings; TMPDIR for the agent's per-run directory
base_env=(PATH="/usr/sbin:/usr/bin:/sbin:/bin" TMPDIR="$tmp")
for v in ASAN_OPTIONS UBSAN_OPTIONS LSAN_OPTIONS; do
  [[ -n "${!v:-}" ]] && base_env+=("$v=${!v}")
done

# run_serve NAME ENVFILE ARGVFILE: the daemon (argv: serve ...) with a configuration's variables
# against a closed loopback port, SIGTERM after 3 s: exit 0 (the contract's SIGTERM exit) or 3
# (it gave up on the store) means every value parsed and validated; 2 is a configuration error.
run_serve() { # needs serve
  local name=$1 envs argv out rc
  mapfile -d '' envs <"$2"
  mapfile -d '' argv <"$3"
  out=$(timeout --preserve-status -s TERM 3 env -i "${base_env[@]}" "${envs[@]}" "$bin" "${argv[@]}" 2>&1)
  rc=$?
  if ((rc == 0 || rc == 3)); then
    pass "$name: the daemon accepts the configuration (exit $rc: SIGTERM or store unreachable)"
  else
    printf '%s\n' "$out" | tail -5 | indent
    fail "$name: the daemon accepts the configuration (exit $rc, want 0 or 3)"
  fi
}

# run_config NAME ENVFILE ARGVFILE: the agent, with a configuration's variables (NUL-separated)
# and its argv, against a closed loopback port: exit 3 (store unreachable past --join-timeout)
# means every value parsed and validated; 2 would be a configuration error.
run_config() {
  local name=$1 envs argv out rc
  mapfile -d '' envs <"$2"
  mapfile -d '' argv <"$3"
  out=$(timeout 30 env -i "${base_env[@]}" "${envs[@]}" "$bin" "${argv[@]}" 2>&1)
  rc=$?
  if ((rc == 3)); then
    pass "$name: the agent accepts the configuration (exit 3: store unreachable, as intended)"
  else
    printf '%s\n' "$out" | tail -5 | indent
    fail "$name: the agent accepts the configuration (exit $rc, want 3)"
  fi
}

# ---------------------------------------------------------------------------------------------
section "prerequisites"
missing=0
for t in python3 kubectl shellcheck systemd-analyze dpkg-deb dpkg-shlibdeps readelf openssl; do
  if have "$t"; then pass "tool $t"; else fail "tool $t is missing (scripts/install-deps.sh --test)"; missing=1; fi
done
if python3 -c 'import yaml' 2>/dev/null; then
  pass "python3 yaml module"
else
  fail "python3 yaml module is missing (Debian package python3-yaml)"
  missing=1
fi
if ! "$bin" --help >"$tmp/help.txt" 2>&1; then
  fail "elastic-agent --help"
  missing=1
fi
version=$("$bin" --version | awk '{print $2}')
echo "      elastic-agent $version ($bin)"
serve_cli=1
serve_args=() submit_args=()
if ((serve_cli)); then
  "$bin" serve --help >"$tmp/serve-help.txt" 2>&1 || fail "elastic-agent serve --help"
  "$bin" submit --help >"$tmp/submit-help.txt" 2>&1 || fail "elastic-agent submit --help"
  serve_args=(--serve-help "$tmp/serve-help.txt")
  submit_args=(--submit-help "$tmp/submit-help.txt")
elif "$bin" serve --help >/dev/null 2>&1; then
  echo "      this elastic-agent has serve: set serve_cli=1 in tests/deploy/test_deploy.sh"
fi
has_http=0
if grep -q -- '^  --http ' "$tmp/help.txt"; then
  has_http=1
  pass "elastic-agent has --http (the probes' /healthz and /readyz)"
else
  fail "elastic-agent has --http (the probes' /healthz and /readyz): not in --help yet (issue 12)"
fi
if ((missing)); then
  echo "deploy: cannot go on without the tools above"
  exit 1
fi

# ---------------------------------------------------------------------------------------------
section "shellcheck"
scripts=("$src/scripts/build-deb.sh")
while IFS= read -r -d '' f; do
  if [[ "$f" == *.sh ]] || head -c 64 "$f" | grep -qE '^#!(/usr)?/bin/(env )?(ba|da)?sh'; then
    scripts+=("$f")
  fi
done < <(find "$src/deploy" "$here" -type f -print0 | sort -z)
for f in "${scripts[@]}"; do
  step "shellcheck ${f#"$src"/}" shellcheck -x "$f"
done

# ---------------------------------------------------------------------------------------------
section "Kubernetes (kubectl kustomize, offline)"
etcd_help=()
if have etcd; then
  etcd --help >"$tmp/etcd-help.txt" 2>&1
  etcd_help=(--etcd-help "$tmp/etcd-help.txt")
else
  skip "etcd's variables against etcd --help (no etcd here)"
fi
# the certificates without cert-manager (deploy/k8s/certs/make-certs.sh): the Secrets the
# no-cert-manager path applies; the checker compares them with cert-manager's Certificates and
# mounts them into the daemon started below
step "deploy/k8s/certs/make-certs.sh makes the etcd CA and the Secrets (offline)" \
  "$src/deploy/k8s/certs/make-certs.sh" --out "$tmp/certs"
secrets=()
[[ -s "$tmp/certs/secrets.yaml" ]] && secrets=(--secrets "$tmp/certs/secrets.yaml")
# the schema validator (kubernetes-models, @kubernetes-models/cert-manager) in a cache dir
validator=""
if have node && have npm; then
  if validator=$("$here/validate/install.sh" 2>"$tmp/npm.err"); then
    pass "schema validator installed ($validator)"
  else
    indent <"$tmp/npm.err"
    fail "schema validator: npm ci of tests/deploy/validate (needs the npm registry once)"
    validator=""
  fi
else
  fail "tool node/npm is missing (scripts/install-deps.sh --test)"
fi
# validate NAME FILE...: every object of the YAML files against the Kubernetes API's schema
# and cert-manager's CRDs
validate() {
  local name=$1
  shift
  [[ -n $validator ]] || { fail "$name: schema validation (no validator)"; return; }
  python3 -c 'import json, sys, yaml
json.dump([d for f in sys.argv[2:] for d in yaml.safe_load_all(open(f)) if d], open(sys.argv[1], "w"))' \
    "$tmp/objects.json" "$@" &&
    step "$name: every object validates against the API schema (kubernetes-models)" \
      node "$here/validate/validate.js" "$validator" "$tmp/objects.json"
}
validate "make-certs.sh's Secrets" "$tmp/certs/secrets.yaml"
# default: deploy/k8s (the base and cert-manager's Certificates); base: the base alone, for the
# Secrets of make-certs.sh; gpu: the GPU overlay
for overlay in default base gpu; do
  case $overlay in
    default) dir=$src/deploy/k8s extra=() ;;
    base) dir=$src/deploy/k8s/base extra=() ;;
    gpu) dir=$src/deploy/k8s/overlays/gpu extra=(--gpu) ;;
  esac
  # shellcheck disable=SC2016 # $1 and $2 are the inner shell's
  if ! step "kubectl kustomize ${dir#"$src"/} renders" \
      sh -c 'kubectl kustomize "$1" >"$2" 2>"$2.err" || { cat "$2.err"; exit 1; }' sh "$dir" "$tmp/k8s-$overlay.yaml"; then
    continue
  fi
  validate "$overlay" "$tmp/k8s-$overlay.yaml"
  mkdir -p "$tmp/volumes-$overlay"
  step "$overlay: the manifests' essentials, locked by default" "${checker[@]}" k8s "$tmp/k8s-$overlay.yaml" \
    --name "$overlay" --source "$src" --help-file "$tmp/help.txt" "${serve_args[@]}" \
    --results "$src/bench/RESULTS.md" "${etcd_help[@]}" "${extra[@]}" "${secrets[@]}" \
    --env-out "$tmp/k8s-$overlay.env" --volumes-out "$tmp/volumes-$overlay" --uid-out "$tmp/k8s-uid" \
    --daemon-out "$tmp/k8s-$overlay.daemon.json"
  if ((serve_cli)) && [[ -s "$tmp/k8s-$overlay.env" ]]; then # needs serve
    # the shipped allowed_signers lists no key (serve refuses that: nothing could run); the
    # admin's step of README "Securing a pool", with a key of the test's own
    find "$tmp/volumes-$overlay" -name allowed_signers -exec sh -c 'cat "$1" >>"$2"' _ "$tmp/signer.line" {} \;
    run_serve "$overlay: ConfigMap + DaemonSet env (+ its Secret and ConfigMap volumes)" \
      "$tmp/k8s-$overlay.env" "$tmp/k8s-$overlay.env.argv"
  else
    skip "$overlay: starting the daemon with the ConfigMap + DaemonSet env (needs serve: serve_cli=0)"
  fi
done
# the example Job that submits a run to the default deployment's daemons
dir=$src/deploy/k8s/examples
# shellcheck disable=SC2016 # $1 and $2 are the inner shell's
if step "kubectl kustomize ${dir#"$src"/} renders" \
    sh -c 'kubectl kustomize "$1" >"$2" 2>"$2.err" || { cat "$2.err"; exit 1; }' sh "$dir" "$tmp/k8s-examples.yaml"; then
  validate "examples" "$tmp/k8s-examples.yaml"
  if [[ -s "$tmp/k8s-default.daemon.json" ]]; then
    step "examples: the submit Job and the daemons agree; it is locked too" "${checker[@]}" k8s-submit \
      "$tmp/k8s-examples.yaml" --daemon "$tmp/k8s-default.daemon.json" --help-file "$tmp/help.txt" \
      "${submit_args[@]}"
  else
    fail "examples: the submit Job (the daemons were not checked)"
  fi
fi

# ---------------------------------------------------------------------------------------------
section "Debian package (scripts/build-deb.sh)"
deb=""
if deb=$("$src/scripts/build-deb.sh" "$(dirname "$bin")" "$tmp/deb" 2>"$tmp/build-deb.err") && [[ -f "$deb" ]]; then
  pass "scripts/build-deb.sh builds $(basename "$deb")"
else
  indent <"$tmp/build-deb.err"
  fail "scripts/build-deb.sh builds a package"
  deb=""
fi
root=$tmp/root
if [[ -n "$deb" ]]; then
  arch=$(dpkg --print-architecture)
  verdict "file name $(basename "$deb") (want elastic-agent_${version}_${arch}.deb)" \
    [ "$(basename "$deb")" = "elastic-agent_${version}_${arch}.deb" ]
  field() { dpkg-deb -f "$deb" "$1"; }
  verdict "Package: $(field Package) (want elastic-agent)" [ "$(field Package)" = elastic-agent ]
  verdict "Version: $(field Version) (want $version, from --version)" [ "$(field Version)" = "$version" ]
  verdict "Architecture: $(field Architecture) (want $arch)" [ "$(field Architecture)" = "$arch" ]
  depends=$(field Depends)
  echo "      Depends: $depends"
  dep_names=" $(printf '%s\n' "${depends//[,|]/$'\n'}" | sed 's/(.*//; s/ //g' | tr '\n' ' ') "
  # every library the binary links (NEEDED) must come from a package named in Depends
  ldd "$bin" >"$tmp/ldd.txt" 2>&1
  if grep -q "not found" "$tmp/ldd.txt"; then fail "ldd: every library resolves"; fi
  while read -r soname; do
    path=$(awk -v s="$soname" '$1 == s && $2 == "=>" {print $3}' "$tmp/ldd.txt")
    pkg=""
    for p in "$path" "$(realpath "$path" 2>/dev/null)" "/usr$path" "${path#/usr}"; do
      [[ -n "$p" ]] || continue
      pkg=$(dpkg -S "$p" 2>/dev/null | head -1 | cut -d: -f1) && [[ -n "$pkg" ]] && break
    done
    if [[ -z "$pkg" ]]; then
      fail "Depends: $soname ($path) belongs to no Debian package"
    elif [[ "$dep_names" == *" $pkg "* ]]; then
      pass "Depends names $pkg (for $soname)"
    else
      fail "Depends names $pkg (for $soname)"
    fi
  done < <(readelf -d "$bin" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
  verdict "Depends has no -dev package" test "${dep_names//-dev /}" = "$dep_names"
  dpkg-deb -c "$deb" | awk '{print $NF}' | sed 's|^\./|/|' >"$tmp/contents.txt"
  for f in /usr/bin/elastic-agent /usr/sbin/elastic-agent-lifecycle-hook \
           /lib/systemd/system/elastic-agent@.service /lib/systemd/system/elastic-agent-lifecycle-hook.service \
           /lib/systemd/system/elastic-agent-serve.service \
           /usr/share/man/man1/elastic-agent.1.gz /usr/share/doc/elastic-agent/copyright \
           /usr/share/doc/elastic-agent/examples/example.env \
           /usr/share/doc/elastic-agent/examples/serve.env /etc/elastic-agent/; do
    verdict "contains $f" grep -qxF "$f" "$tmp/contents.txt"
  done
  dpkg-deb -I "$deb" >"$tmp/info.txt"
  for s in postinst prerm postrm; do
    verdict "maintainer script $s (executable)" grep -qE "^ +[0-9]+ bytes, +[0-9]+ lines +\* +$s " "$tmp/info.txt"
  done
  # install into a scratch root with its own dpkg database (--unpack: maintainer scripts are
  # exercised below with stubs, never run against this machine)
  mkdir -p "$root/var/lib/dpkg/info" "$root/var/lib/dpkg/updates" "$root/var/lib/dpkg/triggers"
  touch "$root/var/lib/dpkg/status" "$root/var/lib/dpkg/available"
  step "dpkg --root=<scratch> --unpack" dpkg --root="$root" --log=/dev/null --force-not-root \
    --force-depends --unpack "$deb"
  got=$("$root/usr/bin/elastic-agent" --version 2>&1)
  verdict "installed binary runs: $got" [ "$got" = "elastic-agent $version" ]
  if have man; then
    warnings=$(man --warnings -l "$root/usr/share/man/man1/elastic-agent.1.gz" 2>&1 >/dev/null)
    out=$(man -l "$root/usr/share/man/man1/elastic-agent.1.gz" 2>/dev/null)
    if [[ -z "$warnings" && "$out" == *"--stop-timeout"* ]]; then
      pass "man page renders without warnings and lists the options"
    else
      printf '%s\n' "$warnings" | indent
      fail "man page renders without warnings and lists the options"
    fi
  else
    skip "man page rendering (no man here)"
  fi
  # postinst with stubbed getent/adduser/systemctl: creates the user only when it is missing
  stubs=$tmp/stubs
  mkdir -p "$stubs"
  for s in adduser systemctl; do
    printf '#!/bin/sh\necho "%s $*" >>"%s/calls"\n' "$s" "$stubs" >"$stubs/$s"
  done
  # shellcheck disable=SC2016 # expanded by the stub
  printf '#!/bin/sh\nexit "${GETENT_RC:-2}"\n' >"$stubs/getent"
  chmod +x "$stubs"/*
  : >"$stubs/calls"
  PATH="$stubs:$PATH" GETENT_RC=2 sh "$root/var/lib/dpkg/info/elastic-agent.postinst" configure
  verdict "postinst configure creates the elastic-agent system user: $(tr '\n' ';' <"$stubs/calls")" \
    grep -q '^adduser --system .*elastic-agent$' "$stubs/calls"
  : >"$stubs/calls"
  PATH="$stubs:$PATH" GETENT_RC=0 sh "$root/var/lib/dpkg/info/elastic-agent.postinst" configure
  verdict "postinst keeps an existing elastic-agent user" test ! -s "$stubs/calls"
fi

# ---------------------------------------------------------------------------------------------
section "systemd"
unit=$src/deploy/systemd/elastic-agent@.service
serve_unit=$src/deploy/systemd/elastic-agent-serve.service
if [[ -n "$deb" ]] && [[ -d /lib/systemd/system ]]; then
  for u in elastic-agent@.service elastic-agent-serve.service elastic-agent-lifecycle-hook.service; do
    verdict "the package ships deploy/systemd/$u unchanged" \
      cmp -s "$src/deploy/systemd/$u" "$root/lib/systemd/system/$u"
  done
  # the host's targets, so that the unit's dependencies resolve inside the scratch root
  cp /lib/systemd/system/*.target "$root/lib/systemd/system/" 2>/dev/null
  mkdir -p "$root/etc/elastic-agent"
  cp "$src/deploy/systemd/example.env" "$root/etc/elastic-agent/job1.env"
  cp "$src/deploy/systemd/serve.env" "$root/etc/elastic-agent/serve.env"
  out=$(cd / && systemd-analyze verify --man=no --root="$root" elastic-agent@job1.service \
          elastic-agent-serve.service elastic-agent-lifecycle-hook.service 2>&1)
  rc=$?
  if ((rc == 0)) && [[ -z "$out" ]]; then
    pass "systemd-analyze verify elastic-agent@job1.service elastic-agent-serve.service elastic-agent-lifecycle-hook.service (in the package's root)"
  else
    printf '%s\n' "$out" | indent
    fail "systemd-analyze verify (exit $rc; any warning counts)"
  fi
else
  skip "systemd-analyze verify (no package or no /lib/systemd/system)"
fi
# the units' TLS and allowed-signers files, pointed at make-certs.sh's certificates (as the
# elastic-agent-daemon user) and an allowed_signers file here: the daemon loads them for real
cp "$src/deploy/k8s/base/allowed_signers" "$tmp/allowed_signers"
cat "$tmp/signer.line" >>"$tmp/allowed_signers"
tls_set=(--set "ELASTIC_CACERT=$tmp/certs/ca.crt" --set "ELASTIC_CERT=$tmp/certs/elastic-agent-daemon.crt"
         --set "ELASTIC_KEY=$tmp/certs/elastic-agent-daemon.key" --set "ELASTIC_ALLOWED_SIGNERS=$tmp/allowed_signers")
# the file backend (the one-shot runs below): no TLS
no_tls=(--set ELASTIC_CACERT= --set ELASTIC_CERT= --set ELASTIC_KEY=)
step "the unit's settings" "${checker[@]}" systemd "$unit" "$src/deploy/systemd/example.env" \
  --help-file "$tmp/help.txt"
step "the serve unit's settings" "${checker[@]}" systemd-serve "$serve_unit" \
  "$src/deploy/systemd/serve.env" --help-file "$tmp/help.txt" "${serve_args[@]}"
# needs serve: the serve unit's ExecStart line with serve.env (the store a closed loopback port)
if ((serve_cli)); then
  mkdir -p "$tmp/serve-rt"
  if "${checker[@]}" systemd-serve "$serve_unit" "$src/deploy/systemd/serve.env" \
       --help-file "$tmp/help.txt" "${serve_args[@]}" --argv-out "$tmp/serve.argv" --binary "$bin" \
       --runtime "$tmp/serve-rt" --state "$tmp/serve-rt" --set ELASTIC_RDZV_ENDPOINT=127.0.0.1:9 "${tls_set[@]}" \
       --set ELASTIC_HTTP=127.0.0.1:0 >/dev/null && [[ -s "$tmp/serve.argv" ]]; then
    tail -z -n +2 "$tmp/serve.argv" >"$tmp/serve.args"
    run_serve "serve.env + serve unit defaults" "$tmp/serve.argv.env" "$tmp/serve.args"
  else
    fail "cannot read the serve unit's ExecStart line"
  fi
else
  skip "starting the daemon with serve.env + the serve unit's defaults (needs serve: serve_cli=0)"
fi

# the unit's ExecStart line as systemd would run it (environment: the unit's Environment=, then
# the example env file, then the test's overrides), on the file backend in a scratch directory
rt=$tmp/run # %t
mkdir -p "$rt"
cat >"$tmp/worker.sh" <<'EOF'
#!/bin/sh
echo $$ >"$DEPLOY_TEST_PIDFILE"
echo "worker rank $RANK of $WORLD_SIZE"
[ "${1:-}" = sleep ] && exec sleep 1000
exit 0
EOF
chmod +x "$tmp/worker.sh"
# exec_start NAME [--set K=V...]: writes $tmp/NAME.argv and $tmp/NAME.argv.env
# (whether the unit's settings pass is reported above; this only needs the command line)
# Each run is its own instance NAME (run id NAME, preemption file in %t/elastic-agent/NAME/,
# --state-dir in its own %S), so that no run sees another's finished state.
exec_start() {
  local name=$1
  shift
  rm -f "$tmp/$name.argv"
  mkdir -p "$tmp/state-$name/elastic-agent" "$rt/elastic-agent/$name"
  "${checker[@]}" systemd "$unit" "$src/deploy/systemd/example.env" --help-file "$tmp/help.txt" \
    --argv-out "$tmp/$name.argv" --binary "$bin" --instance "$name" --runtime "$rt" \
    --state "$tmp/state-$name" --set ELASTIC_HTTP=127.0.0.1:0 --set "ELASTIC_RUN_ID=$name" "$@" >/dev/null
  [[ -s "$tmp/$name.argv" ]] || { fail "$name: cannot read the unit's ExecStart line"; return 1; }
}
# starts the ExecStart line in the background like systemd: the runtime directory exists while
# it runs and is removed when it exits; the exit status lands in $tmp/NAME.rc
start_unit() {
  local name=$1 envs argv
  mapfile -d '' envs <"$tmp/$name.argv.env"
  mapfile -d '' argv <"$tmp/$name.argv"
  rm -f "$tmp/pid"
  (
    env -i "${base_env[@]}" "${envs[@]}" "${argv[@]}" >"$tmp/$name.out" 2>&1 &
    echo $! >"$tmp/$name.mainpid"
    wait $!
    echo $? >"$tmp/$name.rc"
    rm -rf "${rt:?}/elastic-agent/$name"
  ) &
  bg_pids+=($!)
  unit_pid=$!
}
wait_for() { # FILE SECONDS
  local i
  for ((i = 0; i < $2 * 10; i++)); do [[ -s "$1" ]] && return 0; sleep 0.1; done
  return 1
}
run_overrides=("${no_tls[@]}" --set ELASTIC_RDZV_ENDPOINT= --set ELASTIC_MIN=1 --set ELASTIC_MAX=1
               --set ELASTIC_NPROC_PER_NODE=1 --set ELASTIC_STOP_TIMEOUT=5
               --set "DEPLOY_TEST_PIDFILE=$tmp/pid")

# the example env file's values (the store replaced by a closed loopback port); run_config runs
# $bin itself, so argv[0] (the binary) is dropped from the ExecStart line
if exec_start config --set ELASTIC_RDZV_ENDPOINT=127.0.0.1:9 --set ELASTIC_JOIN_TIMEOUT=0.3 "${tls_set[@]}" \
    --set ELASTIC_ALLOWED_SIGNERS=; then
  tail -z -n +2 "$tmp/config.argv" >"$tmp/config.args"
  run_config "example env file + unit defaults" "$tmp/config.argv.env" "$tmp/config.args"
  rm -rf "${rt:?}/elastic-agent/config" # as systemd does when the unit stops
fi

# 1. a job runs to success through ExecStart's `sh -c "exec ${WORKER_COMMAND}"`
if exec_start ok "${run_overrides[@]}" --set "WORKER_COMMAND=$tmp/worker.sh"; then
  start_unit ok
  wait "$unit_pid"
  if [[ "$(cat "$tmp/ok.rc" 2>/dev/null)" == 0 ]] && grep -q "worker rank 0 of 1" "$tmp/ok.out"; then
    pass "ExecStart: a one-node job runs WORKER_COMMAND and exits 0"
  else
    indent <"$tmp/ok.out"
    fail "ExecStart: a one-node job runs WORKER_COMMAND and exits 0 (exit $(cat "$tmp/ok.rc" 2>/dev/null))"
  fi
fi

# http_code PORT PATH: the HTTP status of GET PATH on the agent's --http port (000: no answer)
http_code() {
  curl -s -o /dev/null -m 2 -w '%{http_code}' "http://127.0.0.1:$1$2"
}
# 2. while the worker runs, the probes' endpoints answer 200 (when the agent has --http); then
#    KillMode=mixed: SIGTERM to the agent alone stops its workers, exit 143 (SuccessExitStatus)
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
if exec_start term "${run_overrides[@]}" --set "WORKER_COMMAND=$tmp/worker.sh sleep" \
    --set "ELASTIC_HTTP=127.0.0.1:$port"; then
  start_unit term
  if wait_for "$tmp/pid" 15; then
    worker=$(cat "$tmp/pid")
    if ((has_http)) && have curl; then
      for path in /healthz /readyz /metrics; do
        code=000
        for ((i = 0; i < 50; i++)); do
          code=$(http_code "$port" "$path")
          [[ "$code" == 200 ]] && break
          sleep 0.1
        done
        verdict "GET $path on the agent's --http port while its worker runs: $code" [ "$code" = 200 ]
      done
    else
      skip "probing /healthz and /readyz (no --http in this agent, or no curl)"
    fi
    t0=$SECONDS
    kill -TERM "$(cat "$tmp/term.mainpid")"
    wait "$unit_pid"
    rc=$(cat "$tmp/term.rc" 2>/dev/null)
    if [[ "$rc" == 143 ]] && ! kill -0 "$worker" 2>/dev/null && ((SECONDS - t0 <= 10)); then
      pass "KillMode=mixed: SIGTERM to the agent alone stops its worker and exits 143 in $((SECONDS - t0)) s"
    else
      indent <"$tmp/term.out"
      kill -0 "$worker" 2>/dev/null && { echo "      worker $worker still runs"; kill -KILL "$worker"; }
      fail "KillMode=mixed: SIGTERM to the agent alone stops its worker and exits 143 (exit $rc)"
    fi
  else
    indent <"$tmp/term.out"
    fail "KillMode=mixed: the worker did not start"
  fi
fi

# 3. the lifecycle hook's `leave`: preemption file -> graceful leave -> runtime directory gone
if exec_start hook "${run_overrides[@]}" --set "WORKER_COMMAND=$tmp/worker.sh sleep"; then
  start_unit hook
  if wait_for "$tmp/pid" 15; then
    worker=$(cat "$tmp/pid")
    out=$(AGENT_RUNTIME_ROOT="$rt/elastic-agent" LEAVE_TIMEOUT=20 SERVE_UNIT=deploy-test-none.service \
            timeout 30 "$src/deploy/cloud-init/elastic-agent-lifecycle-hook" leave 2>&1)
    hrc=$?
    wait "$unit_pid"
    rc=$(cat "$tmp/hook.rc" 2>/dev/null)
    printf '%s\n' "$out" | indent
    if ((hrc == 0)) && [[ "$rc" == 143 ]] && ! kill -0 "$worker" 2>/dev/null &&
       grep -q "preemption notice" "$tmp/hook.out" && [[ "$out" == *"every agent has left: hook"* ]]; then
      pass "elastic-agent-lifecycle-hook leave: the agent leaves on its preemption file, exit 143"
    else
      indent <"$tmp/hook.out"
      kill -0 "$worker" 2>/dev/null && kill -KILL "$worker"
      fail "elastic-agent-lifecycle-hook leave (hook exit $hrc, agent exit $rc)"
    fi
  else
    indent <"$tmp/hook.out"
    fail "lifecycle hook: the worker did not start"
  fi
fi

# 4. the lifecycle hook's `leave` and the node daemon: `systemctl stop` on its unit (SIGTERM, the
#    daemon leaves its run and exits 0), with systemctl stubbed: the unit is "active" until stopped
hstubs=$tmp/hook-stubs
mkdir -p "$hstubs" "$tmp/hook-empty"
cat >"$hstubs/systemctl" <<STUB
#!/bin/sh
echo "systemctl \$*" >>"$hstubs/calls"
case "\$1" in
  is-active) [ ! -e "$hstubs/stopped" ] ;;
  stop) touch "$hstubs/stopped" ;;
  *) exit 1 ;;
esac
STUB
chmod +x "$hstubs/systemctl"
: >"$hstubs/calls"
out=$(PATH="$hstubs:$PATH" AGENT_RUNTIME_ROOT="$tmp/hook-empty" LEAVE_TIMEOUT=5 \
        timeout 30 "$src/deploy/cloud-init/elastic-agent-lifecycle-hook" leave 2>&1)
hrc=$?
printf '%s\n' "$out" | indent
if ((hrc == 0)) && grep -qx "systemctl stop elastic-agent-serve.service" "$hstubs/calls"; then
  pass "elastic-agent-lifecycle-hook leave: systemctl stop elastic-agent-serve.service (the daemon leaves on SIGTERM)"
else
  indent <"$hstubs/calls"
  fail "elastic-agent-lifecycle-hook leave stops elastic-agent-serve.service (exit $hrc)"
fi

# ---------------------------------------------------------------------------------------------
section "cloud-init"
if step "user-data.yaml parses; its settings name real options and units" "${checker[@]}" cloudinit \
    "$src/deploy/cloud-init/user-data.yaml" --help-file "$tmp/help.txt" --out "$tmp/cloud-init" \
    --version "$version" "${serve_args[@]}" --unit elastic-agent-lifecycle-hook.service \
    --unit elastic-agent-serve.service --not-unit 'elastic-agent@'; then
  for f in "$tmp"/cloud-init/*; do
    step "shellcheck user-data: $(basename "$f")" shellcheck "$f"
  done
fi

# ---------------------------------------------------------------------------------------------
section "container image"
uid_arg=()
[[ -s "$tmp/k8s-uid" ]] && uid_arg=(--k8s-uid "$tmp/k8s-uid")
step "deploy/docker/Dockerfile (static)" "${checker[@]}" dockerfile "$src/deploy/docker/Dockerfile" \
  --context "$src" "${uid_arg[@]}"
if have hadolint; then
  step "hadolint deploy/docker/Dockerfile" hadolint "$src/deploy/docker/Dockerfile"
else
  skip "hadolint (not installed)"
fi
if have docker && docker info >/dev/null 2>&1 &&
   docker image inspect debian:bookworm debian:bookworm-slim >/dev/null 2>&1; then
  if step "docker build" docker build -q -f "$src/deploy/docker/Dockerfile" -t elastic-agent:deploy-test "$src"; then
    got=$(docker run --rm elastic-agent:deploy-test --version 2>&1)
    verdict "the image runs: $got" [ "$got" = "elastic-agent $version" ]
  fi
else
  skip "docker build: no container engine or no local debian:bookworm images here (Dockerfile checked statically)"
fi

# ---------------------------------------------------------------------------------------------
echo
echo "deploy: $npass passed, $nfail failed, $nskip skipped"
if ((nfail)); then
  printf '  failed: %s\n' "${failed[@]}"
  echo "deploy: FAIL"
  exit 1
fi
echo "deploy: PASS"
