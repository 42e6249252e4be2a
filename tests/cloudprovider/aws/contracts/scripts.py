"""AL2's /etc/eks/bootstrap.sh and Windows' Start-EKSBootstrap.ps1: the arguments they take, and the kubelet flags
they pass on.

- bootstrap.sh: awslabs/amazon-eks-ami templates/al2/runtime/bootstrap.sh (the last version before AL2 left the
  repository): each option below takes one value, anything else is a positional argument and only one, the cluster
  name, is read; `--ip-family` is ipv4/ipv6, `--local-disks` mount/raid0/raid10, `--use-max-pods` true/false.
- Start-EKSBootstrap.ps1: the parameters AWS documents for the EKS optimized Windows AMIs (EKSClusterName,
  KubeletExtraArgs, KubeProxyExtraArgs, APIServerEndpoint, Base64ClusterCA, DNSClusterIP, ContainerRuntime,
  ServiceCIDR, ExcludedSnatCIDRs), each a single-quoted PowerShell string.
- The kubelet flags: the kubelet's own command line (k8s cmd/kubelet/app/options), with its label and taint rules.
"""

from __future__ import annotations

import ipaddress
import re
import shlex

from tests.cloudprovider.aws.contracts import kubelet, mime

BOOTSTRAP_OPTIONS = frozenset(
    """
    --use-max-pods --b64-cluster-ca --apiserver-endpoint --kubelet-extra-args --enable-docker-bridge
    --aws-api-retry-attempts --docker-config-json --containerd-config-file --pause-container-account
    --pause-container-version --dns-cluster-ip --container-runtime --ip-family --service-ipv4-cidr
    --service-ipv6-cidr --enable-local-outpost --cluster-id --mount-bpf-fs --local-disks
    """.split()  # noqa: SIM905 -- the names read better as a block
)
BOOTSTRAP_CHOICES = {
    "--ip-family": {"ipv4", "ipv6"},
    "--local-disks": {"mount", "raid0", "raid10"},
    "--use-max-pods": {"true", "false"},
}
WINDOWS_PARAMETERS = frozenset(
    {
        "EKSClusterName",
        "KubeletExtraArgs",
        "KubeProxyExtraArgs",
        "APIServerEndpoint",
        "Base64ClusterCA",
        "DNSClusterIP",
        "ContainerRuntime",
        "ServiceCIDR",
        "ExcludedSnatCIDRs",
    }
)
KUBELET_FLAGS = frozenset(
    """
    --node-labels --register-with-taints --max-pods --pods-per-core --system-reserved --kube-reserved
    --eviction-hard --eviction-soft --eviction-soft-grace-period --eviction-max-pod-grace-period
    --image-gc-high-threshold --image-gc-low-threshold --cpu-cfs-quota --cluster-dns --node-ip
    """.split()  # noqa: SIM905 -- the names read better as a block
)
_WINDOWS_CALL = re.compile(r"^& \$EKSBootstrapScriptFile (.*)$", re.MULTILINE)
_PS_ARGUMENT = re.compile(r"-(\w+) '((?:[^']|'')*)'")


def kubelet_args_problems(text: str) -> list[str]:
    out = []
    for word in shlex.split(text):
        name, sep, value = word.partition("=")
        if name not in KUBELET_FLAGS:
            out.append(f"{name}: not a kubelet flag karpy may pass")
        elif not sep:
            out.append(f"{name}: needs a value")
        elif name == "--node-labels":
            parsed, problems = kubelet.parse_labels_flag(value)
            out += problems + kubelet.node_label_problems(parsed)
        elif name == "--register-with-taints":
            out += kubelet.taints_flag_problems(value)
        elif name in ("--max-pods", "--pods-per-core", "--eviction-max-pod-grace-period") and not value.isdigit():
            out.append(f"{name}: {value!r} is not an integer")
    return out


def bootstrap_script(text: str) -> tuple[list[tuple[str, str]], str, list[str]]:
    """(parts, the bootstrap.sh part's body, problems) of an AL2 user data."""
    parts, out = mime.parts(text)
    scripts = [body for _, body in parts if "/etc/eks/bootstrap.sh" in body]
    if len(scripts) != 1:
        return parts, "", [*out, f"expected one part calling /etc/eks/bootstrap.sh, found {len(scripts)}"]
    return parts, scripts[0], out


def al2_arguments(script: str) -> tuple[list[str], dict[str, str]]:
    """(positional arguments, options) of the bootstrap.sh call, read as bootstrap.sh's own loop reads them."""
    line = script[script.index("/etc/eks/bootstrap.sh") :].replace("\\\n", " ")
    words = shlex.split(line.splitlines()[0])[1:]
    positional: list[str] = []
    options: dict[str, str] = {}
    index = 0
    while index < len(words):
        if words[index] in BOOTSTRAP_OPTIONS and index + 1 < len(words):
            options[words[index]] = words[index + 1]
            index += 2
        else:
            positional.append(words[index])
            index += 1
    return positional, options


def al2_problems(text: str) -> list[str]:
    parts, script, out = bootstrap_script(text)
    if not script:
        return out
    if parts[-1][1] != script:
        out.append("the bootstrap.sh part is not the last: the user's parts must run before the node joins")
    positional, seen = al2_arguments(script)
    if len(positional) != 1:
        out.append(f"bootstrap.sh takes one positional argument (the cluster name), got {positional}")
    for option, choices in BOOTSTRAP_CHOICES.items():
        if option in seen and seen[option] not in choices:
            out.append(f"{option}: {seen[option]!r} is not one of {sorted(choices)}")
    for required in ("--apiserver-endpoint", "--b64-cluster-ca"):
        if required not in seen:
            out.append(f"{required}: missing")
    out += _dns_problems(seen.get("--dns-cluster-ip"))
    out += kubelet_args_problems(seen.get("--kubelet-extra-args", ""))
    return out


def windows_arguments(text: str) -> tuple[dict[str, str], str]:
    """(parameters, what is left unparsed) of the one Start-EKSBootstrap.ps1 call; ({}, text) when there is not one."""
    calls = _WINDOWS_CALL.findall(text)
    if len(calls) != 1:
        return {}, text
    arguments = {name: value.replace("''", "'") for name, value in _PS_ARGUMENT.findall(calls[0])}
    return arguments, _PS_ARGUMENT.sub("", calls[0]).strip()


def windows_problems(text: str) -> list[str]:
    if not (text.startswith("<powershell>\n") and text.endswith("\n</powershell>")):
        return ["not one <powershell> block"]
    arguments, leftover = windows_arguments(text)
    if not arguments:
        return ["expected one Start-EKSBootstrap.ps1 call"]
    out = [f"unparsed arguments: {leftover!r}"] if leftover else []
    out += [f"-{name}: not a Start-EKSBootstrap.ps1 parameter" for name in arguments if name not in WINDOWS_PARAMETERS]
    for required in ("EKSClusterName", "APIServerEndpoint", "Base64ClusterCA"):
        if not arguments.get(required):
            out.append(f"-{required}: missing")
    out += _dns_problems(arguments.get("DNSClusterIP"))
    out += kubelet_args_problems(arguments.get("KubeletExtraArgs", ""))
    return out


def _dns_problems(address: str | None) -> list[str]:
    if address is None:
        return []
    try:
        ipaddress.ip_address(address)
    except ValueError:
        return [f"cluster DNS {address!r} is not an IP address"]
    return []
