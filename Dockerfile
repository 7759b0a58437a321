# The server, from the wheel alone (no sources, no build tools in the image):
#   make dist                                   # dist/mbarrier_inspector-<version>-py3-none-any.whl
#   docker build -t mbarrier-inspector .
#   docker run --rm -p 8000:8000 -e MBI_SESSION_KEY="$(openssl rand -hex 32)" mbarrier-inspector
# Run as many containers as a class needs behind any load balancer, all with the same
# MBI_SESSION_KEY and no sticky sessions (README: "Deploy").
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    MBI_WORKERS=2

RUN useradd --create-home --uid 10001 --shell /usr/sbin/nologin inspector

COPY dist/*.whl /tmp/wheels/
RUN pip install /tmp/wheels/*.whl && rm -rf /tmp/wheels

USER inspector
WORKDIR /home/inspector
EXPOSE 8000

HEALTHCHECK --interval=30s --timeout=5s --start-period=10s \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/api/v1/scenarios', timeout=4)"]

# exec: the server is PID 1 and gets the container's SIGTERM.
CMD ["sh", "-c", "exec mbarrier-inspector serve --host 0.0.0.0 --port 8000 --workers \"$MBI_WORKERS\""]
