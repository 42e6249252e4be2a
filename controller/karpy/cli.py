"""`karpy` command line. Wiring only: argument parsing, exit codes and printing; the work lives in the packages.

Exit codes: 0 success (a plan with unschedulable pods is still a success), 1 the cluster could not be read
(`explain`) or NodeClaims are left (`teardown`), 2 invalid input or usage (for `run`: invalid settings; for
`check`: a check failed), 3 nothing to plan (`simulate`, `explain`: the input holds no documents, or no
NodePool). `karpy plan` has its own, for a CI gate: 0 no disruption, 2 disruption, 1 an error (`PLAN_*`).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import karpy

if TYPE_CHECKING:
    from karpy import settings
    from karpy.api import ec2nodeclass
    from karpy.cloudprovider import types
    from karpy.plan import command as plan_command
    from karpy.simulate import plan as simulate_plan

EXIT_OK = 0
EXIT_UNREADABLE = 1
EXIT_INVALID = 2
EXIT_NOTHING = 3
EXIT_BROKEN_PIPE = 141
"""128 + SIGPIPE, what a shell reports for a command whose reader went away."""


def _width(default: int) -> int:
    """The terminal's width when printing to one; else `default`, so piped or captured output does not depend on
    the window it was run in."""
    return shutil.get_terminal_size((default, 24)).columns if sys.stdout.isatty() else default


def _scheduling(args: argparse.Namespace) -> settings.SchedulingSettings:
    """The controller's scheduling policies as `--preference-policy` and `--min-values-policy` give them."""
    from karpy import settings

    return settings.SchedulingSettings(
        preference_policy=settings.PreferencePolicy(args.preference_policy),
        min_values_policy=settings.MinValuesPolicy(args.min_values_policy),
    )


def _cluster_source_arguments(parser: Any, *, now_help: str) -> None:
    """The options explain and plan share: where the cluster is read from, the catalog that prices it, the
    NodeOverlay gate and the scheduling policies (each command adds its own input and output options)."""
    parser.add_argument("--kubeconfig", default="", help="kubeconfig file (default: $KUBECONFIG, ~/.kube/config)")
    parser.add_argument("--context", default="", help="kubeconfig context (default: the current one)")
    parser.add_argument("--now", default="", help=now_help)
    parser.add_argument("--catalog", default="aws", help="'aws' (bundled real catalog) or 'fake:N' (default: aws)")
    parser.add_argument("--region", default="", help="AWS region of the catalog (default: the nodes' region)")
    parser.add_argument("--zones", default="", help="comma-separated zones (default: each node class's subnets)")
    parser.add_argument(
        "--node-overlay", action="store_true", help="as with feature gate NodeOverlay: apply the NodeOverlays read"
    )
    parser.add_argument("--preference-policy", choices=("Respect", "Ignore"), default="Respect")
    parser.add_argument("--min-values-policy", choices=("Strict", "BestEffort"), default="Strict")


def _catalog(args: argparse.Namespace) -> simulate_plan.Options:
    """The catalog `--catalog`, `--region` and `--zones` select (explain and plan)."""
    from karpy.simulate import plan

    zones = tuple(z.strip() for z in args.zones.split(",") if z.strip()) or None
    return plan.Options(catalog=args.catalog, region=args.region, zones=zones)


