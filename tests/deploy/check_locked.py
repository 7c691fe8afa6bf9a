# SPDX-License-Identifier: Apache-2.0
"""What makes deploy/k8s locked by default (issue 29), checked on the rendered manifests for
check_deploy.py's `k8s` and `k8s-submit`:

  Pod Security   the namespace enforces `restricted`, and every pod template meets it
  etcd TLS       https on client and peer ports, client and peer certificate auth, the files
                 from mounted Secrets, peers limited to the peer certificate's CN
  identities     which Secret each kind of pod mounts, and that its certificate's CN is the etcd
                 user etcd-auth.sh gives the matching role (cert-manager's Certificates, or the
                 Secrets of certs/make-certs.sh)
  roles          the etcd-auth Job runs the very etcd-auth.sh of deploy/k8s/base as root
  NetworkPolicy  simulated: 2379 only from the daemons, submit pods and the etcd-auth Job, 2380
                 only between members, the metrics ports only from namespaces labelled for
                 monitoring, and nothing from anywhere else
"""
import base64
import os
import re
import subprocess

CLIENT_PORT, PEER_PORT, METRICS_PORT, HTTP_PORT = 2379, 2380, 2381, 9402
MONITORING = {"elastic-agent.io/monitoring": "true"}
USERS = {"daemon": "elastic-agent-daemon", "submit": "elastic-agent-submit", "root": "root"}
SUBMIT_LABELS = {"app.kubernetes.io/name": "elastic-agent-submit",
                 "app.kubernetes.io/part-of": "elastic-agent"}
OTHER_LABELS = {"app": "something-else"}


# ---------------------------------------------------------------------------------------------
# label selectors and NetworkPolicy semantics

def selector_matches(sel, labels):
    """A LabelSelector (matchLabels + matchExpressions) against a pod's labels; {} matches all."""
    if sel is None:
        return False
    for k, v in (sel.get("matchLabels") or {}).items():
        if labels.get(k) != v:
            return False
    for e in sel.get("matchExpressions") or []:
        k, op, vals = e["key"], e["operator"], e.get("values") or []
        if op == "In" and labels.get(k) not in vals:
            return False
        if op == "NotIn" and k in labels and labels[k] in vals:
            return False
        if op == "Exists" and k not in labels:
            return False
        if op == "DoesNotExist" and k in labels:
            return False
    return True


def port_matches(rule_ports, port, named):
    """A rule's ports (absent: all) against a TCP port number; `named` maps names to numbers."""
    if not rule_ports:
        return True
    for p in rule_ports:
        if p.get("protocol", "TCP") != "TCP":
            continue
        want = p.get("port")
        if want is None:
            return True
        want = named.get(want, want) if isinstance(want, str) else want
        end = p.get("endPort", want)
        if isinstance(want, int) and want <= port <= end:
            return True
    return False


def peer_matches(peer, src_labels, src_ns_labels, same_ns):
    """One `from` entry against a source pod (its labels, its namespace's labels)."""
    if "ipBlock" in peer:
        return True  # an address range: anything could be in it
    ps, ns = peer.get("podSelector"), peer.get("namespaceSelector")
    if ns is None:
        return same_ns and selector_matches(ps, src_labels)
    return selector_matches(ns, src_ns_labels) and (ps is None or selector_matches(ps, src_labels))


def ingress_allowed(policies, dst_labels, port, named, src_labels, src_ns_labels, same_ns):
    """Would a connection from the source pod to `port` of a pod with dst_labels be admitted?"""
    selecting = [p for p in policies if selector_matches(p["spec"].get("podSelector", {}), dst_labels)
                 and "Ingress" in (p["spec"].get("policyTypes") or ["Ingress"])]
    if not selecting:
        return True  # a pod no policy selects accepts everything
    for p in selecting:
        for rule in p["spec"].get("ingress") or []:
            if not port_matches(rule.get("ports"), port, named):
                continue
            peers = rule.get("from")
            if not peers or any(peer_matches(x, src_labels, src_ns_labels, same_ns) for x in peers):
                return True
    return False


# ---------------------------------------------------------------------------------------------
# Pod Security `restricted`

ALLOWED_VOLUMES = {"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim",
                   "projected", "secret"}


