"""The process `karpy run` is: environment → settings → login (`login`, through Kopf's login functions) → object
graph (`karpy.wiring`) → run (`karpy.runtime`), its logging, signals and exit codes.

The only package that imports kopf. Holds no reconciler logic and builds no object graph of its own.
"""