def _simulate(args: argparse.Namespace) -> int:
    # Imported here so `karpy --help` stays fast and does not load numpy/scipy.
    from karpy import clock, tasks
    from karpy.simulate import manifests, plan, reasons

    zones = tuple(z.strip() for z in args.zones.split(",") if z.strip()) if args.zones else None
    options = plan.Options(
        catalog=args.catalog,
        region=args.region,
        zones=zones,
        scheduling=_scheduling(args),
    )
    try:
        cluster = manifests.load(args.files, strict=args.strict)
        if cluster.skipped:
            print(f"karpy simulate: {manifests.skipped_summary(cluster.skipped)}", file=sys.stderr)
        manifests.check_plannable(cluster, args.files)
        with tasks.collector_paused():
            planned, conflicting = plan.run_with_overlays(cluster, options, clock=clock.SystemClock())
        result = plan.to_json(
            planned, overlays=plan.overlay_statuses(cluster, conflicting), capacity_buffers=plan.rooms(cluster)
        )
    except manifests.NothingToPlan as exc:
        print(f"karpy simulate: {exc}", file=sys.stderr)
        return EXIT_NOTHING
    except manifests.InputError as exc:
        print(f"karpy simulate: {exc}", file=sys.stderr)
        return EXIT_INVALID
    except Exception as exc:  # a karpy bug: say so in one line, never with a traceback (exit codes are 0 or 2)
        print(f"karpy simulate: the simulation failed (a karpy bug, please report it): {exc!r}"[:2000], file=sys.stderr)
        return EXIT_INVALID
    if args.output == "json":
        print(json.dumps(result, indent=2))
    else:
        print(plan.to_table(result, width=_width(reasons.DEFAULT_WIDTH)))
    return EXIT_OK


def _explain(args: argparse.Namespace) -> int:
    # Imported here, like simulate: `karpy --help` stays fast.
    from karpy.api import decoding
    from karpy.explain import command, run, sources
    from karpy.kube import config
    from karpy.simulate import manifests, reasons

    try:
        now = decoding.timestamp(args.now) if args.now else None
    except ValueError:
        print(f"karpy explain: --now: not an RFC 3339 time: {args.now!r}", file=sys.stderr)
        return EXIT_INVALID
    request = command.Request(
        files=tuple(args.files or ()),
        kubeconfig=args.kubeconfig,
        context=args.context,
        catalog=_catalog(args),
        now=now,
        node_overlay=args.node_overlay,
        strict=args.strict,
        options=run.Options(
            node=args.node,
            pod=args.pod,
            simulations=args.simulations,
            repack=not args.no_repack,
            spot_to_spot=args.spot_to_spot,
            scheduling=_scheduling(args),
        ),
    )
    try:
        doc = command.explain(request)
    except manifests.NothingToPlan as exc:
        print(f"karpy explain: {exc}", file=sys.stderr)
        return EXIT_NOTHING
    except (sources.InputError, config.ConfigError, run.NotFound) as exc:
        print(f"karpy explain: {exc}", file=sys.stderr)
        return EXIT_INVALID
    except command.ReadError as exc:
        print(f"karpy explain: {exc}", file=sys.stderr)
        return EXIT_UNREADABLE
    print(command.render(doc, output=args.output, width=_width(reasons.DEFAULT_WIDTH)))
    return EXIT_OK


def _run(_: argparse.Namespace) -> int:
    # Imported here so `karpy simulate` and `--help` never load kopf.
    from karpy.cloudprovider import heap
    from karpy.operator import main as operator_main

    heap.limit_arenas()  # before any thread allocates: see `heap`
    code: int = operator_main.main()
    return code


def _check(_: argparse.Namespace) -> int:
    # Imported here: boto3 loads only for the commands that talk to AWS.
    import asyncio

    from karpy.cloudprovider.aws import preflight, startup

    result = asyncio.run(preflight.run(os.environ, imds=startup.imds_region(os.environ)))
    if isinstance(result, preflight.Failed):
        # one line, the last: the Job's `terminationMessagePolicy: FallbackToLogsOnError` makes it the message
        print(f"karpy check: {result.reason}", file=sys.stderr)
        return EXIT_INVALID
    print(f"karpy check: ok: {result.summary()}")
    return EXIT_OK


def _teardown(args: argparse.Namespace) -> int:
    # Imported here, like run: the other commands never load kopf.
    from karpy import settings
    from karpy.operator import teardown

    try:
        timeout = settings.parse_duration(args.timeout)
    except ValueError as exc:
        print(f"karpy teardown: --timeout: {exc}", file=sys.stderr)
        return EXIT_INVALID
    code: int = teardown.main(timeout=timeout)
    return code


