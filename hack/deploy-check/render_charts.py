"""Renders and lints the project's Helm charts with the real Helm engine
(helm-python-sdk, import helm_python) and prints one JSON document on stdout:

    {"cases": [{"chart", "case", "values", "release", "namespace",
                "manifests": {template path: text} | null,
                "error": str | null, "lint": {...} | null}]}

Used by hack/deploy-check/tests/helm_charts.rs; run it by hand with
    python hack/deploy-check/render_charts.py <repository root>

With `render`, renders one chart as `helm template` would and prints its
manifests as JSON ({template path: text}); the lab installs the member chart's
ServiceAccount and RBAC this way:
    python hack/deploy-check/render_charts.py render <chart dir> <values JSON> <release> <namespace>
"""

import json
import sys
from pathlib import Path

import helm_python

MEMBER = "mongodb-member-operator"
KARMADA = "mongodb-member-operator-karmada"

# (chart, case name, values, release name, release namespace)
CASES = [
    (MEMBER, "default", {}, MEMBER, MEMBER),
    (MEMBER, "watchNamespace", {"watchNamespace": "databases"}, MEMBER, MEMBER),
    (MEMBER, "badLogFormat", {"logFormat": "xml"}, MEMBER, MEMBER),
    (
        MEMBER,
        "operations",
        {
            "replicas": 2,
            "clusterName": "member1",
            "image": {"digest": "sha256:" + "ab" * 32},
            "metrics": {"serviceMonitor": {"enabled": True}, "prometheusRule": {"enabled": True}},
        },
        MEMBER,
        MEMBER,
    ),
    (MEMBER, "replicasWithoutLeaderElection", {"replicas": 2, "leaderElection": {"enabled": False}}, MEMBER, MEMBER),
    (MEMBER, "unknownValue", {"replica": 2}, MEMBER, MEMBER),
    (MEMBER, "badDigest", {"image": {"digest": "latest"}}, MEMBER, MEMBER),
    (KARMADA, "default", {}, MEMBER, "karmada-system"),
    (
        KARMADA,
        "clusterAffinity",
        {"propagation": {"clusterAffinity": {"clusterNames": ["member1", "member2", "member3"]}}},
        MEMBER,
        "karmada-system",
    ),
]


def run(root: Path) -> dict:
    results = []
    for chart_name, case, values, release, namespace in CASES:
        chart_dir = root / "charts" / chart_name
        result = {
            "chart": chart_name,
            "case": case,
            "values": values,
            "release": release,
            "namespace": namespace,
            "manifests": None,
            "error": None,
            "lint": None,
        }
        try:
            chart = helm_python.Chart.load(str(chart_dir))
            result["manifests"] = chart.render(values=values, name=release, namespace=namespace)
        except helm_python.HelmError as err:
            result["error"] = f"{type(err).__name__}: {err}"
        result["lint"] = helm_python.lint(str(chart_dir), values=values, namespace=namespace)
        results.append(result)
    return {"helm_sdk_version": helm_python.helm_sdk_version(), "cases": results}


def render(chart_dir: str, values: dict, release: str, namespace: str) -> dict:
    chart = helm_python.Chart.load(chart_dir)
    return chart.render(values=values, name=release, namespace=namespace)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "render":
        if len(sys.argv) != 6:
            sys.exit("usage: render_charts.py render <chart dir> <values JSON> <release> <namespace>")
        _, _, chart_dir, values_json, release_name, release_namespace = sys.argv
        json.dump(render(chart_dir, json.loads(values_json), release_name, release_namespace), sys.stdout)
        sys.stdout.write("\n")
        sys.exit(0)
    repository_root = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parents[2]
    json.dump(run(repository_root), sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")
