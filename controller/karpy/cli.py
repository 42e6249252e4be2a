"""`karpy` command line. Wiring only: argument parsing, exit codes and printing; the work lives in the packages.

Exit codes: 0 success (a plan with unschedulable pods is still a success), 2 invalid input or usage (for `run`:
invalid settings).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

import karpy

EXIT_OK = 0
EXIT_INVALID = 2


def _simulate(args: argparse.Namespace) -> int:
    # Imported here so `karpy --help` stays fast and does not load numpy/scipy.
    from karpy import clock
    from karpy.simulate import manifests, plan

    zones = tuple(z.strip() for z in args.zones.split(",") if z.strip()) if args.zones else None
    options = plan.Options(catalog=args.catalog, region=args.region, zones=zones)
    try:
        cluster = manifests.load(args.files)
        result = plan.to_json(plan.run(cluster, options, clock=clock.SystemClock()))
    except manifests.InputError as exc:
        print(f"karpy simulate: {exc}", file=sys.stderr)
        return EXIT_INVALID
    except Exception as exc:  # a karpy bug: say so in one line, never with a traceback (exit codes are 0 or 2)
        print(f"karpy simulate: the simulation failed (a karpy bug, please report it): {exc!r}"[:2000], file=sys.stderr)
        return EXIT_INVALID
    if args.output == "json":
        print(json.dumps(result, indent=2))
    else:
        print(plan.to_table(result))
    return EXIT_OK


def _run(_: argparse.Namespace) -> int:
    # Imported here so `karpy simulate` and `--help` never load kopf.
    from karpy.operator import main as operator_main

    code: int = operator_main.main()
    return code


def _demo(args: argparse.Namespace) -> int:
    # Imported here: the demo needs the emulation (moto, kmock: the dev extra), which `karpy run` must not load.
    from karpy.sim import demo

    live = {"auto": None, "always": True, "never": False}[args.live]
    code: int = demo.main(demo.Options(live=live))
    return code


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="karpy", description="Karpenter-compatible node autoscaler for EKS")
    # The image's entry point is this command; `--version` is how a deployment checks what it runs.
    parser.add_argument("--version", action="version", version=f"karpy {karpy.__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    simulate = commands.add_parser(
        "simulate",
        help="what would Karpenter do with these manifests (offline)",
        description="Schedule the pending pods in the manifests against NodePools and a built-in instance catalog, "
        "and print the NodeClaims Karpenter would create, the pods that go to existing nodes and why the rest "
        "cannot be placed.",
    )
    simulate.add_argument(
        "-f", "--filename", dest="files", action="append", required=True, metavar="FILE_OR_DIR",
        help="multi-document YAML file or directory of them (repeatable)",
    )  # fmt: skip
    simulate.add_argument("--catalog", default="aws", help="'aws' (bundled real catalog) or 'fake:N' (default: aws)")
    simulate.add_argument("--region", default="us-east-1", help="AWS region of the catalog (default: us-east-1)")
    simulate.add_argument("--zones", default="", help="comma-separated zones to use (default: all in the region)")
    simulate.add_argument("-o", "--output", choices=("table", "json"), default="table", help="output format")
    simulate.set_defaults(handler=_simulate)
    run = commands.add_parser(
        "run",
        help="run the controller (settings from the environment, upstream Karpenter's variable names)",
        description="Run the controller against the cluster of $KUBECONFIG (or in-cluster). Settings come from "
        "environment variables such as CLUSTER_NAME, INTERRUPTION_QUEUE, BATCH_MAX_DURATION, LOG_LEVEL; invalid "
        "settings exit with status 2 and a message naming each bad variable.",
    )
    run.set_defaults(handler=_run)
    demo = commands.add_parser(
        "demo",
        help="watch karpy scale an emulated cluster (moto + an emulated API server), exits 0 when every step settled",
        description="Start an emulated EKS cluster and AWS (moto) in-process, run the controller against it, apply a "
        "default EC2NodeClass and NodePool and the inflate Deployment, scale it 0 -> 8 -> 40 -> 5 -> 0 and show the "
        "pods, NodeClaims, nodes and cost live, then a summary. Needs the dev extra (moto).",
    )
    demo.add_argument("--live", choices=("auto", "always", "never"), default="auto", help="redraw in place (ANSI)")
    demo.set_defaults(handler=_demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    code: int = args.handler(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
