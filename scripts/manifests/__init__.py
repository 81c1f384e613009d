"""Validation of Kubernetes manifests as the API server would: CRD structural schemas (`crd_schema.py`,
`structural_validation.py`), their CEL rules (`cel_rules.py`), the core kinds' OpenAPI schemas
(`core_schema.py`), object metadata (`object_meta.py`); `manifest_schema.py` is the entry point. Stands
alone: imports no other package of this project.
"""
