"""The running controller: how watch events become queued work (`routing`), the keyed work queues, the Lease and what
the leader runs (`leadership`), the metrics and health servers, metrics and watch-event observers.

No decisions about NodeClaims or pods live here (the reconciler packages make them); must not import kopf.
"""
