"""An in-memory `CloudProvider` with public knobs, used by tests, benchmarks and `karpy simulate`.

Must behave like the AWS provider at the contract level (the shared contract suite runs against both); must not
import `karpy.cloudprovider.aws` or boto3.
"""
