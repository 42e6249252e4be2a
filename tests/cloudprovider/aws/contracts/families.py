"""Which consumer reads a family's user data."""

from __future__ import annotations

from tests.cloudprovider.aws.contracts import bottlerocket, nodeadm, scripts

from karpy.api import ec2nodeclass

Family = ec2nodeclass.AMIFamily


def problems(family: Family, text: str) -> list[str]:
    """Why a node of `family` would not boot and join with `text` as its user data; [] when it would."""
    match family:
        case Family.AL2023:
            return nodeadm.problems(text)
        case Family.AL2:
            return scripts.al2_problems(text)
        case Family.BOTTLEROCKET:
            return bottlerocket.problems(text)
        case Family.WINDOWS2019 | Family.WINDOWS2022 | Family.WINDOWS2025:
            return scripts.windows_problems(text)
        case _:
            return []  # Custom: the user's own bootstrap, passed through untouched
