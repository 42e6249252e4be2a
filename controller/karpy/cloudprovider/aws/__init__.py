"""The AWS `CloudProvider`: EC2 instance types, pricing, launch templates, CreateFleet, interruption queue.

The only package that imports boto3/botocore. Blocking SDK calls are offloaded from the event loop in one place;
AWS error codes are classified into `karpy.cloudprovider.errors` in one module.
"""
