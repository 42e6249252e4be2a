"""`karpy-emulator demo`: watch karpy scale an emulated cluster. The emulator's own console script, so the controller's
`karpy` command (and its image) never carries the emulation."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from karpy_emulator import demo


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
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    live = {"auto": None, "always": True, "never": False}[args.live]
    code: int = demo.main(demo.Options(live=live))
    return code


if __name__ == "__main__":
    sys.exit(main())