def restricted_violations(pod):
    """What in a pod spec Pod Security `restricted` (v1.25+) would refuse; [] when nothing."""
    bad = []
    psc = pod.get("securityContext") or {}
    for k in ("hostNetwork", "hostPID", "hostIPC"):
        if pod.get(k):
            bad.append(f"{k}: true")
    for v in pod.get("volumes") or []:
        kinds = set(v) - {"name"}
        if not kinds <= ALLOWED_VOLUMES:
            bad.append(f"volume {v['name']}: {sorted(kinds - ALLOWED_VOLUMES)}")
    if psc.get("sysctls"):
        bad.append("sysctls")
    containers = (pod.get("initContainers") or []) + (pod.get("containers") or [])
    for c in containers:
        sc = c.get("securityContext") or {}
        name = c["name"]
        if sc.get("privileged"):
            bad.append(f"{name}: privileged")
        if sc.get("allowPrivilegeEscalation") is not False:
            bad.append(f"{name}: allowPrivilegeEscalation is not false")
        caps = sc.get("capabilities") or {}
        if "ALL" not in (caps.get("drop") or []):
            bad.append(f"{name}: capabilities do not drop ALL")
        if set(caps.get("add") or []) - {"NET_BIND_SERVICE"}:
            bad.append(f"{name}: adds capabilities {caps['add']}")
        non_root = sc.get("runAsNonRoot", psc.get("runAsNonRoot"))
        if non_root is not True:
            bad.append(f"{name}: runAsNonRoot is not true")
        if sc.get("runAsUser", psc.get("runAsUser")) == 0:
            bad.append(f"{name}: runAsUser 0")
        seccomp = (sc.get("seccompProfile") or psc.get("seccompProfile") or {}).get("type")
        if seccomp not in ("RuntimeDefault", "Localhost"):
            bad.append(f"{name}: seccompProfile {seccomp!r}")
        if sc.get("procMount", "Default") != "Default":
            bad.append(f"{name}: procMount")
        for p in c.get("ports") or []:
            if p.get("hostPort"):
                bad.append(f"{name}: hostPort {p['hostPort']}")
    return bad


# ---------------------------------------------------------------------------------------------
# volumes: where a path in a container comes from

def mount_source(pod, container, path):
    """(volume, kind, name, path inside the volume) of the mount `path` lies in, or None."""
    vols = {v["name"]: v for v in pod.get("volumes") or []}
    best = None
    for m in container.get("volumeMounts") or []:
        mp = m["mountPath"].rstrip("/")
        if path == mp or path.startswith(mp + "/"):
            if best is None or len(mp) > len(best[0]):
                best = (mp, m)
    if not best:
        return None
    mp, m = best
    v = vols.get(m["name"], {})
    rel = path[len(mp):].lstrip("/")
    if "secret" in v:
        return v, "secret", v["secret"].get("secretName"), rel
    if "configMap" in v:
        return v, "configMap", v["configMap"].get("name"), rel
    return v, "other", None, rel


def load_secrets(docs):
    """{name: {key: bytes}} of the Secret objects among docs (certs/make-certs.sh's output)."""
    out = {}
    for d in docs:
        if d and d.get("kind") == "Secret":
            data = {k: base64.b64decode(v) for k, v in (d.get("data") or {}).items()}
            data.update({k: v.encode() for k, v in (d.get("stringData") or {}).items()})
            out[d["metadata"]["name"]] = data
    return out


def materialize(pod, container, configmaps, secrets, root):
    """Write the container's Secret and ConfigMap volumes under root/<volume> as the kubelet
    would; {mountPath: local dir}. Volumes whose source is unknown are left out."""
    vols = {v["name"]: v for v in pod.get("volumes") or []}
    mapping = {}
    for m in container.get("volumeMounts") or []:
        v = vols.get(m["name"], {})
        files = None
        if "secret" in v and v["secret"].get("secretName") in secrets:
            files = secrets[v["secret"]["secretName"]]
        elif "configMap" in v and v["configMap"].get("name") in configmaps:
            files = {k: x.encode() for k, x in (configmaps[v["configMap"]["name"]].get("data") or {}).items()}
        if files is None:
            continue
        d = os.path.join(root, m["name"])
        os.makedirs(d, exist_ok=True)
        for k, data in files.items():
            with open(os.path.join(d, k), "wb") as f:
                f.write(data)
            os.chmod(os.path.join(d, k), 0o600)
        mapping[m["mountPath"].rstrip("/")] = d
    return mapping


def remap(value, mapping):
    for mp, d in mapping.items():
        if value == mp or value.startswith(mp + "/"):
            return d + value[len(mp):]
    return value


