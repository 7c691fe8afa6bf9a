// SPDX-License-Identifier: Apache-2.0
// Validates Kubernetes objects offline against the API's schemas: the Kubernetes OpenAPI and
// cert-manager's CRDs as compiled by kubernetes-models (installed by install.sh into a cache dir).
//   node validate.js NODE_MODULES_DIR OBJECTS.json
// OBJECTS.json: a JSON array of objects (test_deploy.sh converts `kubectl kustomize` output).
// One line per object ("  ok" / "  FAIL" with the schema's errors); exit 1 when one failed.
"use strict";
const path = require("path");
const { createRequire } = require("module");

const [modules, file] = process.argv.slice(2);
if (!modules || !file) {
  console.error("usage: node validate.js NODE_MODULES_DIR OBJECTS.json");
  process.exit(2);
}
const req = createRequire(path.join(path.resolve(modules), "x.js"));
const objects = JSON.parse(require("fs").readFileSync(file, "utf8"));

// the model class of apiVersion/kind: core ("v1") and API groups from kubernetes-models,
// cert-manager.io from @kubernetes-models/cert-manager
function modelOf(apiVersion, kind) {
  const [group, version] = apiVersion.includes("/") ? apiVersion.split("/") : ["", apiVersion];
  const candidates = group.endsWith("cert-manager.io")
    ? [`@kubernetes-models/cert-manager/${group}/${version}/${kind}`]
    : [group ? `kubernetes-models/${group}/${version}/${kind}` : `kubernetes-models/${version}/${kind}`];
  for (const m of candidates) {
    try {
      const cls = req(m)[kind];
      if (cls) return { cls, from: m };
    } catch (e) {
      if (e.code !== "MODULE_NOT_FOUND") throw e;
    }
  }
  return null;
}

let failed = 0;
for (const o of objects) {
  const what = `${o.kind}/${(o.metadata || {}).name}`;
  const model = o.apiVersion && o.kind ? modelOf(o.apiVersion, o.kind) : null;
  if (!model) {
    failed++;
    console.log(`  FAIL  ${what}: no schema for ${o.apiVersion} ${o.kind}`);
    continue;
  }
  try {
    new model.cls(o).validate();
    console.log(`  ok    ${what} (${o.apiVersion}) validates against ${model.from}`);
  } catch (e) {
    failed++;
    console.log(`  FAIL  ${what} (${o.apiVersion}): ${e.message}`);
  }
}
process.exit(failed ? 1 : 0);
