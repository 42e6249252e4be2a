"""Kopf wiring only: handlers, startup, settings, leader election and metrics.

The only package that imports kopf. Handler modules hold wiring, not logic.
"""
