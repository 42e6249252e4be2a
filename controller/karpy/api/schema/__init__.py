"""The single source of truth for the v1 CRD schemas: openAPIV3Schema data plus CEL rules paired with Python checks.

Each kind's module builds a plain-dict OpenAPI v3 schema (the subset apiextensions.k8s.io/v1 uses) whose
`x-kubernetes-validations` entries are `core.Rule` values: upstream's CEL text and message, plus a Python predicate
implementing the same rule so the parser enforces it without a CEL engine. `core.render` strips the predicates to
produce the manifest form. Pure data: no I/O, no validation logic (that lives in `karpy.api.validator`).
"""
