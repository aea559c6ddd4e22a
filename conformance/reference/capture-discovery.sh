#!/usr/bin/env bash
# Captures, from a real kube-apiserver, the discovery and OpenAPI documents that
# src/discovery/ must reproduce, and the apimachinery OpenAPI data it embeds.
#
#   capture-discovery.sh [--run-dir DIR] [--keep-running]
#
# Starts the test clusters (conformance/cluster/cluster.sh), installs
# src/discovery/testdata/crds.yaml into the provider, waits until discovery and
# both OpenAPI endpoints list every served version, and writes:
#
#   src/discovery/testdata/real/   the responses, reduced to the CRDs' groups
#     apis.json                      GET /apis (legacy), only our groups
#     apis-<g>.json                  GET /apis/<g>
#     apis-<g>-<v>.json              GET /apis/<g>/<v>
#     aggregated-apis.json           GET /apis as apidiscovery.k8s.io/v2, only our groups
#     openapi-v2.json                GET /openapi/v2: only our paths, and the
#                                    definitions and parameters they reach
#     openapi-v3.json                GET /openapi/v3, only our group-versions
#     openapi-v3-apis-<g>-<v>.json   GET /openapi/v3/apis/<g>/<v>, whole
#   src/discovery/data/            what the generator embeds (include_str!)
#     openapi-v2.json                the v2 document's top level, the shared
#                                    parameters and definitions CRD paths use,
#                                    and each action's parameter list
#     openapi-v3.json                the v3 component schemas CRD documents use,
#                                    and each action's parameter list
#
# The clusters are stopped on exit, also on failure, and a run dir the script
# made is removed, unless --keep-running (then stop them with
# cluster.sh down --run-dir DIR). Env: as cluster.sh
# (BINDERY_BIN, KUBECTL, BINDERY_CACHE_DIR).
set -Eeuo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
run_dir=
keep=
while [ $# -gt 0 ]; do
  case $1 in
    --run-dir) run_dir=$2; shift 2 ;;
    --keep-running) keep=1; shift ;;
    *) echo "capture-discovery.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done

made_run_dir=
if [ -z "$run_dir" ]; then run_dir=$(mktemp -d /tmp/capture-discovery.XXXXXX); made_run_dir=1; fi
crds=$repo/src/discovery/testdata/crds.yaml
real=$repo/src/discovery/testdata/real
data=$repo/src/discovery/data
raw=$run_dir/raw
mkdir -p "$real" "$data" "$raw"

cluster() { "$repo/conformance/cluster/cluster.sh" "$@" --run-dir "$run_dir"; }
cleanup() {
  cluster down >/dev/null 2>&1 || true
  if [ -n "$made_run_dir" ]; then rm -rf "$run_dir"; fi
}
[ -n "$keep" ] || trap cleanup EXIT
cluster up
# shellcheck disable=SC1091
source "$run_dir/env"

kubectl_bin=${KUBECTL:-/usr/lib/google-cloud-sdk/bin/kubectl.1.33}
[ -x "$kubectl_bin" ] || kubectl_bin=$(command -v kubectl)
k() { "$kubectl_bin" --kubeconfig "$PROVIDER_KUBECONFIG" "$@"; }
pki=$BINDERY_PKI_DIR/provider
get() { # get PATH [ACCEPT] > file
  curl -sSf --cacert "$pki/ca.crt" --cert "$pki/admin.crt" --key "$pki/admin.key" \
    -H "Accept: ${2:-application/json}" "$PROVIDER_SERVER$1"
}

k apply -f "$crds" >/dev/null
names=$(k get -f "$crds" -o name)
# shellcheck disable=SC2086
k wait --for=condition=Established --timeout=60s $names >/dev/null
k get -f "$crds" -o json >"$raw/crds.json"

# The served group-versions, as "group/version" lines.
gvs=$(python3 - "$raw/crds.json" <<'PY'
import json, sys
seen = []
for crd in json.load(open(sys.argv[1]))["items"]:
    for v in crd["spec"]["versions"]:
        gv = crd["spec"]["group"] + "/" + v["name"]
        if v["served"] and gv not in seen:
            seen.append(gv)
print("\n".join(seen))
PY
)