# ---------------------------------------------------------------------------------------------
# certificates

def cert_facts(pem):
    """{"cn", "dns", "ip", "eku", "ca"} of a PEM certificate, read with openssl."""
    out = subprocess.run(["openssl", "x509", "-noout", "-subject", "-ext",
                          "subjectAltName,extendedKeyUsage,basicConstraints", "-nameopt", "multiline"],
                         input=pem, capture_output=True, check=True).stdout.decode()
    cn = re.search(r"commonName\s*=\s*(.+)", out)
    return {"cn": cn.group(1).strip() if cn else None,
            "dns": set(re.findall(r"DNS:([^,\s]+)", out)),
            "ip": set(re.findall(r"IP Address:([^,\s]+)", out)),
            "eku": {"server auth" if "Server Authentication" in out else None,
                    "client auth" if "Client Authentication" in out else None} - {None},
            "ca": "CA:TRUE" in out}


def verify_chain(ca_pem, pem, tmpdir):
    ca, crt = os.path.join(tmpdir, "verify-ca.pem"), os.path.join(tmpdir, "verify-crt.pem")
    open(ca, "wb").write(ca_pem)
    open(crt, "wb").write(pem)
    return subprocess.run(["openssl", "verify", "-CAfile", ca, crt], capture_output=True).returncode == 0


def certificate_facts(certs):
    """{secretName: facts} of cert-manager Certificates, in cert_facts' terms."""
    out = {}
    for c in certs:
        s = c["spec"]
        out[s["secretName"]] = {"cn": s.get("commonName"), "dns": set(s.get("dnsNames") or []),
                                "ip": set(s.get("ipAddresses") or []),
                                "eku": set(s.get("usages") or []) & {"server auth", "client auth"},
                                "ca": bool(s.get("isCA")), "issuer": s.get("issuerRef", {}).get("name"),
                                "name": c["metadata"]["name"]}
    return out


# ---------------------------------------------------------------------------------------------
# the checks

def pod_templates(kinds):
    """(kind/name, pod spec, pod labels) of every workload."""
    out = []
    for kind in ("DaemonSet", "StatefulSet", "Deployment", "Job", "ReplicaSet"):
        for o in kinds.get(kind, []):
            t = o["spec"]["template"]
            out.append((f"{kind}/{o['metadata']['name']}", t["spec"], t["metadata"].get("labels", {})))
    for o in kinds.get("Pod", []):
        out.append((f"Pod/{o['metadata']['name']}", o["spec"], o["metadata"].get("labels", {})))
    return out


def env_of(container):
    return {e["name"]: e.get("value") for e in container.get("env") or [] if "value" in e}


def secret_of(check, what, pod, container, paths, label):
    """The one Secret the files `paths` (in container) come from; None (and FAIL) otherwise."""
    names = set()
    for p in paths:
        src = mount_source(pod, container, p or "")
        ok = src is not None and src[1] == "secret"
        check(ok, f"{what}: {label} {p} is a file of a mounted Secret")
        if ok:
            names.add(src[2])
    check(len(names) == 1, f"{what}: {label}: one Secret holds them all", str(sorted(names)))
    return next(iter(names)) if len(names) == 1 else None


