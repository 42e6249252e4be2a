"""The AWS `CloudProvider`: EC2 instance types, pricing, launch templates, CreateFleet, interruption queue.

The only package that imports boto3/botocore. Blocking SDK calls are offloaded from the event loop in one place
(`clients`), where every call is also counted (`accounting`); the clients share one session, whose loader leaves the
documentation out of the service models it keeps (`sessions`); concurrent CreateFleet, DescribeInstances and
TerminateInstances requests are merged as upstream merges them (`ec2batch`); AWS error codes are classified into
`karpy.cloudprovider.errors` in one module. `faults` injects AWS failures for tests and the emulation only.
"""
