"""The cloud-provider boundary: the `CloudProvider` protocol, instance types, offerings and typed errors.

`types` and `errors` are the contract; `fake` and `aws` implement it and must not import each other. Nothing that
crosses this boundary is an AWS payload or error code.
"""