def check_k8s(check, kinds, what, ds, sts, cms, secrets, base_dir, tmpdir):
    """The locked-by-default checks on one rendered deployment; returns facts for k8s-submit
    (the policies, the etcd pods' labels, the certificates' facts by Secret)."""
    ns_obj = (kinds.get("Namespace") or [{}])[0]
    ns = ns_obj.get("metadata", {}).get("name")
    ns_labels = dict(ns_obj.get("metadata", {}).get("labels") or {})
    check(ns_labels.get("pod-security.kubernetes.io/enforce") == "restricted",
          f"{what}: namespace {ns} enforces Pod Security `restricted`",
          repr(ns_labels.get("pod-security.kubernetes.io/enforce")))
    ns_labels["kubernetes.io/metadata.name"] = ns
    for name, pod, _ in pod_templates(kinds):
        bad = restricted_violations(pod)
        check(not bad, f"{what}: {name} meets Pod Security `restricted`", "; ".join(bad))

    # etcd: TLS on both ports, certificates required
    epod = sts["spec"]["template"]["spec"]
    ec = epod["containers"][0]
    ee = env_of(ec)
    for var in ("ETCD_CLIENT_CERT_AUTH", "ETCD_PEER_CLIENT_CERT_AUTH"):
        check(ee.get(var) == "true", f"{what}: etcd {var}=true (--{var[5:].lower().replace('_', '-')})",
              repr(ee.get(var)))
    for var in ("ETCD_LISTEN_CLIENT_URLS", "ETCD_ADVERTISE_CLIENT_URLS", "ETCD_LISTEN_PEER_URLS",
                "ETCD_INITIAL_ADVERTISE_PEER_URLS"):
        urls = (ee.get(var) or "").split(",")
        check(all(u.startswith("https://") for u in urls), f"{what}: etcd {var} is https only", ee.get(var))
    cluster = [x.partition("=")[2] for x in (ee.get("ETCD_INITIAL_CLUSTER") or "").split(",")]
    check(cluster and all(u.startswith("https://") for u in cluster),
          f"{what}: etcd members peer over https (ETCD_INITIAL_CLUSTER)")
    metrics = ee.get("ETCD_LISTEN_METRICS_URLS", "")
    check(not metrics or all(re.search(rf":{METRICS_PORT}$", u) for u in metrics.split(",")),
          f"{what}: etcd's plain-HTTP listener is the metrics port {METRICS_PORT} only", metrics)
    server_secret = secret_of(check, what, epod, ec, [ee.get("ETCD_CERT_FILE"), ee.get("ETCD_KEY_FILE"),
                                                      ee.get("ETCD_TRUSTED_CA_FILE")], "etcd's client TLS file")
    peer_secret = secret_of(check, what, epod, ec, [ee.get("ETCD_PEER_CERT_FILE"), ee.get("ETCD_PEER_KEY_FILE"),
                                                    ee.get("ETCD_PEER_TRUSTED_CA_FILE")], "etcd's peer TLS file")
    allowed_cn = ee.get("ETCD_PEER_CERT_ALLOWED_CN")
    check(allowed_cn, f"{what}: only the peer certificate may peer (ETCD_PEER_CERT_ALLOWED_CN)")

    # the daemons: mutual TLS as their etcd user, the allowed signers from a ConfigMap
    pod = ds["spec"]["template"]["spec"]
    c = pod["containers"][0]
    merged = {}
    for ef in c.get("envFrom") or []:
        merged.update(cms.get(ef.get("configMapRef", {}).get("name"), {}).get("data") or {})
    merged.update(env_of(c))
    daemon_secret = secret_of(check, what, pod, c, [merged.get(v) for v in
                                                    ("ELASTIC_CACERT", "ELASTIC_CERT", "ELASTIC_KEY")],
                              "the daemon's ELASTIC_CACERT/CERT/KEY")
    signers = merged.get("ELASTIC_ALLOWED_SIGNERS")
    src = mount_source(pod, c, signers or "")
    ok = src is not None and src[1] == "configMap" and src[2] in cms and \
        src[3] in (cms[src[2]].get("data") or {})
    check(ok, f"{what}: ELASTIC_ALLOWED_SIGNERS {signers} is a file of a rendered ConfigMap")

    # the etcd-auth Job: etcd-auth.sh of deploy/k8s/base, as root, with the daemons' settings
    auth_secret, auth_labels = None, {}
    jobs = [j for j in kinds.get("Job", []) if j["metadata"]["name"] == "etcd-auth"]
    if check(len(jobs) == 1, f"{what}: a Job etcd-auth sets up etcd's users and roles"):
        jt = jobs[0]["spec"]["template"]
        jpod, jc = jt["spec"], jt["spec"]["containers"][0]
        auth_labels = jt["metadata"].get("labels", {})
        je = env_of(jc)
        auth_secret = secret_of(check, what, jpod, jc, [je.get("ETCDCTL_CACERT"), je.get("ETCDCTL_CERT"),
                                                        je.get("ETCDCTL_KEY")], "etcd-auth's ETCDCTL_* file")
        script = next((x for x in jc.get("command", []) + jc.get("args", []) if x.endswith(".sh")), "")
        src = mount_source(jpod, jc, script)
        body = (cms.get(src[2], {}).get("data") or {}).get(src[3]) if src and src[1] == "configMap" else None
        want = open(os.path.join(base_dir, "etcd-auth.sh")).read()
        check(body == want, f"{what}: the Job runs deploy/k8s/base/etcd-auth.sh (from a ConfigMap)", script)
        for role in ("daemon", "submit"):
            check(body and re.search(rf"^{role}={re.escape(USERS[role])}$", body, re.M),
                  f"{what}: etcd-auth.sh's {role} user and role is {USERS[role]}")
        check([e.get("configMapRef", {}).get("name") for e in jc.get("envFrom") or []] ==
              [e.get("configMapRef", {}).get("name") for e in c.get("envFrom") or []],
              f"{what}: the Job takes the prefix, pool and endpoints from the daemons' ConfigMap")
        check(restart_ok(jobs[0]), f"{what}: the Job retries while etcd forms its quorum")

    # certificates: cert-manager's Certificates, and/or the Secrets made by make-certs.sh
    facts = check_certs(check, what, kinds, secrets, tmpdir)
    want_cn = {server_secret: None, peer_secret: allowed_cn, daemon_secret: USERS["daemon"],
               auth_secret: USERS["root"]}
    hosts = {h.split(":")[0] for h in (merged.get("ELASTIC_RDZV_ENDPOINT") or "").split(",") if h}
    peer_hosts = {re.sub(r"^https?://|:\d+$", "", u) for u in cluster if u}
    if not facts:
        check(False, f"{what}: the certificates (cert-manager Certificates or --secrets) are known")
    for sec, cn in want_cn.items():
        f = facts.get(sec)
        if sec is None or not check(f, f"{what}: Secret {sec} is made (a Certificate or make-certs.sh)"):
            continue
        if cn:
            check(f["cn"] == cn, f"{what}: Secret {sec}'s CN is {cn}", repr(f["cn"]))
    f = facts.get(server_secret)
    if f:
        check("server auth" in f["eku"], f"{what}: {server_secret} is a server certificate")
        check(hosts <= f["dns"] | f["ip"], f"{what}: {server_secret} names every endpoint host {sorted(hosts)}",
              str(sorted(hosts - f["dns"] - f["ip"])))
        check(f["cn"] not in USERS.values(), f"{what}: {server_secret}'s CN is no etcd user", repr(f["cn"]))
    f = facts.get(peer_secret)
    if f:
        check({"server auth", "client auth"} <= f["eku"], f"{what}: {peer_secret} serves and dials (peer)")
        check(peer_hosts <= f["dns"] | f["ip"], f"{what}: {peer_secret} names every member {sorted(peer_hosts)}",
              str(sorted(peer_hosts - f["dns"] - f["ip"])))
        check(f["cn"] not in USERS.values(), f"{what}: {peer_secret}'s CN is no etcd user", repr(f["cn"]))
    for sec in (daemon_secret, auth_secret):
        if facts.get(sec):
            check("client auth" in facts[sec]["eku"], f"{what}: {sec} is a client certificate")

    # NetworkPolicies, simulated
    pols = kinds.get("NetworkPolicy", [])
    etcd_labels = sts["spec"]["template"]["metadata"].get("labels", {})
    daemon_labels = ds["spec"]["template"]["metadata"].get("labels", {})
    named = {p["name"]: p["containerPort"] for p in ec.get("ports") or [] if "name" in p}
    dnamed = {p["name"]: p["containerPort"] for p in c.get("ports") or [] if "name" in p}
    mon_ns = {"kubernetes.io/metadata.name": "monitoring", **MONITORING}
    other_ns = {"kubernetes.io/metadata.name": "other"}

    def admits(dst, port, names, src, src_ns, label, want):
        got = ingress_allowed(pols, dst, port, names, src, src_ns, src_ns is ns_labels)
        check(got == want, f"{what}: NetworkPolicy {'admits' if want else 'refuses'} {label}")

    check(any(p["spec"].get("podSelector") == {} and not p["spec"].get("ingress") for p in pols),
          f"{what}: a default-deny ingress NetworkPolicy for the namespace")
    for src, lbl in ((daemon_labels, "daemon"), (SUBMIT_LABELS, "submit"), (auth_labels, "etcd-auth")):
        admits(etcd_labels, CLIENT_PORT, named, src, ns_labels, f"{lbl} pods -> etcd:{CLIENT_PORT}", True)
    for src, src_ns, lbl, port in ((etcd_labels, ns_labels, "etcd members", CLIENT_PORT),
                                   (OTHER_LABELS, ns_labels, "another pod of the namespace", CLIENT_PORT),
                                   (daemon_labels, mon_ns, "a pod of the monitoring namespace", CLIENT_PORT),
                                   (daemon_labels, other_ns, "a look-alike pod of another namespace", CLIENT_PORT),
                                   (daemon_labels, ns_labels, "daemon pods", PEER_PORT),
                                   (OTHER_LABELS, ns_labels, "another pod of the namespace", PEER_PORT),
                                   (daemon_labels, ns_labels, "daemon pods", METRICS_PORT),
                                   (OTHER_LABELS, other_ns, "a pod of an unlabelled namespace", METRICS_PORT)):
        admits(etcd_labels, port, named, src, src_ns, f"{lbl} -> etcd:{port}", False)
    admits(etcd_labels, PEER_PORT, named, etcd_labels, ns_labels, f"etcd members -> etcd:{PEER_PORT}", True)
    admits(etcd_labels, METRICS_PORT, named, OTHER_LABELS, mon_ns,
           f"a namespace labelled {MONITORING} -> etcd:{METRICS_PORT}", True)
    admits(daemon_labels, HTTP_PORT, dnamed, OTHER_LABELS, mon_ns,
           f"a namespace labelled {MONITORING} -> daemon:{HTTP_PORT}", True)
    admits(daemon_labels, HTTP_PORT, dnamed, OTHER_LABELS, other_ns, f"an unlabelled namespace -> daemon:{HTTP_PORT}",
           False)
    admits(daemon_labels, 29500, dnamed, daemon_labels, ns_labels, "daemon pods -> daemon pods (workers)", True)
    admits(daemon_labels, 29500, dnamed, OTHER_LABELS, ns_labels, "another pod -> daemon pods (workers)", False)
    return {"policies": pols, "etcd_labels": etcd_labels, "etcd_named_ports": named, "ns_labels": ns_labels,
            "certs": {k: {**v, "dns": sorted(v["dns"]), "ip": sorted(v["ip"]), "eku": sorted(v["eku"])}
                      for k, v in facts.items()}}


