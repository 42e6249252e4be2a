"""A Kubernetes API server for tests and the demo: kmock 0.8's emulator with the gaps a real client trips on fixed.

`server.FakeKubeAPI` stores objects the way an API server does (uid, resourceVersion, generation, 409/422/429),
filters by label and field selectors, patches (merge, JSON, strategic), replaces, binds, evicts under
PodDisruptionBudgets and validates karpenter custom resources with `karpy.api.parse`; `runner.KubeAPIRunner`
serves it on 127.0.0.1 from a background thread and writes a kubeconfig.

kmock's private modules are reached only through `kmock_private`, which names the pinned version. Never imported
by the controller (`karpy`); no kopf here.
"""
