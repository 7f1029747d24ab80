# The service image: embedded-database default, bring DATABASE_URL and keys in production.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HOST=0.0.0.0 \
    PORT=7860 \
    DATA_DIR=/data

WORKDIR /app

# Build tools only for wheels that compile; removed in the same layer.
COPY pyproject.toml README.md ./
COPY bot.py main.py ./
COPY commands commands
COPY config config
COPY api api
COPY runner runner
COPY pipeline pipeline
COPY flows flows
COPY analysis analysis
COPY processors processors
COPY turns turns
COPY observers observers
COPY call call
COPY ops ops
COPY services services
COPY language language
COPY db db
COPY lib lib
COPY simulator simulator
COPY prompts prompts
COPY dashboard dashboard
# tini as PID 1: it hands SIGTERM to the supervisor (which drains every worker process)
# and reaps the processes that end under it (the database's, a dead worker's decoders).
RUN apt-get update \
    && apt-get install -y --no-install-recommends build-essential tini \
    && pip install --no-cache-dir . \
    && apt-get purge -y build-essential && apt-get autoremove -y \
    && rm -rf /var/lib/apt/lists/*

# PostgreSQL refuses to run as root: the embedded database needs an ordinary user.
RUN useradd --create-home --uid 10001 agent && mkdir -p /data && chown agent /data
USER agent
VOLUME ["/data"]
EXPOSE 7860

HEALTHCHECK --interval=30s --timeout=5s --start-period=20s \
    CMD python -c "import urllib.request,os; urllib.request.urlopen(f'http://127.0.0.1:{os.environ[\"PORT\"]}/health', timeout=4)"

# One worker process per CPU the container may use (its CPU quota counted); WORKERS=N to
# choose. Each holds its models: give the container some 400 MB per worker.
ENTRYPOINT ["/usr/bin/tini", "--"]
CMD ["python", "main.py", "serve"]