def _teardown_parser(commands: Any) -> None:
    teardown = commands.add_parser(
        "teardown",
        help="delete every NodePool and NodeClaim and wait until their instances are terminated (before uninstall)",
        description="Delete every NodePool (whoever declared it) and every NodeClaim of the cluster of $KUBECONFIG "
        "(or in-cluster), then wait until the running controller has drained and terminated each; the chart's "
        "pre-delete hook runs it, so uninstalling karpy leaves no instance behind. Exits 1 naming the NodeClaims "
        "left when the timeout passes.",
    )
    teardown.add_argument("--timeout", default="4m", help="how long to wait, a Go duration (default: 4m)")
    teardown.set_defaults(handler=_teardown)


def _explain_parser(commands: Any) -> None:
    explain = commands.add_parser(
        "explain",
        help="why pods are pending, why nodes are (not) disrupted, what the cluster could cost (read-only)",
        description="Read a cluster through its kubeconfig (LIST only: read RBAC is enough) or a dump (`kubectl get "
        "nodepools,ec2nodeclasses,nodeclaims,nodes,pods,pdbs,pvc,pv,storageclasses,daemonsets -A -o json`), and "
        "explain it with the controller's own code: why each pending pod is pending (per NodePool, per kind of "
        "node) or where it goes, each node's disruption verdict and what the next disruption pass would do, and "
        "the cheapest node set for today's pods against today's cost and the lower bound. Exit status: 0 an "
        "explanation, 1 the cluster could not be read, 2 invalid input, 3 nothing to explain (no objects, or no "
        "NodePool).",
    )
    explain.add_argument(
        "-f", "--filename", dest="files", action="append", metavar="FILE_OR_DIR",
        help="a dump (YAML or JSON, List documents or one per object), a directory of them (read recursively) or "
        "- for standard input (repeatable); default: the live cluster",
    )  # fmt: skip
    explain.add_argument(
        "--strict", action="store_true", help="refuse a dump's kinds explain does not read instead of skipping them"
    )
    _cluster_source_arguments(explain, now_help="evaluate as of this RFC 3339 time (default: now)")
    explain.add_argument("--node", default="", help="explain this node only (simulated whatever --simulations)")
    explain.add_argument("--pod", default="", metavar="NS/NAME", help="explain this pod only")
    explain.add_argument(
        "--simulations", type=int, default=10, metavar="N",
        help="nodes simulated beyond what the next pass simulates, in consolidation order (-1: all; default 10)",
    )  # fmt: skip
    explain.add_argument("--no-repack", action="store_true", help="skip the cluster repack")
    explain.add_argument("--spot-to-spot", action="store_true", help="as with feature gate SpotToSpotConsolidation")
    explain.add_argument("-o", "--output", choices=("table", "json"), default="table", help="output format")
    explain.set_defaults(handler=_explain)


# --- karpy plan -------------------------------------------------------------------------------------------------
PLAN_NO_DISRUPTION, PLAN_ERROR, PLAN_DISRUPTION = 0, 1, 2
"""`karpy plan`'s exit codes, for a CI gate (as `terraform plan -detailed-exitcode`): 0 the proposal disrupts
nothing, 2 it does (a node drifts, may drift or is deleted; a pod is left unschedulable; a NodePool cannot launch),
1 an error (bad input, nothing to plan, the cluster cannot be read)."""


