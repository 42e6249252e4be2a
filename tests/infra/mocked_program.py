"""Run a Pulumi program's `main()` under Pulumi's mocks with whatever Python runs this script, and print what it
declared as JSON. test_toolchains.py runs it with the python of a virtualenv Pulumi's toolchain built (uv or pip),
so the program imports only what that virtualenv holds; tests/infra is on the path for `mocks` alone.

    <venv>/bin/python tests/infra/mocked_program.py <program dir> '<stack config as JSON>' <project name>
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import sys
import warnings
from pathlib import Path
from typing import Any

import mocks

import pulumi_karpy


def main(directory: Path, config: dict[str, str], project: str) -> dict[str, Any]:
    # As pulumi-language-python-exec does: the program's directory is the working directory and first on the path.
    sys.path.insert(0, str(directory))
    spec = importlib.util.spec_from_file_location("program_under_mocks", directory / "__main__.py")
    assert spec is not None
    assert spec.loader is not None
    program = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = program  # dataclasses look their module up while the class body runs
    spec.loader.exec_module(program)  # `if __name__ == "__main__"` stays idle: main() is called below
    asyncio.set_event_loop(asyncio.new_event_loop())  # pulumi.runtime.test asks for the thread's loop
    deployment = mocks.run_program(program.main, config=config, project=project)
    return {
        "prefix": sys.prefix,
        "version": "{}.{}".format(*sys.version_info[:2]),
        "pulumi_karpy": pulumi_karpy.__file__,
        "kopf": importlib.util.find_spec("kopf") is not None,
        "resources": sorted([r.type, r.name] for r in deployment.resources),
        "outputs": deployment.outputs,
    }


if __name__ == "__main__":
    # As in the test suite, warnings are errors; pulumi_aws warns when the engine imports a deprecated ec2 module.
    warnings.simplefilter("error")
    warnings.filterwarnings("ignore", message=r"aws\.ec2/encryptioncontrol", category=DeprecationWarning)
    result = main(Path(sys.argv[1]), json.loads(sys.argv[2]), sys.argv[3])
    print(json.dumps(result, default=str))
