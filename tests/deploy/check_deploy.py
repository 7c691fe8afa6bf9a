#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Static checks of deploy/: rendered Kubernetes manifests, the systemd unit, the cloud-init
user data and the Dockerfile. Driven by tests/deploy/test_deploy.sh; each subcommand prints one
line per check ("ok" or "FAIL") and exits 1 when any check failed.

The options the agent accepts come from `elastic-agent --help` (a file given on the command
line), so a manifest naming an option the binary does not have fails here. The node daemon's
(`elastic-agent serve`) and `elastic-agent submit`'s come from their --help when given
(--serve-help, --submit-help), else from the CLI contract of issue 23 (SERVE_FLAGS, SUBMIT_FLAGS).
"""
import argparse
import fnmatch
import json
import os
import re
import shlex
import sys

import yaml

import check_locked

failures = 0


def check(cond, what, why=""):
    global failures
    if cond:
        print(f"  ok    {what}")
    else:
        failures += 1
        print(f"  FAIL  {what}" + (f": {why}" if why else ""))
    return bool(cond)


def done():
    sys.exit(1 if failures else 0)


# ---------------------------------------------------------------------------------------------
# the agent's options, from --help

class Options:
    def __init__(self, help_file, label="elastic-agent --help"):
        self.label = label
        text = open(help_file).read()
        self.flags = {}  # flag -> default text or None
        for line in text.splitlines():
            m = re.match(r"^  --([a-z0-9-]+)(?: (\S+))?\s{2,}(.*)$", line)
            if m:
                d = re.search(r"\[default ([^\]]+)\]", m.group(3))
                self.flags[m.group(1)] = d.group(1) if d else None
        self.env = {"ELASTIC_" + f.upper().replace("-", "_"): f for f in self.flags}
        # not an option but read by the agent (--help names it)
        if "ELASTIC_ETCD_PASSWORD" in text:
            self.env["ELASTIC_ETCD_PASSWORD"] = None
        for f in ("help", "version"):
            self.env.pop("ELASTIC_" + f.upper(), None)

    def default(self, flag):
        return self.flags.get(flag)

    def check_names(self, names, where):
        for n in sorted(names):
            if not n.startswith("ELASTIC_"):
                continue
            flag = n[8:].lower().replace("_", "-")
            if n not in self.env and flag in PENDING_FLAGS:
                print(f"  info  {where}: {n}: --{flag} is not in `{self.label}` yet ({PENDING_FLAGS[flag]})")
                continue
            hint = " (--http comes with issue 12)" if n == "ELASTIC_HTTP" else ""
            check(n in self.env, f"{where}: {n} is an option of this elastic-agent",
                  f"`{self.label}` has no --{flag}{hint}")


# Options the deploy files may use before this binary's --help has them (none now: every name
# must be a real option, so that a misspelt one fails).
PENDING_FLAGS = {}


# `elastic-agent serve`'s options by issue 23's CLI contract, for a binary that has no `serve`
# yet. stop-timeout is not named there ("..."): the deploy files rely on the daemon stopping its
# workers with the node's --stop-timeout, as the one-shot form does.
SERVE_FLAGS = ["pool", "nproc-per-node", "node-id", "local-addr", "http", "rdzv-endpoint",
               "rdzv-backend", "prefix", "cacert", "cert", "key", "user", "password-file",
               "lease-ttl", "log-level", "log-format", "events", "log-dir", "preflight",
               "stop-timeout", "failure-domain"]
# `elastic-agent submit`'s own options; its run options are the one-shot form's (--help)
SUBMIT_FLAGS = ["run-id", "pool", "wait", "env"]
# what a run is made of: it belongs to `submit`, never to a daemon's configuration
RUN_VARS = ["ELASTIC_RUN_ID", "ELASTIC_RDZV_ID", "ELASTIC_MIN", "ELASTIC_MAX", "ELASTIC_NNODES",
            "ELASTIC_MAX_RESTARTS", "ELASTIC_JOIN_TIMEOUT", "WORKER_COMMAND"]


def serve_options(help_file, serve_help):
    """The daemon's options: `elastic-agent serve --help` when given, else the contract's."""
    if serve_help:
        return Options(serve_help, "elastic-agent serve --help")
    one_shot = Options(help_file)
    o = Options.__new__(Options)
    o.label = "issue 23's serve contract"
    o.flags = {f: one_shot.default(f) for f in SERVE_FLAGS}
    o.env = {"ELASTIC_" + f.upper().replace("-", "_"): f for f in SERVE_FLAGS}
    o.env["ELASTIC_ETCD_PASSWORD"] = None
    print("  info  serve options: issue 23's contract (no `elastic-agent serve --help` given)")
    return o


def submit_flags(help_file, submit_help):
    """`submit`'s flags: its --help when given, else its own ones plus the one-shot run options."""
    if submit_help:
        return set(Options(submit_help).flags)
    return set(SUBMIT_FLAGS) | set(Options(help_file).flags)


def check_no_run(names, where):
    for n in RUN_VARS:
        check(n not in names, f"{where}: no {n} (a run comes from `elastic-agent submit`)")


def seconds(v):
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def measured_rss_mb(results_md):
    """The agent's peak RSS with the etcd backend, from bench/RESULTS.md (MB)."""
    try:
        text = open(results_md).read()
    except OSError:
        return None
    m = re.search(r"agent peak RSS[^|]*\|\s*\**([0-9.]+) MB", text)
    return float(m.group(1)) if m else None


def quantity_bytes(q):
    m = re.fullmatch(r"([0-9.]+)([KMGTE]i?|[kmgte])?", str(q))
    if not m:
        return None
    mult = {None: 1, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "E": 1e18,
            "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Ei": 2**60}[m.group(2)]
    return float(m.group(1)) * mult


# ---------------------------------------------------------------------------------------------
# Kubernetes

def labels_match(selector, labels):
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def container_port(container, port):
    if isinstance(port, int):
        return port
    for p in container.get("ports", []):
        if p.get("name") == port:
            return p.get("containerPort")
    return None


def env_list_value(env, name):
    for e in env:
        if e.get("name") == name:
            return e
    return None