def _plan(args: argparse.Namespace) -> int:
    # Imported here, like explain: `karpy --help` stays fast.
    from karpy import settings as karpy_settings
    from karpy.api import decoding
    from karpy.explain import command as explain_command
    from karpy.kube import config
    from karpy.plan import command, run
    from karpy.simulate import manifests, reasons

    try:
        now = decoding.timestamp(args.now) if args.now else None
        replacement = karpy_settings.parse_duration(args.replacement_time)
        eviction = karpy_settings.parse_duration(args.eviction_time)
    except ValueError as exc:
        print(f"karpy plan: --now/--replacement-time/--eviction-time: {exc}", file=sys.stderr)
        return PLAN_ERROR
    request = command.Request(
        resolve=_selector_resolver(args),
        proposal=tuple(args.files),
        delete=args.delete,
        dump=tuple(args.dump or ()),
        kubeconfig=args.kubeconfig,
        context=args.context,
        catalog=_catalog(args),
        now=now,
        node_overlay=args.node_overlay,
        options=run.Options(replacement=replacement, eviction=eviction, scheduling=_scheduling(args)),
    )
    try:
        doc = command.plan_json(request)
    except (manifests.InputError, config.ConfigError, explain_command.ReadError) as exc:
        print(f"karpy plan: {exc}", file=sys.stderr)
        return PLAN_ERROR
    print(command.render(doc, output=args.output, width=_width(reasons.DEFAULT_WIDTH)))
    return PLAN_DISRUPTION if doc["disruptive"] else PLAN_NO_DISRUPTION


def _selector_resolver(args: argparse.Namespace) -> plan_command.Resolver | None:
    """The AWS provider's own selector resolution, read-only, when plan is given AWS access (a region: --region,
    AWS_REGION or AWS_DEFAULT_REGION; boto3 finds the credentials as usual) and not --no-aws. Built here so that
    karpy.plan never imports AWS (pyproject's import contracts)."""
    region = args.region or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or ""
    if args.no_aws or not region:
        return None

    def resolve(nodeclasses: Sequence[ec2nodeclass.EC2NodeClass]) -> dict[str, types.SelectorResolution]:
        # Imported only when a selector changes: a plan that needs no AWS never loads boto3.
        from karpy import clock
        from karpy.cloudprovider.aws import clients, selector_lookup

        aws = clients.build_clients(region=region, max_attempts=SELECTOR_ATTEMPTS)
        return selector_lookup.resolve(
            aws, nodeclasses, clock=clock.SystemClock().now, region=region, cluster_name=args.cluster_name
        )

    return resolve


SELECTOR_ATTEMPTS = 3
"""Attempts per AWS call when plan resolves selectors: a plan is a one-off, so it gives up sooner than the
controller does and says "may drift"."""