# Discovery and OpenAPI are filled by asynchronous controllers: wait until
# every served group-version is in all of them.
agg='application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList'
for _ in $(seq 1 120); do
  get /apis "$agg" >"$raw/aggregated-apis.json"
  get /openapi/v2 >"$raw/openapi-v2.json"
  get /openapi/v3 >"$raw/openapi-v3.json"
  if python3 - "$raw" "$gvs" <<'PY'
import json, sys
raw, gvs = sys.argv[1], sys.argv[2].split()
agg = json.load(open(raw + "/aggregated-apis.json"))
have = {i["metadata"]["name"] + "/" + v["version"] for i in agg["items"] for v in i["versions"]}
v3 = json.load(open(raw + "/openapi-v3.json"))["paths"]
v2 = json.load(open(raw + "/openapi-v2.json"))["paths"]
ok = all(gv in have and "apis/" + gv in v3 and any(p.startswith("/apis/" + gv + "/") for p in v2) for gv in gvs)
sys.exit(0 if ok else 1)
PY
  then ready=1; break; fi
  sleep 1
done
[ "${ready:-}" = 1 ] || { echo "capture-discovery.sh: discovery/OpenAPI never listed $gvs" >&2; exit 1; }

get /apis >"$raw/apis.json"
for g in $(printf '%s\n' $gvs | cut -d/ -f1 | sort -u); do
  get "/apis/$g" >"$raw/apis-$g.json"
done
for gv in $gvs; do
  get "/apis/$gv" >"$raw/apis-${gv/\//-}.json"
  get "/openapi/v3/apis/$gv" >"$raw/openapi-v3-apis-${gv/\//-}.json"
done

python3 - "$raw" "$real" "$data" "$gvs" <<'PY'
import copy, json, os, sys

raw, real, data, gvs = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4].split()
groups = sorted({gv.split("/")[0] for gv in gvs})

def load(name):
    with open(os.path.join(raw, name)) as f:
        return json.load(f)

def dump(path, doc):
    with open(path, "w") as f:
        json.dump(doc, f, indent=2, ensure_ascii=False)
        f.write("\n")

def refs(node, out):
    """Every "$ref" string under node."""
    if isinstance(node, dict):
        for k, v in node.items():
            if k == "$ref" and isinstance(v, str):
                out.add(v)
            else:
                refs(v, out)
    elif isinstance(node, list):
        for v in node:
            refs(v, out)
    return out

def ours(name):
    # Definitions and component schemas of the CRDs are named after the
    # reversed group: testing.bindery.dev -> dev.bindery.testing.<v>.<Kind>.
    return any(name.startswith(".".join(reversed(g.split("."))) + ".") for g in groups)

# Discovery: keep our groups, as the server ordered them.
apis = load("apis.json")
apis["groups"] = [g for g in apis["groups"] if g["name"] in groups]
dump(f"{real}/apis.json", apis)
agg = load("aggregated-apis.json")
agg["items"] = [i for i in agg["items"] if i["metadata"]["name"] in groups]
dump(f"{real}/aggregated-apis.json", agg)
for g in groups:
    dump(f"{real}/apis-{g}.json", load(f"apis-{g}.json"))
for gv in gvs:
    name = gv.replace("/", "-")
    dump(f"{real}/apis-{name}.json", load(f"apis-{name}.json"))
    dump(f"{real}/openapi-v3-apis-{name}.json", load(f"openapi-v3-apis-{name}.json"))

# OpenAPI v3 root: our group-versions only.
v3root = load("openapi-v3.json")
v3root["paths"] = {k: v for k, v in v3root["paths"].items() if k[len("apis/"):] in gvs}
dump(f"{real}/openapi-v3.json", v3root)

# OpenAPI v2: our paths, and the parameters and definitions they reach.
v2 = load("openapi-v2.json")
paths = {p: v for p, v in v2["paths"].items() if any(p.startswith(f"/apis/{gv}/") for gv in gvs)}
params, defs = {}, {}
todo = refs(paths, set())
while todo:
    ref = todo.pop()
    kind, _, name = ref[2:].partition("/")
    table, source = (params, v2["parameters"]) if kind == "parameters" else (defs, v2["definitions"])
    if name not in table:
        table[name] = source[name]
        todo |= refs(source[name], set())
