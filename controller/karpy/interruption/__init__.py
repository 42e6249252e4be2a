"""Interruption handling: turns queue messages (spot warnings, state changes, health events) into cordon-and-drain.

Depends on the `CloudProvider` protocol and domain messages only; the SQS client lives in `cloudprovider.aws`.
"""
