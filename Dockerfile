# otel-loopguard serve: OTLP in (gRPC on 4317, HTTP on 4318), /metrics, /healthz and /readyz on
# 4318. Build and run from the repository's root:
#   docker build -t otel-loopguard:0.1.0 .
#   docker run --rm -p 4317:4317 -p 4318:4318 otel-loopguard:0.1.0
# Arguments after the image name are added to `serve --listen 0.0.0.0` (a later --listen wins);
# the health check asks port 4318, so keep --http-port there. E.g.
#   docker run --rm -p 4318:4318 otel-loopguard:0.1.0 --no-grpc
FROM python:3.12-slim AS build
# A C compiler builds the accelerators (serve's capacity figures in docs/deployment.md are
# measured with them); the final image gets only the wheel, not the compiler.
RUN apt-get update && apt-get install -y --no-install-recommends gcc libc6-dev \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY pyproject.toml README.md LICENSE hatch_build.py ./
COPY otel_loopguard ./otel_loopguard
COPY dashboards ./dashboards
RUN pip wheel --no-cache-dir --no-deps --wheel-dir /wheels .

FROM python:3.12-slim
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir --no-compile /wheels/*.whl 'zstandard>=0.22' \
    && rm -rf /wheels \
    && useradd --system --uid 10001 --no-create-home --shell /usr/sbin/nologin loopguard
USER 10001
EXPOSE 4317 4318
# The slim image has no curl: the standard library asks /healthz.
HEALTHCHECK --interval=10s --timeout=3s --start-period=10s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:4318/healthz', timeout=2)"]
ENTRYPOINT ["otel-loopguard", "serve", "--listen", "0.0.0.0"]
CMD []
