# kemem-es serve in a container: the package (with the server extra) installed from this
# checkout, the embedding model mounted read-only at /models. docker-compose.yml runs it next to
# an OpenSearch container (service "kemem"); alone:
#   docker build -t kemem-es .
#   docker run --rm -p 127.0.0.1:8765:8765 -v /path/to/m3e-small-onnx:/models:ro \
#     -e KEMEM_ES_URL=http://HOST:9200 -e KEMEM_SERVER_API_KEYS='{"k-ops": ["*"]}' kemem-es
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 \
    KEMEM_MODEL_DIR=/models KEMEM_HOME=/var/lib/kemem
WORKDIR /src
COPY pyproject.toml README.md ./
COPY kemem_es ./kemem_es
RUN pip install ".[server]" && rm -rf /src \
    && useradd --system --home-dir /var/lib/kemem --create-home kemem
USER kemem
WORKDIR /var/lib/kemem
EXPOSE 8765
HEALTHCHECK --interval=10s --timeout=3s --start-period=60s \
  CMD python -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8765/healthz', timeout=2)"
# init is idempotent (templates and indices); serve binds every interface, which it refuses
# without API keys: set KEMEM_SERVER_API_KEYS, or pass --insecure behind a loopback-only port.
CMD ["sh", "-c", "kemem-es init && exec kemem-es serve --host 0.0.0.0 --port 8765 ${KEMEM_SERVE_ARGS:-}"]