def cmd_k8s(a):
    opts = serve_options(a.help, a.serve_help)
    docs = [d for d in yaml.safe_load_all(open(a.rendered)) if d]
    kinds = {}
    for d in docs:
        kinds.setdefault(d["kind"], []).append(d)
    what = a.name

    # namespace
    nss = kinds.get("Namespace", [])
    check(len(nss) == 1, f"{what}: one Namespace")
    ns = nss[0]["metadata"]["name"] if nss else None
    for d in docs:
        if d["kind"] != "Namespace":
            got = d["metadata"].get("namespace")
            check(got == ns, f"{what}: {d['kind']}/{d['metadata']['name']} is in namespace {ns}",
                  f"namespace {got!r}")

    # etcd
    stss = [s for s in kinds.get("StatefulSet", [])
            if any("etcd" in c.get("image", "") for c in s["spec"]["template"]["spec"]["containers"])]
    if not check(len(stss) == 1, f"{what}: one etcd StatefulSet"):
        done()
    sts = stss[0]
    sname = sts["metadata"]["name"]
    replicas = sts["spec"].get("replicas", 1)
    check(replicas >= 3 and replicas % 2 == 1, f"{what}: etcd has an odd number >= 3 of members",
          f"replicas {replicas}")
    check(sts["spec"].get("podManagementPolicy") == "Parallel",
          f"{what}: etcd members start in parallel (no quorum before all exist)")
    tmpl = sts["spec"]["template"]
    plabels = tmpl["metadata"].get("labels", {})
    check(labels_match(sts["spec"]["selector"]["matchLabels"], plabels),
          f"{what}: etcd selector matches its pods")
    check(tmpl["spec"].get("enableServiceLinks") is False,
          f"{what}: etcd pods get no *_SERVICE_* variables (etcd reads ETCD_* as configuration)")
    headless = [s for s in kinds.get("Service", []) if s["metadata"]["name"] == sts["spec"].get("serviceName")]
    if not check(len(headless) == 1, f"{what}: the StatefulSet's serviceName is a rendered Service"):
        done()
    hsvc = headless[0]
    hname = hsvc["metadata"]["name"]
    check(hsvc["spec"].get("clusterIP") == "None", f"{what}: Service {hname} is headless")
    check(hsvc["spec"].get("publishNotReadyAddresses") is True,
          f"{what}: Service {hname} publishes members before they are ready (bootstrap)")
    check(labels_match(hsvc["spec"].get("selector"), plabels), f"{what}: Service {hname} selects the etcd pods")
    hports = {p.get("name"): p for p in hsvc["spec"].get("ports", [])}
    check("client" in hports and "peer" in hports, f"{what}: Service {hname} has client and peer ports")
    client_port = hports.get("client", {}).get("port")
    peer_port = hports.get("peer", {}).get("port")
    clients = [s for s in kinds.get("Service", []) if s is not hsvc
               and s["spec"].get("clusterIP") != "None"
               and labels_match(s["spec"].get("selector"), plabels)]
    check(len(clients) == 1 and any(p.get("port") == client_port for p in clients[0]["spec"]["ports"]),
          f"{what}: a client Service for the etcd members on port {client_port}")
    ec = tmpl["spec"]["containers"][0]
    check(container_port(ec, hports.get("client", {}).get("targetPort", client_port)) == client_port,
          f"{what}: the client port is etcd's client containerPort")
    eenv = {e["name"]: e.get("value") for e in ec.get("env", [])}
    member = lambda i: f"{sname}-{i}"  # noqa: E731
    want_cluster = {member(i): f"{member(i)}.{hname}" for i in range(replicas)}
    got_cluster = {}
    for item in (eenv.get("ETCD_INITIAL_CLUSTER") or "").split(","):
        m = re.fullmatch(r"([^=]+)=https?://([^:]+):(\d+)", item)
        if m:
            got_cluster[m.group(1)] = m.group(2)
            check(int(m.group(3)) == peer_port, f"{what}: ETCD_INITIAL_CLUSTER {m.group(1)} uses the peer port")
    check(got_cluster == want_cluster,
          f"{what}: ETCD_INITIAL_CLUSTER names the {replicas} members <StatefulSet>-<i>.<headless Service>",
          f"got {got_cluster}, want {want_cluster}")
    pod_name = env_list_value(ec.get("env", []), "POD_NAME")
    check(pod_name and pod_name.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") == "metadata.name",
          f"{what}: etcd's POD_NAME comes from metadata.name")
    check(eenv.get("ETCD_NAME") == "$(POD_NAME)", f"{what}: etcd member name is the pod name")
    for var, port in (("ETCD_INITIAL_ADVERTISE_PEER_URLS", peer_port), ("ETCD_ADVERTISE_CLIENT_URLS", client_port)):
        check(re.fullmatch(rf"https?://\$\(POD_NAME\)\.{re.escape(hname)}:{port}", eenv.get(var) or ""),
              f"{what}: {var} is the member's own name in Service {hname}", repr(eenv.get(var)))
    check("readinessProbe" in ec and "livenessProbe" in ec, f"{what}: etcd has readiness and liveness probes")
    data_dir = eenv.get("ETCD_DATA_DIR", "")
    vct = [v["metadata"]["name"] for v in sts["spec"].get("volumeClaimTemplates", [])]
    mounted = [m for m in ec.get("volumeMounts", []) if m["name"] in vct
               and (data_dir + "/").startswith(m["mountPath"].rstrip("/") + "/")]
    check(mounted, f"{what}: etcd's data dir {data_dir} is on a persistent volume claim")
    if a.etcd_help:
        flags = set(re.findall(r"--([a-z0-9-]+)", open(a.etcd_help).read()))
        for var in sorted(eenv):
            if var.startswith("ETCD_"):
                flag = var[5:].lower().replace("_", "-")
                check(flag in flags, f"{what}: {var} is an etcd option (--{flag})")
    pdbs = [p for p in kinds.get("PodDisruptionBudget", [])
            if labels_match(p["spec"].get("selector", {}).get("matchLabels"), plabels)]
    quorum = replicas // 2 + 1
    if check(len(pdbs) == 1, f"{what}: a PodDisruptionBudget covers the etcd pods"):
        spec = pdbs[0]["spec"]
        ok = ("minAvailable" in spec and int(spec["minAvailable"]) >= quorum) or \
             ("maxUnavailable" in spec and int(spec["maxUnavailable"]) <= replicas - quorum)
        check(ok, f"{what}: the PodDisruptionBudget keeps a quorum ({quorum} of {replicas})", str(spec))

    # the agent
    dss = kinds.get("DaemonSet", [])
    if not check(len(dss) == 1, f"{what}: one agent DaemonSet"):
        done()
    ds = dss[0]
    pod = ds["spec"]["template"]["spec"]
    c = pod["containers"][0]
    env = c.get("env", [])
    cms = {cm["metadata"]["name"]: cm for cm in kinds.get("ConfigMap", [])}
    merged = {}
    for ef in c.get("envFrom", []):
        ref = ef.get("configMapRef", {}).get("name")
        if check(ref in cms, f"{what}: envFrom ConfigMap {ref} is rendered (with its hash suffix)"):
            merged.update(cms[ref].get("data", {}))
    opts.check_names(merged, f"{what} ConfigMap")
    check("ELASTIC_NODE_ID" not in merged, f"{what}: the ConfigMap does not give every node one node id")
    check_no_run(merged, f"{what} ConfigMap")
    check(merged.get("ELASTIC_POOL"), f"{what}: the ConfigMap names the daemons' pool (ELASTIC_POOL)")
    opts.check_names([e["name"] for e in env], f"{what} DaemonSet env")
    literal = {e["name"]: e.get("value") for e in env if "value" in e}
    merged.update(literal)
    node_id = env_list_value(env, "ELASTIC_NODE_ID")
    check(node_id and node_id.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") == "spec.nodeName",
          f"{what}: ELASTIC_NODE_ID comes from the downward API (spec.nodeName)")
    # issue 41: the failure domain from the node's zone label (copied onto the pod at binding)
    dom = env_list_value(env, "ELASTIC_FAILURE_DOMAIN")
    check(dom and dom.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath")
          == "metadata.labels['topology.kubernetes.io/zone']",
          f"{what}: ELASTIC_FAILURE_DOMAIN comes from the downward API (the node's zone label)")
    check_no_run([e["name"] for e in env], f"{what} DaemonSet env")
    check(not c.get("command") and c.get("args") == ["serve"],
          f"{what}: the container runs `elastic-agent serve` (args [serve], no run command)",
          f"command {c.get('command')!r}, args {c.get('args')!r}")

    # store endpoints: every member of the StatefulSet, through the headless Service
    eps = (merged.get("ELASTIC_RDZV_ENDPOINT") or "").split(",")
    hosts = []
    for ep in eps:
        m = re.fullmatch(r"([A-Za-z0-9.-]+):(\d+)", ep)
        if check(m, f"{what}: endpoint {ep!r} is host:port (the gRPC etcd backend)"):
            hosts.append(m.group(1))
            check(int(m.group(2)) == client_port, f"{what}: endpoint {ep} uses the etcd client port {client_port}")
    suffixes = ("", f".{ns}", f".{ns}.svc", f".{ns}.svc.cluster.local")
    norm = []
    for h in hosts:
        for s in sorted(suffixes, key=len, reverse=True):
            if s and h.endswith(s):
                h = h[:-len(s)]
                break
        norm.append(h)
    want = [f"{member(i)}.{hname}" for i in range(replicas)]
    check(sorted(norm) == sorted(want),
          f"{what}: ELASTIC_RDZV_ENDPOINT lists the {replicas} etcd members (<StatefulSet>-<i>.<headless Service>)",
          f"got {hosts}, want {want}")
    backend = merged.get("ELASTIC_RDZV_BACKEND")
    check(backend in (None, "", "etcd"), f"{what}: the backend is etcd", repr(backend))

    # health endpoint and probes
    http = merged.get("ELASTIC_HTTP", "")
    m = re.fullmatch(r"(.*):(\d+)", http)
    check(m and m.group(1) not in ("127.0.0.1", "localhost", "::1", "[::1]"),
          f"{what}: ELASTIC_HTTP listens on the pod's address (the kubelet probes the pod IP)", repr(http))
    http_port = int(m.group(2)) if m else None
    # an idle daemon is ready (/readyz says whether workers run: not a probe for a daemon)
    probes = [("livenessProbe", "/healthz"), ("readinessProbe", "/healthz")]
    if "startupProbe" in c:
        probes.append(("startupProbe", "/healthz"))
    for probe, path in probes:
        p = c.get(probe, {}).get("httpGet", {})
        check(p.get("path") == path, f"{what}: {probe} is GET {path}", repr(p.get("path")))
        check(http_port is not None and container_port(c, p.get("port")) == http_port,
              f"{what}: {probe} uses the --http port {http_port}", repr(p.get("port")))

    # stopping
    stop = seconds(merged.get("ELASTIC_STOP_TIMEOUT") or opts.default("stop-timeout"))
    grace = pod.get("terminationGracePeriodSeconds", 30)
    check(stop is not None and grace >= stop + 15,
          f"{what}: terminationGracePeriodSeconds {grace} >= --stop-timeout {stop} + 15 s to leave the run")
    check(not c.get("lifecycle", {}).get("preStop"), f"{what}: no preStop hook (SIGTERM itself is the graceful leave)")
    ru = ds["spec"].get("updateStrategy", {})
    check(ru.get("type") == "OnDelete" or str(ru.get("rollingUpdate", {}).get("maxUnavailable")) == "100%",
          f"{what}: an update replaces every daemon at once (one restart of a run, not one per node)")
    check(pod.get("restartPolicy", "Always") == "Always", f"{what}: the daemon's pod restarts only on failure of the daemon")
    check(pod.get("enableServiceLinks") is False, f"{what}: no *_SERVICE_* variables in the workers' environment")

    # resources: the agent's own footprint (bench/RESULTS.md)
    req = c.get("resources", {}).get("requests", {})
    lim = c.get("resources", {}).get("limits", {})
    rss = measured_rss_mb(a.results) if a.results else None
    mem = quantity_bytes(req.get("memory", "0"))
    if check(rss is not None, f"{what}: the agent's measured peak RSS is in bench/RESULTS.md ({rss} MB)"):
        check(mem is not None and mem >= 1.5 * rss * 1e6,
              f"{what}: memory request {req.get('memory')} >= 1.5 x measured peak RSS {rss} MB")
    check("cpu" in req, f"{what}: a CPU request")
    if "memory" in lim:
        check(quantity_bytes(lim["memory"]) >= (mem or 0) and quantity_bytes(lim["memory"]) >= 2**30,
              f"{what}: the memory limit {lim['memory']} leaves room for the workers")
    sc = pod.get("securityContext", {})
    print(f"  info  {what}: runAsUser {sc.get('runAsUser')}")
    if a.uid_out:
        open(a.uid_out, "w").write(str(sc.get("runAsUser", "")))

    if a.gpu:
        check(pod.get("nodeSelector"), f"{what}: a GPU node selector")
        check(any(t.get("key") == "nvidia.com/gpu" for t in pod.get("tolerations", [])),
              f"{what}: tolerates the nvidia.com/gpu taint")
        gpus = lim.get("nvidia.com/gpu")
        check(gpus is not None and str(gpus) == str(merged.get("ELASTIC_NPROC_PER_NODE")),
              f"{what}: one worker per GPU (nvidia.com/gpu {gpus} = ELASTIC_NPROC_PER_NODE "
              f"{merged.get('ELASTIC_NPROC_PER_NODE')})")

    # locked by default: TLS, identities, roles, NetworkPolicies, Pod Security (check_locked.py)
    secrets = check_locked.load_secrets(yaml.safe_load_all(open(a.secrets))) if a.secrets else {}
    tmpdir = a.volumes_out or os.path.dirname(os.path.abspath(a.rendered))
    locked = check_locked.check_k8s(check, kinds, what, ds, sts, cms, secrets,
                                    os.path.join(a.source, "deploy/k8s/base"), tmpdir)

    # an environment to run the agent with, for test_deploy.sh: fieldRefs filled in, the store
    # replaced by a closed loopback port (nothing leaves the machine), HTTP on loopback; the
    # Secret and ConfigMap volumes written under --volumes-out, and paths into them remapped
    if a.env_out:
        mapping = {}
        if a.volumes_out:
            mapping = check_locked.materialize(pod, c, cms, secrets, a.volumes_out)
        run = {k: check_locked.remap(v, mapping) for k, v in merged.items() if v is not None}
        run.update({"ELASTIC_NODE_ID": "node-a", "ELASTIC_LOCAL_ADDR": "127.0.0.1",
                    "ELASTIC_FAILURE_DOMAIN": "us-east-1a",
                    "ELASTIC_RDZV_ENDPOINT": a.closed_endpoint})
        if "ELASTIC_HTTP" in run:
            run["ELASTIC_HTTP"] = "127.0.0.1:0"  # the value's form is checked above; any free port
        with open(a.env_out, "w") as f:
            f.write("".join(f"{k}={v}\0" for k, v in run.items()))
        with open(a.env_out + ".argv", "w") as f:
            f.write("".join(f"{x}\0" for x in c.get("args", [])))
    if a.daemon_out:
        json.dump({"namespace": ns, "image": c.get("image"), "pool": merged.get("ELASTIC_POOL"),
                   "endpoint": merged.get("ELASTIC_RDZV_ENDPOINT"), "uid": sc.get("runAsUser"),
                   "cacert": merged.get("ELASTIC_CACERT"), "locked": locked},
                  open(a.daemon_out, "w"))
    done()


