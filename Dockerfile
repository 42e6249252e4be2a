# syntax=docker/dockerfile:1
# karpy controller image: `karpy run`. Multi-stage: the builder resolves the locked dependencies with uv (controller
# extra only: the image needs neither Pulumi nor the dev tools); the runtime stage is python:3.11-slim with the
# virtualenv copied in, running as the distroless "nonroot" uid 65532 with a read-only root file system.

ARG PYTHON_IMAGE=python:3.11-slim
ARG UV_VERSION=0.13.8

FROM ${PYTHON_IMAGE} AS builder
ARG UV_VERSION
ENV UV_COMPILE_BYTECODE=1 \
    UV_LINK_MODE=copy \
    UV_PYTHON_DOWNLOADS=never \
    UV_PROJECT_ENVIRONMENT=/opt/karpy/venv
RUN pip install --no-cache-dir "uv==${UV_VERSION}"
WORKDIR /src
# Dependencies first (cached layer while only sources change): exactly the locked versions, controller extra.
COPY pyproject.toml uv.lock README.md ./
RUN uv sync --frozen --no-dev --extra controller --no-install-project
# Then the project itself (non-editable, so the venv does not point back into /src).
COPY controller/ controller/
COPY infra/ infra/
RUN uv sync --frozen --no-dev --extra controller --no-editable

FROM ${PYTHON_IMAGE} AS runtime
LABEL org.opencontainers.image.title="karpy" \
      org.opencontainers.image.description="Karpenter-compatible node autoscaler for Amazon EKS" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.source="https://github.com/karpy-dev/karpy"
ENV PATH=/opt/karpy/venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HOME=/tmp
COPY --from=builder --chown=0:0 /opt/karpy/venv /opt/karpy/venv
# 65532 = "nonroot" by convention (distroless); matches the chart's runAsUser/fsGroup. Nothing is writable but /tmp,
# which the chart mounts as an emptyDir under readOnlyRootFilesystem.
USER 65532:65532
EXPOSE 8080 8081
ENTRYPOINT ["karpy"]
CMD ["run"]
