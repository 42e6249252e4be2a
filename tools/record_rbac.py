"""Regenerate tests/charts/rbac-used.json: every (verb, group, resource, name) the controller sends the emulated API
server across the e2e suite.

    .venv/bin/python tools/record_rbac.py [pytest arguments, default tests/e2e]

Each e2e test writes what the controller used in it (tests/charts/rbac.py `after_test`) into a fresh directory;
the union is written sorted, so the file does not depend on test order. The e2e tests then check, each on its own,
that everything they see is in the file; tests/charts checks the file against the chart's RBAC.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.charts import rbac  # noqa: E402  (the repository root is on the path only from here on)


def main(argv: list[str]) -> int:
    with tempfile.TemporaryDirectory(prefix="karpy-rbac-") as record_dir:
        env = {**os.environ, rbac.RECORD_DIR_ENV: record_dir}
        command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *(argv or ["tests/e2e"])]
        code = subprocess.run(command, cwd=REPO, env=env, check=False).returncode
        if code != 0:
            print(f"record_rbac: pytest exited {code}; {rbac.RECORDING} left unchanged", file=sys.stderr)
            return code
        uses = rbac.merge(Path(record_dir))
    rbac.RECORDING.write_text(json.dumps([list(use) for use in uses], indent=1) + "\n")
    print(f"record_rbac: {len(uses)} uses written to {rbac.RECORDING.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