def cmd_k8s_submit(a):
    """deploy/k8s/examples rendered: a Job running `elastic-agent submit --wait` for the daemons
    of the base (their facts from `k8s --daemon-out`)."""
    daemon = json.load(open(a.daemon))
    flags = submit_flags(a.help, a.submit_help)
    docs = [d for d in yaml.safe_load_all(open(a.rendered)) if d]
    jobs = [d for d in docs if d["kind"] == "Job"]
    if not check(len(jobs) == 1, "examples: one Job"):
        done()
    job = jobs[0]
    name = job["metadata"]["name"]
    check(job["metadata"].get("namespace") == daemon["namespace"],
          f"Job {name} is in the daemons' namespace {daemon['namespace']} (their etcd's short names resolve)")
    pod = job["spec"]["template"]["spec"]
    check(pod.get("restartPolicy") == "Never" and job["spec"].get("backoffLimit") == 0,
          f"Job {name}: no retry (a second submit of the same run id): restartPolicy Never, backoffLimit 0")
    c = pod["containers"][0]
    check(c.get("image") == daemon["image"], f"Job {name} uses the daemons' image {daemon['image']}",
          repr(c.get("image")))
    check(pod.get("securityContext", {}).get("runAsUser") == daemon["uid"],
          f"Job {name} runs as the image's user {daemon['uid']}")
    args = [str(x) for x in c.get("args") or []]
    check(not c.get("command") and args[:1] == ["submit"], f"Job {name} runs `elastic-agent submit`", repr(args[:1]))
    if not check("--" in args, f"Job {name}: '--' before the run's command"):
        done()
    opts, cmd = args[1:args.index("--")], args[args.index("--") + 1:]
    check(cmd, f"Job {name}: a command after '--'")
    given = {}
    i = 0
    while i < len(opts):
        flag, eq, val = opts[i][2:].partition("=")
        if check(opts[i].startswith("--") and flag in flags, f"Job {name}: {opts[i]} is an option of submit"):
            if not eq and flag != "wait" and i + 1 < len(opts) and not opts[i + 1].startswith("--"):
                val = opts[i + 1]
                i += 1
        given[flag] = val
        i += 1
    check("run-id" in given and given["run-id"], f"Job {name}: --run-id")
    check("wait" in given, f"Job {name}: --wait (the Job ends with the run, exit 0 when it succeeded)")
    env = {e["name"]: e.get("value") for e in c.get("env", [])}
    for n in env:
        if n.startswith("ELASTIC_"):
            f = n[8:].lower().replace("_", "-")
            if f not in flags and f in PENDING_FLAGS:
                print(f"  info  Job {name}: {n}: --{f} is not in submit's --help yet ({PENDING_FLAGS[f]})")
                continue
            check(f in flags, f"Job {name}: {n} is an option of submit")
    pool = given.get("pool") or env.get("ELASTIC_POOL") or "default"
    check(pool == daemon["pool"], f"Job {name} submits to the daemons' pool {daemon['pool']!r}", repr(pool))
    ep = given.get("rdzv-endpoint") or env.get("ELASTIC_RDZV_ENDPOINT")
    check(ep == daemon["endpoint"], f"Job {name} uses the daemons' store {daemon['endpoint']}", repr(ep))

    # locked: Pod Security, mutual TLS as etcd user elastic-agent-submit, admitted to etcd:2379
    locked = daemon["locked"]
    bad = check_locked.restricted_violations(pod)
    check(not bad, f"Job {name} meets Pod Security `restricted`", "; ".join(bad))
    sec = check_locked.secret_of(check, f"Job {name}", pod, c, [env.get(v) for v in
                                 ("ELASTIC_CACERT", "ELASTIC_CERT", "ELASTIC_KEY")], "ELASTIC_CACERT/CERT/KEY")
    cn = locked["certs"].get(sec, {}).get("cn")
    check(cn == check_locked.USERS["submit"], f"Job {name}: Secret {sec}'s CN is {check_locked.USERS['submit']}",
          repr(cn))
    labels = job["spec"]["template"]["metadata"].get("labels", {})
    check(check_locked.ingress_allowed(locked["policies"], locked["etcd_labels"], check_locked.CLIENT_PORT,
                                       locked["etcd_named_ports"], labels, locked["ns_labels"], True),
          f"Job {name}'s pods are admitted to etcd:{check_locked.CLIENT_PORT} by the NetworkPolicies")
    done()