reduced = {k: v2[k] for k in ("swagger", "info") if k in v2}
reduced["paths"] = paths
reduced["definitions"] = dict(sorted(defs.items()))
reduced["parameters"] = dict(sorted(params.items()))
for k in ("security", "securityDefinitions"):
    if k in v2:
        reduced[k] = v2[k]
dump(f"{real}/openapi-v2.json", reduced)

# What the generator embeds. The per-action parameter lists are read from the
# namespaced gizmos of testing.bindery.dev/v1, whose routes keep them on the
# operations: the collection path has list, create and deletecollection, the
# object path get, replace, delete and patch. Path parameters (name,
# namespace, pretty) and kind-specific bodies are made by the generator.
def action_lists(doc_paths, is_v2):
    root = "/apis/testing.bindery.dev/v1/namespaces/{namespace}/gizmos"
    col, obj = doc_paths[root], doc_paths[root + "/{name}"]
    ops = {"list": col["get"], "post": col["post"], "deletecollection": col["delete"],
           "get": obj["get"], "put": obj["put"], "delete": obj["delete"], "patch": obj["patch"]}
    out = {}
    for action, op in ops.items():
        kept = []
        for p in op.get("parameters", []):
            # v2 inline bodies reference the kind; v2 shared bodies (DeleteOptions, Patch) are generic.
            if is_v2 and p.get("in") == "body":
                continue
            kept.append(p)
        out[action] = kept
    return out, col["parameters"]

v3gv = load("openapi-v3-apis-testing.bindery.dev-v1.json")
schemas = {}
for gv in gvs:
    doc = load(f"openapi-v3-apis-{gv.replace('/', '-')}.json")
    for k, v in doc["components"]["schemas"].items():
        if not ours(k):
            schemas[k] = v
actions3, common3 = action_lists(v3gv["paths"], False)
gizmo = v3gv["components"]["schemas"]["dev.bindery.testing.v1.Gizmo"]["properties"]
gizmo_list = v3gv["components"]["schemas"]["dev.bindery.testing.v1.GizmoList"]["properties"]
dump(f"{data}/openapi-v3.json", {
    "_comment": "Captured from kube-apiserver by conformance/reference/capture-discovery.sh. Do not edit.",
    "openapi": v3gv["openapi"],
    "info": v3gv["info"],
    "typeMeta": {"apiVersion": gizmo["apiVersion"], "kind": gizmo["kind"]},
    "objectMetaDescription": gizmo["metadata"]["description"],
    "listMetaDescription": gizmo_list["metadata"]["description"],
    "pathParameters": {p["name"]: p for p in common3},
    "actions": actions3,
    "schemas": dict(sorted(schemas.items())),
})

actions2, common2 = action_lists(v2["paths"], True)
v2defs = {k: v for k, v in defs.items() if not ours(k)}
dump(f"{data}/openapi-v2.json", {
    "_comment": "Captured from kube-apiserver by conformance/reference/capture-discovery.sh. Do not edit.",
    "top": {k: v2[k] for k in ("swagger", "info", "security", "securityDefinitions") if k in v2},
    "typeMeta": {k: v2["definitions"]["dev.bindery.testing.v1.Gizmo"]["properties"][k] for k in ("apiVersion", "kind")},
    "objectMetaDescription": v2["definitions"]["dev.bindery.testing.v1.Gizmo"]["properties"]["metadata"]["description"],
    "listMetaDescription": v2["definitions"]["dev.bindery.testing.v1.GizmoList"]["properties"]["metadata"]["description"],
    "pathParameters": {v2["parameters"][p["$ref"].split("/")[-1]]["name"]: p for p in common2},
    "actions": actions2,
    "parameters": dict(sorted(params.items())),
    "definitions": dict(sorted(v2defs.items())),
})
PY
echo "captured into $real and $data"
