//! Tests only: this crate checks the deployment artefacts under `charts/` (the
//! member-cluster Helm chart, the Karmada chart and its Lua resource interpreter).
//! Everything lives in `tests/` (and `render_charts.py`); see README.md.