# ---------------------------------------------------------------------------------------------
# systemd

def parse_unit(path):
    sections, cur = {}, None
    for raw in open(path):
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("["):
            cur = sections.setdefault(line.strip("[]"), {})
            continue
        k, _, v = line.partition("=")
        cur.setdefault(k.strip(), []).append(v.strip())
    return sections


def parse_env_file(path):
    env = {}
    for raw in open(path):
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        k, _, v = line.partition("=")
        v = v.strip()
        if len(v) >= 2 and v[0] == v[-1] and v[0] in "'\"":
            v = v[1:-1]
        env[k.strip()] = v
    return env


def unit_seconds(v):
    total, m = 0.0, None
    for m in re.finditer(r"([0-9.]+)\s*(ms|s|min|m|h)?", v):
        total += float(m.group(1)) * {"ms": 0.001, None: 1, "s": 1, "min": 60, "m": 60, "h": 3600}[m.group(2)]
    return total if m else None


def unit_env(path, env_path):
    """A unit's [Service] section, its Environment= defaults and its example env file."""
    u = parse_unit(path)
    svc = u.get("Service", {})
    env_defaults = {}
    for e in svc.get("Environment", []):
        for item in shlex.split(e):
            k, _, v = item.partition("=")
            env_defaults[k] = v
    return u, svc, env_defaults, parse_env_file(env_path)


