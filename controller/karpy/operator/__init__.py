"""The process `karpy run` is: environment → settings → object graph (`karpy.wiring`) → run (`karpy.runtime`), its
logging and its exit codes.

The only package that imports kopf. Holds no reconciler logic and builds no object graph of its own.
"""
