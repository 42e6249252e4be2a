"""Typed errors of the cloud-provider contract. Reconcilers branch on these types, never on message strings."""

from __future__ import annotations

import enum


class CloudProviderError(Exception):
    """Base of every error a `CloudProvider` raises."""


class StartupCheckFailed(CloudProviderError):
    """The provider cannot run with these settings (e.g. ENABLE_ZONAL_SHIFT on a cluster ARC zonal shift does not
    know): start-up stops with this message."""


class NodeClaimNotFound(CloudProviderError):
    """The instance behind a NodeClaim (or provider id) does not exist any more."""


class InsufficientCapacity(CloudProviderError):
    """No compatible offering could be launched; the NodeClaim is deleted and its pods re-provisioned."""


class NodeClassNotReady(CloudProviderError):
    """The NodeClaim's node class is missing a resolved AMI, subnet, security group or instance profile."""


class UnevaluatedNodePool(CloudProviderError):
    """NodeOverlays are on and have not been evaluated against this NodePool yet: its instance types would carry
    prices and capacity the overlays may change, so it is left out until they are (core: UnevaluatedNodePoolError)."""


class CreateErrorReason(enum.StrEnum):
    LAUNCH_TEMPLATE = "LaunchTemplateCreationFailed"
    FLEET = "FleetCreationFailed"
    UNAUTHORIZED = "Unauthorized"
    THROTTLED = "Throttled"
    INVALID_REQUEST = "InvalidRequest"
    NODE_CLASS = "NodeClassResolutionFailed"
    INTERNAL = "InternalError"
    DRY_RUN = "DryRun"
    """DRY_RUN is set: the launch was logged, not made."""


class CreateError(CloudProviderError):
    """A launch failed for a reason other than capacity; `reason` is stable, `message` is for people."""

    def __init__(self, reason: CreateErrorReason, message: str) -> None:
        super().__init__(f"{reason.value}: {message}")
        self.reason = reason
        self.message = message