def check_stop_and_hardening(u, svc, env_defaults, envfile, opts):
    """What both units share: SIGTERM to the agent alone, time to leave, workers keep working."""
    one = lambda k: (svc.get(k) or [None])[-1]  # noqa: E731
    check(one("KillMode") == "mixed",
          "KillMode=mixed: SIGTERM to the agent only, it stops its workers itself", repr(one("KillMode")))
    check(one("KillSignal") in (None, "SIGTERM", "TERM"), "the stop signal is SIGTERM (graceful leave)")
    worst = max(seconds(envfile.get("ELASTIC_STOP_TIMEOUT")) or 0,
                seconds(env_defaults.get("ELASTIC_STOP_TIMEOUT")) or 0,
                seconds(opts.default("stop-timeout")) or 0)
    tss = unit_seconds(one("TimeoutStopSec") or "90")
    check(tss is not None and tss >= worst + 15,
          f"TimeoutStopSec {one('TimeoutStopSec')} >= --stop-timeout {worst} + 15 s to leave the run")
    check(u.get("Unit", {}).get("StartLimitIntervalSec") and u.get("Unit", {}).get("StartLimitBurst"),
          "restarts are rate limited")
    check(one("OOMPolicy") == "continue", "a worker killed by the OOM killer does not stop the service")
    bad = {"PrivateDevices": "hides /dev/nvidia*", "MemoryDenyWriteExecute": "breaks JIT compilers",
           "ProtectHome": "hides datasets and checkpoints", "DynamicUser": "implies ProtectHome",
           "PrivateNetwork": "no network for NCCL", "RestrictAddressFamilies": "NCCL uses netlink",
           "SystemCallFilter": "arbitrary workers", "PrivateUsers": "breaks device access",
           "ProtectProc": "workers inspect /proc", "ProtectSystem=strict": "workers write anywhere",
           "ProtectClock": "implies DeviceAllow=char-rtc: closes /dev/nvidia*",
           "DeviceAllow": "closes every device not listed", "DevicePolicy": "closes devices"}
    for k, why in bad.items():
        key, _, val = k.partition("=")
        v = one(key)
        set_ = v is not None and v.lower() not in ("no", "false", "0", "", "auto") and (not val or v == val)
        check(not set_, f"hardening keeps workers working: no {k} ({why})", f"{key}={v}")
    check(one("NoNewPrivileges") == "yes", "NoNewPrivileges=yes")


def check_locked_env(env, where, signers):
    """A daemon's (or one-shot agent's) settings are locked: mutual TLS to etcd with files under
    /etc/elastic-agent/, and (signers) the allowed-signers file."""
    names = ["ELASTIC_CACERT", "ELASTIC_CERT", "ELASTIC_KEY"] + (["ELASTIC_ALLOWED_SIGNERS"] if signers else [])
    for n in names:
        v = env.get(n) or ""
        check(v.startswith("/etc/elastic-agent/"), f"{where}: {n} is set (a file under /etc/elastic-agent/)",
              repr(v))
    check(not env.get("ELASTIC_ETCD_PASSWORD"), f"{where}: no password in the environment")


def write_exec_start(a, argv, env_defaults, envfile):
    """The ExecStart line as systemd would run it, with its environment, for test_deploy.sh."""
    spec = {"%i": a.instance, "%I": a.instance, "%t": a.runtime, "%S": a.state}
    env = {}
    for k, v in list(env_defaults.items()) + list(envfile.items()):
        for s_, r in spec.items():
            v = v.replace(s_, r or "")
        env[k] = v
    for kv in a.set or []:
        k, _, v = kv.partition("=")
        if v:
            env[k] = v
        else:
            env.pop(k, None)
    out = []
    for x in argv:
        for s_, r in spec.items():
            x = x.replace(s_, r or "")
        x = re.sub(r"\$\{(\w+)\}", lambda m: env.get(m.group(1), ""), x)
        out.append(x)
    out[0] = a.binary
    with open(a.argv_out, "w") as f:
        f.write("".join(f"{x}\0" for x in out))
    with open(a.argv_out + ".env", "w") as f:
        f.write("".join(f"{k}={v}\0" for k, v in env.items()))


