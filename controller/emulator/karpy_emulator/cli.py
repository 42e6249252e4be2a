"""`karpy-emulator demo`: watch karpy scale an emulated cluster. The emulator's own console script, so the controller's
`karpy` command (and its image) never carries the emulation."""

from __future__ import annotations

import argparse
import pathlib
import sys
from collections.abc import Sequence

from karpy_emulator import demo, up


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="karpy-emulator", description="karpy's local emulation (tests and the demo)")
    commands = parser.add_subparsers(dest="command", required=True)
    run_demo = commands.add_parser(
        "demo",
        help="watch karpy scale an emulated cluster (moto + an emulated API server), exits 0 when every step settled",
        description="Start an emulated EKS cluster and AWS (moto) in-process, run the controller against it, apply a "
        "default EC2NodeClass and NodePool and the inflate Deployment, scale it 0 -> 8 -> 40 -> 5 -> 0 and show the "
        "pods, NodeClaims, nodes and cost live, then a summary.",
    )
    run_demo.add_argument("--live", choices=("auto", "always", "never"), default="auto", help="redraw in place (ANSI)")
    run_up = commands.add_parser(
        "up",
        help="run a local EKS cluster (emulated API server, AWS on moto, karpy) for kubectl until Ctrl-C",
        description="Start the emulated cluster, AWS (moto) and the karpy controller, write a kubeconfig (context "
        "named for the cluster) and serve until Ctrl-C or SIGTERM.",
    )
    run_up.add_argument(
        "--cluster-name", default="karpy-local", help="the cluster's (and the kubeconfig context's) name"
    )
    run_up.add_argument("--region", default="us-east-1", help="the emulated AWS region")
    run_up.add_argument("--zones", type=_positive, default=3, help="availability zones with a subnet (1-6)")
    run_up.add_argument("--system-nodes", type=_not_negative, default=2, help="nodes of a managed node group")
    run_up.add_argument("--no-controller", action="store_true", help="leave karpy out: run `karpy run` yourself")
    run_up.add_argument("--kubeconfig", type=pathlib.Path, default=None, help="where to write the kubeconfig "
                        "(default: <cluster-name>.kubeconfig here)")  # fmt: skip
    return parser


def _positive(text: str) -> int:
    value = _not_negative(text)
    if not 1 <= value <= 6:
        raise argparse.ArgumentTypeError(f"{text!r}: must be between 1 and 6")
    return value


def _not_negative(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} must not be negative")
    return value


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "up":
        options = up.Options(
            cluster_name=args.cluster_name,
            region=args.region,
            zones=args.zones,
            system_nodes=args.system_nodes,
            controller=not args.no_controller,
            kubeconfig=args.kubeconfig,
        )
        return up.main(options, out=sys.stdout)
    live = {"auto": None, "always": True, "never": False}[args.live]
    code: int = demo.main(demo.Options(live=live))
    return code


if __name__ == "__main__":
    sys.exit(main())
