# syntax=docker/dockerfile:1
# karpy controller image: `karpy run`. Multi-stage and multi-arch (build with --platform linux/amd64,linux/arm64):
# - builder: Debian 12 with its python3.11, uv from PyPI pinned by wheel hash, and the locked `controller` extra
#   (no Pulumi, no emulator, no test libraries) in a virtualenv at /opt/karpy/venv;
# - runtime: distroless python3 on Debian 12 (the same /usr/bin/python3.11 the virtualenv points at), with no shell,
#   no pip and no package manager, running as its "nonroot" uid 65532 under a read-only root file system.
# Both bases are pinned by digest; bump the tag and digest together.

ARG BUILD_IMAGE=debian:12-slim@sha256:56ff6d36d4eb3db13a741b342ec466f121480b5edded42e4b7ee850ce7a418ee
ARG RUNTIME_IMAGE=gcr.io/distroless/python3-debian12:nonroot@sha256:db274ad45039fcee19d5cb5fc87700b64bce612f57c03b69f9a59b6bcd6545c8

FROM ${BUILD_IMAGE} AS builder
RUN apt-get update \
 && apt-get install --no-install-recommends --no-install-suggests --yes python3-venv \
 && rm -rf /var/lib/apt/lists/*
COPY tools/uv-requirements.txt /tmp/uv-requirements.txt
RUN python3 -m venv /opt/uv \
 && /opt/uv/bin/pip install --no-cache-dir --disable-pip-version-check --require-hashes -r /tmp/uv-requirements.txt
ENV UV_COMPILE_BYTECODE=1 \
    UV_LINK_MODE=copy \
    UV_PYTHON=/usr/bin/python3.11 \
    UV_PYTHON_DOWNLOADS=never \
    UV_PROJECT_ENVIRONMENT=/opt/karpy/venv
WORKDIR /src
# Dependencies first (a cached layer while only sources change): exactly the locked versions, controller extra.
COPY pyproject.toml uv.lock README.md ./
RUN /opt/uv/bin/uv sync --frozen --no-dev --extra controller --no-install-project
# Then the controller package, non-editable so the virtualenv does not point back into /src. .dockerignore leaves out
# the emulator (controller/emulator: the karpy-emulator distribution, dev extra) and the Pulumi component (infra/).
COPY controller/ controller/
RUN /opt/uv/bin/uv sync --frozen --no-dev --extra controller --no-editable

FROM ${RUNTIME_IMAGE} AS runtime
LABEL org.opencontainers.image.title="karpy" \
      org.opencontainers.image.description="Karpenter-compatible node autoscaler for Amazon EKS: informer and work-queue reconcilers, Kopf for login" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.source="https://github.com/karpy-dev/karpy"
ENV PATH=/opt/karpy/venv/bin:/usr/bin:/bin \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HOME=/tmp
COPY --from=builder --chown=0:0 /opt/karpy/venv /opt/karpy/venv
# 65532 = distroless "nonroot"; matches the chart's runAsUser/fsGroup. Nothing is writable but /tmp, which the chart
# mounts as an emptyDir under readOnlyRootFilesystem.
USER 65532:65532
EXPOSE 8080 8081
ENTRYPOINT ["/opt/karpy/venv/bin/karpy"]
CMD ["run"]