def cmd_systemd(a):
    opts = Options(a.help)
    u, svc, env_defaults, envfile = unit_env(a.unit, a.env)
    one = lambda k: (svc.get(k) or [None])[-1]  # noqa: E731
    opts.check_names(env_defaults, "unit Environment=")
    opts.check_names(envfile, "example env file")
    check(any(f.lstrip("-").endswith("/%i.env") and f.startswith("/etc/elastic-agent/")
              for f in svc.get("EnvironmentFile", [])), "the unit reads /etc/elastic-agent/%i.env")
    check_stop_and_hardening(u, svc, env_defaults, envfile, opts)
    check(one("Restart") == "on-failure", "Restart=on-failure", repr(one("Restart")))
    prevent = set((one("RestartPreventExitStatus") or "").split())
    check({"1", "2", "4"} <= prevent,
          "no restart when the run is over or misconfigured (exit 1, 2, 4)", f"RestartPreventExitStatus={prevent}")
    check("143" in (one("SuccessExitStatus") or "").split(),
          "exit 143 after SIGTERM counts as a clean stop (no restart after a preemption leave)")
    state_dir = env_defaults.get("ELASTIC_STATE_DIR", "")
    if one("PrivateTmp") == "yes":
        check(state_dir and not state_dir.startswith("/tmp"),
              "with PrivateTmp, the file backend's --state-dir is outside /tmp (instances share it)", state_dir)
    pf = env_defaults.get("ELASTIC_PREEMPTION_FILE", "")
    rtd = (one("RuntimeDirectory") or "").split()
    check(pf and any(pf.startswith(f"%t/{d}/") for d in rtd),
          "the preemption file is in the instance's RuntimeDirectory (gone when it stops)", pf)
    execs = svc.get("ExecStart", [])
    check(len(execs) == 1, "one ExecStart")
    argv = shlex.split(execs[0].lstrip("-@:+!"))
    check(argv[0] == "/usr/bin/elastic-agent", "ExecStart runs /usr/bin/elastic-agent (the package's path)")
    check("--" in argv, "ExecStart ends the options with '--' before the worker command")
    check("WORKER_COMMAND" in envfile, "the example env file sets WORKER_COMMAND")
    check_locked_env({**env_defaults, **envfile}, "unit + example env file", signers=False)

    if a.argv_out:
        write_exec_start(a, argv, env_defaults, envfile)
    done()


def cmd_systemd_serve(a):
    """elastic-agent-serve.service and its example env file (serve.env)."""
    opts = serve_options(a.help, a.serve_help)
    u, svc, env_defaults, envfile = unit_env(a.unit, a.env)
    one = lambda k: (svc.get(k) or [None])[-1]  # noqa: E731
    opts.check_names(env_defaults, "serve unit Environment=")
    opts.check_names(envfile, "serve.env")
    check_no_run(set(env_defaults) | set(envfile), "serve unit and serve.env")
    check(envfile.get("ELASTIC_POOL") and envfile.get("ELASTIC_RDZV_ENDPOINT"),
          "serve.env names the pool and the store (ELASTIC_POOL, ELASTIC_RDZV_ENDPOINT)")
    check(svc.get("EnvironmentFile") == ["/etc/elastic-agent/serve.env"],
          "the unit reads /etc/elastic-agent/serve.env (required: a daemon without its store is an error)",
          repr(svc.get("EnvironmentFile")))
    execs = svc.get("ExecStart", [])
    check(len(execs) == 1, "one ExecStart")
    argv = shlex.split(execs[0].lstrip("-@:+!")) if execs else [""]
    check(argv == ["/usr/bin/elastic-agent", "serve"],
          "ExecStart is `/usr/bin/elastic-agent serve` (the package's path; no run command)", repr(argv))
    check_stop_and_hardening(u, svc, env_defaults, envfile, opts)
    check_locked_env({**env_defaults, **envfile}, "serve unit + serve.env", signers=True)
    check(env_defaults.get("ELASTIC_ALLOWED_SIGNERS"),
          "the serve unit itself sets ELASTIC_ALLOWED_SIGNERS (signed specs only, whatever serve.env says)")
    # a daemon: the end of a run is no reason to stop, any exit of its own is one to start again
    check(one("Restart") == "always", "Restart=always (the daemon outlives its runs)", repr(one("Restart")))
    prevent = set((one("RestartPreventExitStatus") or "").split())
    check(prevent == {"2"}, "only a configuration error (exit 2) prevents a restart",
          f"RestartPreventExitStatus={prevent}")
    check(not any(d.startswith("elastic-agent/") for d in (one("RuntimeDirectory") or "").split()),
          "no RuntimeDirectory under /run/elastic-agent/ (the lifecycle hook would take it for an "
          "elastic-agent@ instance; it stops the daemon with systemctl instead)")
    if a.argv_out:
        write_exec_start(a, argv, env_defaults, envfile)
    done()


# ---------------------------------------------------------------------------------------------
# cloud-init

CLOUD_CONFIG_KEYS = {
    "packages", "package_update", "package_upgrade", "write_files", "runcmd", "bootcmd", "users",
    "groups", "apt", "ntp", "timezone", "hostname", "fqdn", "mounts", "disk_setup", "fs_setup",
    "final_message", "power_state", "ssh_authorized_keys", "ssh_pwauth", "ca_certs", "swap",
    "manage_etc_hosts", "preserve_hostname", "locale", "growpart", "resize_rootfs",
}