def restart_ok(job):
    spec = job["spec"]
    return spec.get("backoffLimit", 6) >= 3 and spec["template"]["spec"].get("restartPolicy") in ("OnFailure", "Never")


def check_certs(check, what, kinds, secrets, tmpdir):
    """{secretName: facts} from cert-manager's Certificates (their chain checked) and from the
    Secrets of make-certs.sh (the real certificates: chain verified, facts read); where both
    exist for a Secret, they must agree."""
    facts = {}
    certs = kinds.get("Certificate", [])
    if certs:
        cm = certificate_facts(certs)
        issuers = {i["metadata"]["name"]: i["spec"] for i in kinds.get("Issuer", [])}
        cas = [f for f in cm.values() if f["ca"]]
        if check(len(cas) == 1, f"{what}: cert-manager: one CA Certificate"):
            ca = cas[0]
            ca_secret = next(k for k, v in cm.items() if v is ca)
            check("selfSigned" in issuers.get(ca["issuer"], {}),
                  f"{what}: cert-manager: the CA is issued by a self-signed Issuer")
            ca_issuers = [n for n, s in issuers.items() if s.get("ca", {}).get("secretName") == ca_secret]
            check(len(ca_issuers) == 1, f"{what}: cert-manager: a CA Issuer signs with Secret {ca_secret}")
            for sec, f in cm.items():
                if f is not ca:
                    check(f["issuer"] in ca_issuers, f"{what}: cert-manager: {f['name']} is issued by the CA Issuer")
        facts.update({k: v for k, v in cm.items() if not v["ca"]})
    if secrets:
        cas = {bytes(v.get("ca.crt", b"")) for v in secrets.values()}
        check(len(cas) == 1, f"{what}: the Secrets carry one CA (ca.crt)")
        for sec, data in sorted(secrets.items()):
            pem = data.get("tls.crt")
            if not check(pem and data.get("tls.key") and data.get("ca.crt"),
                         f"{what}: Secret {sec} has tls.crt, tls.key and ca.crt"):
                continue
            check(verify_chain(data["ca.crt"], pem, tmpdir), f"{what}: Secret {sec}'s certificate verifies against its ca.crt")
            real = cert_facts(pem)
            if sec in facts:
                f = facts[sec]
                for k in ("cn", "dns", "ip", "eku"):
                    check(f[k] == real[k], f"{what}: {sec}: cert-manager and make-certs.sh agree on {k}",
                          f"{f[k]!r} vs {real[k]!r}")
            else:
                facts[sec] = real
    return facts
