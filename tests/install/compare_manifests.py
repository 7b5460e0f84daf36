#!/usr/bin/env python3
"""Compares two renders of podshaper's install: kustomize's (the reference) and Helm's.

    compare_manifests.py KUSTOMIZE.yaml HELM.yaml [--allow-extra KIND/NAME:PATH]...

Passes when both hold the same objects, by (kind, namespace, name), and each object is
the same, field by field, except for what Helm may add:
  - labels: app.kubernetes.io/{managed-by,instance,part-of,version}, helm.sh/chart
    (every kustomize label must be there, with its value);
  - CEL expressions (expression, messageExpression) are compared with their runs of
    whitespace made one space;
  - a pod template's checksum/config annotation (rolls the pods when a config changes);
  - a CustomResourceDefinition's labels (Helm's crds/ are byte copies of crds/, which
    kustomize labels on the way);
  - ConfigMap data["config.yaml"] is compared as the YAML it holds, not as text;
  - Helm's hooks (helm.sh/hook: the uninstall's prune, `helm test`) are Helm's own: a
    kustomize install has no such moment, so they are left out;
  - PATHs given with --allow-extra: fields (such as
    data.config.yaml.leaderElection.leaseDuration: a ConfigMap's config.yaml is parsed)
    that Helm's object may have and kustomize's lacks.
Prints one line per object (ok: / FAIL:) and exits 1 on any difference.
"""
import sys

import yaml

# Kubernetes' recommended labels, which Helm's objects all carry; kustomize's base adds
# part-of and version, but not to an overlay's own objects.
HELM_LABELS = {"app.kubernetes.io/managed-by", "app.kubernetes.io/instance", "helm.sh/chart",
               "app.kubernetes.io/part-of", "app.kubernetes.io/version"}
# CEL: whitespace between tokens means nothing, and YAML parsers disagree on the line
# breaks of a folded (>-) scalar with more-indented lines.
CEL_KEYS = {"expression", "messageExpression"}
HELM_POD_ANNOTATIONS = {"checksum/config"}


def load(path):
    with open(path) as f:
        docs = [d for d in yaml.safe_load_all(f) if d]
    objects = {}
    for d in docs:
        md = d.get("metadata", {})
        if "helm.sh/hook" in (md.get("annotations") or {}):
            continue
        key = (d.get("kind"), md.get("namespace", ""), md.get("name"))
        if key in objects:
            sys.exit(f"{path}: {key} appears twice")
        objects[key] = d
    return objects


def diff(ref, got, path, allowed, out):
    """Appends to out a line for each difference between ref and got."""
    if isinstance(ref, dict) and isinstance(got, dict):
        for k in ref:
            if k not in got:
                out.append(f"{path}.{k}: missing (kustomize: {ref[k]!r})")
            elif k in CEL_KEYS and isinstance(ref[k], str) and isinstance(got[k], str):
                if ref[k].split() != got[k].split():
                    out.append(f"{path}.{k}: kustomize {ref[k]!r}, helm {got[k]!r}")
            else:
                diff(ref[k], got[k], f"{path}.{k}", allowed, out)
        for k in got:
            if k not in ref and f"{path}.{k}".lstrip(".") not in allowed:
                out.append(f"{path}.{k}: extra (helm: {got[k]!r})")
    elif isinstance(ref, list) and isinstance(got, list) and len(ref) == len(got):
        for i, (r, g) in enumerate(zip(ref, got)):
            diff(r, g, f"{path}[{i}]", allowed, out)
    elif ref != got or type(ref) is not type(got):
        out.append(f"{path}: kustomize {ref!r}, helm {got!r}")


def normalize(obj, helm):
    """A copy of obj with what Helm may add taken out (labels checked separately)."""
    obj = yaml.safe_load(yaml.safe_dump(obj))
    md = obj.setdefault("metadata", {})
    labels = md.pop("labels", None) or {}
    if obj.get("kind") == "ConfigMap":
        for k, v in (obj.get("data") or {}).items():
            if k.endswith(".yaml"):
                obj["data"][k] = yaml.safe_load(v)
    tmpl = (obj.get("spec") or {}).get("template", {}).get("metadata")
    if helm and tmpl and "annotations" in tmpl:
        for a in HELM_POD_ANNOTATIONS:
            tmpl["annotations"].pop(a, None)
        if not tmpl["annotations"]:
            del tmpl["annotations"]
    return obj, labels


def main():
    args = sys.argv[1:]
    allow = {}
    while "--allow-extra" in args:
        i = args.index("--allow-extra")
        what, path = args[i + 1].split(":", 1)
        allow.setdefault(what, set()).add(path)
        del args[i:i + 2]
    ref, got = load(args[0]), load(args[1])
    failed = 0
    for key in sorted(set(ref) | set(got), key=str):
        kind, ns, name = key
        label = f"{kind} {ns + '/' if ns else ''}{name}"
        if key not in got:
            print(f"FAIL: {label}: kustomize has it, helm does not")
            failed += 1
            continue
        if key not in ref:
            print(f"FAIL: {label}: helm has it, kustomize does not")
            failed += 1
            continue
        r, rlabels = normalize(ref[key], helm=False)
        g, glabels = normalize(got[key], helm=True)
        problems = []
        if kind != "CustomResourceDefinition":
            for k, v in rlabels.items():
                if glabels.get(k) != v:
                    problems.append(f"metadata.labels[{k}]: kustomize {v!r}, helm {glabels.get(k)!r}")
            for k in set(glabels) - set(rlabels) - HELM_LABELS:
                problems.append(f"metadata.labels[{k}]: extra (helm: {glabels[k]!r})")
        diff(r, g, "", allow.get(f"{kind}/{name}", set()), problems)
        if problems:
            failed += 1
            print(f"FAIL: {label}:")
            for p in problems:
                print(f"    {p}")
        else:
            print(f"ok: {label}")
    print(f"{len(ref)} objects from kustomize, {len(got)} from helm, {failed} differ or are missing")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