def cmd_cloudinit(a):
    opts = serve_options(a.help, a.serve_help)
    text = open(a.user_data).read()
    check(text.startswith("#cloud-config\n"), "user data starts with #cloud-config")
    try:
        d = yaml.safe_load(text)
    except yaml.YAMLError as e:
        check(False, "user data parses as YAML", str(e))
        done()
    check(isinstance(d, dict), "user data parses as a YAML mapping")
    unknown = set(d) - CLOUD_CONFIG_KEYS
    check(not unknown, "every top-level key is a cloud-init module", str(unknown))
    scripts = {}
    for i, f in enumerate(d.get("write_files", [])):
        check(isinstance(f, dict) and f.get("path", "").startswith("/") and "content" in f,
              f"write_files[{i}] has an absolute path and content")
        perm = str(f.get("permissions", "0644"))
        check(re.fullmatch(r"0[0-7]{3}", perm), f"write_files[{i}] permissions {perm!r} is an octal string")
        if f.get("content", "").startswith("#!"):
            check(perm in ("0755", "0750", "0700"), f"{f['path']} is executable")
            scripts[f["path"]] = f["content"]
    os.makedirs(a.out, exist_ok=True)
    for n, (path, content) in enumerate(scripts.items()):
        with open(os.path.join(a.out, f"write_files-{n}-{os.path.basename(path)}"), "w") as fh:
            fh.write(content)
    cmds = []
    for c in d.get("runcmd", []):
        cmds.append(" ".join(shlex.quote(x) for x in c) if isinstance(c, list) else c)
        first = c[0] if isinstance(c, list) else shlex.split(c)[0]
        if first.startswith("/usr/local/"):
            check(first in scripts, f"runcmd runs {first}, which write_files creates")
    with open(os.path.join(a.out, "runcmd.sh"), "w") as fh:
        fh.write("#!/bin/sh\n" + "\n".join(cmds) + "\n")
    body = "\n".join(scripts.values())
    names = set(re.findall(r"^\s*(ELASTIC_[A-Z_]+)=", body, re.M))
    check(names, "the bootstrap writes ELASTIC_* options")
    opts.check_names(names, "cloud-init env file")
    check("ELASTIC_NODE_ID" in names and re.search(r"instance.id", body),
          "the node id comes from the instance id")
    for need in ("ELASTIC_POOL", "ELASTIC_RDZV_ENDPOINT"):
        check(need in names, f"the env file sets {need}")
    check_no_run(set(names) | set(re.findall(r"^\s*([A-Z_]+)=", body, re.M)), "cloud-init")
    serve_env = dict(re.findall(r"^\s*(ELASTIC_[A-Z_]+)=(\S*)", body, re.M))
    for n in ("ELASTIC_CACERT", "ELASTIC_CERT", "ELASTIC_KEY", "ELASTIC_ALLOWED_SIGNERS"):
        check(serve_env.get(n), f"locked: the bootstrap sets {n}", repr(serve_env.get(n)))
    key = serve_env.get("ELASTIC_KEY", "").replace("$TLS_DIR", "")
    start = body.find("systemctl enable")
    check(key and re.search(r'\[\[ ! -s "\$f" \]\]', body) and 0 <= body.find(key) < start,
          "locked: the bootstrap stops before starting the daemon when its certificate is missing")
    files = [f.get("path") for f in d.get("write_files", [])]
    check(serve_env.get("ELASTIC_ALLOWED_SIGNERS") in files, "the user data writes the allowed_signers file")
    check(not re.search(r"BEGIN [A-Z ]*PRIVATE KEY", text), "no private key in the user data")
    check(re.search(r"^\s*cat >\s*/etc/elastic-agent/serve\.env\b", body, re.M),
          "the bootstrap writes /etc/elastic-agent/serve.env (elastic-agent-serve.service's EnvironmentFile)")
    enable = " ".join(re.findall(r"systemctl enable --now ([^\n]+)", body))
    for unit in a.units:
        check(unit in enable, f"the bootstrap starts {unit}", enable)
    for unit in a.not_units:
        check(unit not in body, f"the bootstrap does not start {unit}")
    m = re.search(r"elastic-agent_([^_/\s]+)_[a-z0-9]+\.deb", body)
    check(m and m.group(1) == a.version, f"the package URL names version {a.version}",
          m.group(1) if m else "no .deb URL")
    done()


# ---------------------------------------------------------------------------------------------
# Dockerfile

def dockerfile_instructions(path):
    out, buf = [], ""
    for raw in open(path):
        line = raw.rstrip("\n")
        if not buf and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if line.endswith("\\"):
            buf += line[:-1] + " "
            continue
        buf += line
        word, _, rest = buf.strip().partition(" ")
        out.append((word.upper(), rest.strip()))
        buf = ""
    return out


def ignored(path, patterns):
    result = False
    for p in patterns:
        neg = p.startswith("!")
        pat = p[1:] if neg else p
        pat = pat.strip("/")
        parts = path.strip("/").split("/")
        for i in range(1, len(parts) + 1):
            if fnmatch.fnmatch("/".join(parts[:i]), pat):
                result = not neg
                break
    return result