def _plan_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "plan",
        help="what a NodePool/EC2NodeClass/NodeOverlay change would do to the running nodes (read-only)",
        description="Lay proposed NodePools, EC2NodeClasses and NodeOverlays (-f) over a cluster (its kubeconfig, "
        "read-only, or --dump) and report with the controller's own code which nodes drift and why, the waves "
        "their Drifted budgets and schedules allow, the pods moved and what holds nodes back, what the proposed "
        "pools can no longer launch, pods left unschedulable, and capacity and $/h before and after. Exit status: "
        "0 no disruption, 2 disruption, 1 error.",
    )
    parser.add_argument(
        "-f", "--filename", dest="files", action="append", required=True, metavar="FILE_OR_DIR",
        help="proposed objects (YAML or JSON), a directory of them or - (repeatable)",
    )  # fmt: skip
    parser.add_argument("--delete", action="store_true", help="the proposal deletes the objects of -f")
    parser.add_argument(
        "--dump", action="append", metavar="FILE_OR_DIR", help="a dump as `karpy explain -f` reads (default: live)"
    )
    _cluster_source_arguments(parser, now_help="plan as of this RFC 3339 time (default: now, or the dump's)")
    parser.add_argument(
        "--replacement-time", default="5m", help="how long one drift replacement takes, a Go duration (default 5m)"
    )
    parser.add_argument(
        "--no-aws", action="store_true",
        help="never call AWS: a changed AMI, subnet or security-group selector that is not by id \"may drift\" "
        "(default: resolved read-only, as the controller resolves them, when a region is given by --region, "
        "AWS_REGION or AWS_DEFAULT_REGION)",
    )  # fmt: skip
    parser.add_argument(
        "--cluster-name", default=os.environ.get("CLUSTER_NAME", ""),
        help="the EKS cluster, for alias AMI selectors (its Kubernetes version picks the AMIs; default: "
        "$CLUSTER_NAME)",
    )  # fmt: skip
    parser.add_argument(
        "--eviction-time", default="1m",
        help="how long an evicted pod takes to be Ready again, so that its PDB allows the next eviction: a wave "
        "holding more pods under a PDB than it allows at once waits that long per round (default 1m)",
    )  # fmt: skip
    parser.add_argument("-o", "--output", choices=("table", "json"), default="table", help="output format")
    parser.set_defaults(handler=_plan)


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
        "cannot be placed. Exit status: 0 a plan (unschedulable pods included), 2 invalid input (the message names "
        "the file, document, line and field), 3 nothing to plan (no documents, or no NodePool).",
    )
    simulate.add_argument(
        "-f", "--filename", dest="files", action="append", required=True, metavar="FILE_OR_DIR",
        help="multi-document YAML file, directory (read recursively) or - for standard input (repeatable)",
    )  # fmt: skip
    simulate.add_argument(
        "--strict", action="store_true",
        help="refuse kinds that take no part in scheduling (Service, ConfigMap, ...) instead of skipping them",
    )  # fmt: skip
    simulate.add_argument("--catalog", default="aws", help="'aws' (bundled real catalog) or 'fake:N' (default: aws)")
    simulate.add_argument("--region", default="us-east-1", help="AWS region of the catalog (default: us-east-1)")
    simulate.add_argument("--zones", default="", help="comma-separated zones to use (default: all in the region)")
    simulate.add_argument(
        "--preference-policy", choices=("Respect", "Ignore"), default="Respect",
        help="treat preferred affinities and ScheduleAnyway spreads as the controller's PREFERENCE_POLICY does: "
        "Respect (default) tries them first, Ignore drops them",
    )  # fmt: skip
    simulate.add_argument(
        "--min-values-policy", choices=("Strict", "BestEffort"), default="Strict",
        help="as the controller's MIN_VALUES_POLICY: Strict (default) refuses a claim short of a requirement's "
        "minValues, BestEffort relaxes minValues instead",
    )  # fmt: skip
    simulate.add_argument("-o", "--output", choices=("table", "json"), default="table", help="output format")
    simulate.set_defaults(handler=_simulate)
    _explain_parser(commands)
    _plan_parser(commands)
    run = commands.add_parser(
        "run",
        help="run the controller (settings from the environment, upstream Karpenter's variable names)",
        description="Run the controller against the cluster of $KUBECONFIG (or in-cluster). Settings come from "
        "environment variables such as CLUSTER_NAME, INTERRUPTION_QUEUE, BATCH_MAX_DURATION, LOG_LEVEL. Exit status: 0 "
        "stopped, 1 the Lease was lost (or a karpy bug), 2 invalid settings (each bad variable named), a kubeconfig "
        "it cannot use or credentials/RBAC the API server refuses, 3 the API server cannot be reached.",
    )
    run.set_defaults(handler=_run)
    check = commands.add_parser(
        "check",
        help="make the AWS start-up checks of `run` and exit (region, identity, EC2, interruption queue)",
        description="Make the checks `karpy run` makes of AWS before it starts, with the same environment "
        "(AWS_REGION, AWS_DEFAULT_REGION or instance metadata; INTERRUPTION_QUEUE) and credentials: the region, STS "
        "GetCallerIdentity, a dry-run EC2 DescribeInstanceTypes and, when INTERRUPTION_QUEUE is set, SQS GetQueueUrl. "
        "Exit status: 0 all passed (one line naming the region, identity and queue), 2 one failed (one line on "
        "standard error with AWS's reason).",
    )
    check.set_defaults(handler=_check)
    _teardown_parser(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        code: int = args.handler(args)
    except BrokenPipeError:  # `karpy simulate ... | head`: the reader left; say nothing more, as other tools do
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_BROKEN_PIPE
    return code


if __name__ == "__main__":
    sys.exit(main())
