"""The interruption queue, its policy and the five EventBridge rules that feed it (upstream's CloudFormation)."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from pulumi_karpy import documents
from pulumi_karpy import scope as pulumi_karpy_scope


@dataclass(frozen=True, slots=True)
class Interruption:
    queue: aws.sqs.Queue
    queue_policy: aws.sqs.QueuePolicy
    rules: list[aws.cloudwatch.EventRule]
    targets: list[aws.cloudwatch.EventTarget]

    @property
    def resources(self) -> list[pulumi.Resource]:
        """Everything the controller needs in place before it polls: without a target, no message ever arrives."""
        return [self.queue, self.queue_policy, *self.rules, *self.targets]


def declare(scope: pulumi_karpy_scope.Scope) -> Interruption:
    spec = scope.spec.queue
    kms = spec.kms_master_key_id
    queue = aws.sqs.Queue(
        f"{scope.name}-queue",
        name=spec.name,
        message_retention_seconds=documents.QUEUE_RETENTION_SECONDS,
        # Only one encryption setting at a time: sqs_managed_sse_enabled conflicts with a KMS key (TF PR #2575).
        sqs_managed_sse_enabled=None if kms is not None else True,
        kms_master_key_id=kms,
        kms_data_key_reuse_period_seconds=spec.kms_data_key_reuse_period_seconds,
        tags=dict(scope.tags),
        opts=scope.child,
    )
    statements = pulumi.Output.from_input([dict(s) for s in spec.policy_statements])  # Outputs inside resolved
    queue_policy = aws.sqs.QueuePolicy(
        f"{scope.name}-queue-policy",
        queue_url=queue.url,
        policy=pulumi.Output.all(queue.arn, statements).apply(
            lambda resolved: json.dumps(documents.queue_policy(resolved[0], resolved[1]))
        ),
        opts=scope.child,
    )
    rules, targets = [], []
    for rule_spec in documents.EVENT_RULES:
        # A name prefix, not a name: AWS appends a unique suffix, so two stacks (or a blue/green pair) on one
        # cluster and account never collide (terraform-aws-eks `rule_name_prefix`).
        rule = aws.cloudwatch.EventRule(
            f"{scope.name}-rule-{rule_spec.key}",
            name_prefix=documents.event_rule_name_prefix(rule_spec, spec.rule_name_prefix),
            description=f"karpy interruption handling: {rule_spec.detail_type}",
            event_pattern=json.dumps(rule_spec.pattern()),
            tags={**scope.tags, "ClusterName": scope.cluster_name},
            opts=scope.child,
        )
        targets.append(
            aws.cloudwatch.EventTarget(
                f"{scope.name}-rule-{rule_spec.key}",
                rule=rule.name,
                arn=queue.arn,
                target_id=documents.EVENT_TARGET_ID,
                opts=scope.child,
            )
        )
        rules.append(rule)
    return Interruption(queue=queue, queue_policy=queue_policy, rules=rules, targets=targets)