def cmd_dockerfile(a):
    ins = dockerfile_instructions(a.dockerfile)
    ignore_file = a.dockerfile + ".dockerignore"
    patterns = []
    if os.path.exists(ignore_file):
        patterns = [x.strip() for x in open(ignore_file) if x.strip() and not x.startswith("#")]
    stages, cur = [], None
    for word, rest in ins:
        if word == "FROM":
            m = re.fullmatch(r"(?:--platform=\S+\s+)?(\S+)(?:\s+AS\s+(\S+))?", rest, re.I)
            cur = {"image": m.group(1), "name": m.group(2), "ins": []}
            stages.append(cur)
        elif cur is not None:
            cur["ins"].append((word, rest))
    check(len(stages) >= 2, "multi-stage build", f"{len(stages)} stage(s)")
    for s in stages:
        img = s["image"].split("@")[0]
        check(img in ("debian:bookworm", "debian:bookworm-slim", "debian:12", "debian:12-slim"),
              f"stage {s['name'] or '(final)'} is based on Debian 12", img)
    names = [s["name"] for s in stages]
    for s in stages:
        for word, rest in s["ins"]:
            if word not in ("COPY", "ADD"):
                continue
            toks = shlex.split(rest)
            frm = [t for t in toks if t.startswith("--from=")]
            srcs = [t for t in toks if not t.startswith("--")][:-1]
            if frm:
                ref = frm[0].split("=", 1)[1]
                check(ref in names[:stages.index(s)], f"COPY --from={ref} names an earlier stage")
                continue
            check(word == "COPY", f"{word} {rest}: COPY, not ADD")
            for src in srcs:
                p = os.path.normpath(os.path.join(a.context, src))
                check(os.path.exists(p), f"COPY source {src} exists in the build context")
                if src not in (".", "./"):
                    check(not ignored(os.path.relpath(p, a.context), patterns),
                          f"COPY source {src} is not excluded by {os.path.basename(ignore_file)}")
    check(ignored("build", patterns) and ignored("build-asan", patterns) and ignored(".git", patterns),
          "local build directories and .git stay out of the build context")
    build = stages[0]
    runs = " ".join(r for w, r in build["ins"] if w == "RUN")
    for script in ("scripts/install-deps.sh", "scripts/build.sh", "scripts/build-deb.sh"):
        check(script in runs and os.path.exists(os.path.join(a.context, script)),
              f"the build stage runs {script}")
    final = stages[-1]
    fruns = " ".join(r for w, r in final["ins"] if w == "RUN")
    check(re.search(r"apt-get install[^&;]*\S+\.deb", fruns),
          "the runtime stage installs the .deb with apt-get (its Depends bring the runtime libraries)")
    pkgs = re.findall(r"(?<![\w/.-])([a-z0-9][a-z0-9+.-]+-dev)\b", fruns)
    check(not pkgs and "build-essential" not in fruns and "install-deps" not in fruns,
          "the runtime stage installs no build dependencies", str(pkgs))
    check("--no-install-recommends" in fruns and "/var/lib/apt/lists" in fruns,
          "the runtime stage keeps apt lean (--no-install-recommends, lists removed)")
    user = [r for w, r in final["ins"] if w == "USER"]
    uid = user[-1].split(":")[0] if user else ""
    check(uid.isdigit() and uid != "0", "the image runs as a numeric non-root USER (runAsNonRoot can verify it)", uid)
    if a.k8s_uid:
        want = open(a.k8s_uid).read().strip()
        check(want == uid, f"the DaemonSet's runAsUser ({want}) is the image's USER ({uid})")
    ep = [r for w, r in final["ins"] if w == "ENTRYPOINT"]
    try:
        epv = json.loads(ep[-1]) if ep else []
    except json.JSONDecodeError:
        epv = []
    check(epv[:1] == ["/usr/bin/elastic-agent"], "ENTRYPOINT is [\"/usr/bin/elastic-agent\", ...] (exec form: SIGTERM reaches the agent)")
    done()


def cmd_etcd_env(a):
    """The etcd StatefulSet's ETCD_* variables, its Secret volumes written under --volumes-out
    and the file paths remapped there, NUL-separated into --env-out: test_deploy_etcd.sh starts
    a real etcd with the manifest's TLS settings."""
    docs = [d for d in yaml.safe_load_all(open(a.rendered)) if d]
    secrets = check_locked.load_secrets(yaml.safe_load_all(open(a.secrets)))
    sts = next(d for d in docs if d["kind"] == "StatefulSet" and d["metadata"]["name"] == a.statefulset)
    pod = sts["spec"]["template"]["spec"]
    c = pod["containers"][0]
    mapping = check_locked.materialize(pod, c, {}, secrets, a.volumes_out)
    env = {k: check_locked.remap(v, mapping) for k, v in check_locked.env_of(c).items() if k.startswith("ETCD_")}
    with open(a.env_out, "w") as f:
        f.write("".join(f"{k}={v}\0" for k, v in env.items()))


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    k = sub.add_parser("k8s")
    k.add_argument("rendered")
    k.add_argument("--name", required=True)
    k.add_argument("--help-file", dest="help", required=True)
    k.add_argument("--results")
    k.add_argument("--etcd-help")
    k.add_argument("--gpu", action="store_true")
    k.add_argument("--env-out")
    k.add_argument("--uid-out")
    k.add_argument("--closed-endpoint", default="127.0.0.1:9")
    k.add_argument("--serve-help")
    k.add_argument("--daemon-out")
    k.add_argument("--secrets", help="certs/make-certs.sh's secrets.yaml: the certificates")
    k.add_argument("--volumes-out", help="write the daemon's Secret/ConfigMap volumes here")
    k.add_argument("--source", required=True, help="the source tree")
    ks = sub.add_parser("k8s-submit")
    ks.add_argument("rendered")
    ks.add_argument("--daemon", required=True)
    ks.add_argument("--help-file", dest="help", required=True)
    ks.add_argument("--submit-help")
    s = sub.add_parser("systemd")
    s.add_argument("unit")
    s.add_argument("env")
    s.add_argument("--help-file", dest="help", required=True)
    s.add_argument("--argv-out")
    s.add_argument("--binary")
    s.add_argument("--instance", default="job1")
    s.add_argument("--runtime")
    s.add_argument("--state")
    s.add_argument("--set", action="append")
    c = sub.add_parser("cloudinit")
    c.add_argument("user_data")
    c.add_argument("--help-file", dest="help", required=True)
    c.add_argument("--out", required=True)
    c.add_argument("--version", required=True)
    c.add_argument("--unit", dest="units", action="append", default=[])
    c.add_argument("--not-unit", dest="not_units", action="append", default=[])
    c.add_argument("--serve-help")
    ss = sub.add_parser("systemd-serve")
    ss.add_argument("unit")
    ss.add_argument("env")
    ss.add_argument("--help-file", dest="help", required=True)
    ss.add_argument("--serve-help")
    ss.add_argument("--argv-out")
    ss.add_argument("--binary")
    ss.add_argument("--instance", default="")
    ss.add_argument("--runtime")
    ss.add_argument("--state")
    ss.add_argument("--set", action="append")
    e = sub.add_parser("etcd-env")
    e.add_argument("rendered")
    e.add_argument("--statefulset", default="etcd")
    e.add_argument("--secrets", required=True)
    e.add_argument("--volumes-out", required=True)
    e.add_argument("--env-out", required=True)
    d = sub.add_parser("dockerfile")
    d.add_argument("dockerfile")
    d.add_argument("--context", required=True)
    d.add_argument("--k8s-uid")
    a = p.parse_args()
    {"k8s": cmd_k8s, "k8s-submit": cmd_k8s_submit, "systemd": cmd_systemd,
     "systemd-serve": cmd_systemd_serve, "cloudinit": cmd_cloudinit,
     "dockerfile": cmd_dockerfile, "etcd-env": cmd_etcd_env}[a.cmd](a)


if __name__ == "__main__":
    main()
