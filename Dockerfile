# The server, from the wheel alone (no sources, no build tools in the image):
#   make dist                                   # dist/mbarrier_inspector-<version>-py3-none-any.whl
#   docker build -t mbarrier-inspector .
#   docker run -d -p 8000:8000 -v mbi-data:/data mbarrier-inspector
# Session ids are signed with a key: MBI_SESSION_KEY if set, else one made once in /data (a
# volume, so ids survive a restart or a new image; without -v, Docker still keeps an anonymous
# volume per container, but a new container gets a new key). Run as many containers as a class
# needs behind any load balancer, all with the same MBI_SESSION_KEY (any length, e.g.
# `openssl rand -hex 32`) and no sticky sessions (README: "A server for a class").
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    MBI_WORKERS=2 \
    MBI_DATA_DIR=/data

RUN useradd --create-home --uid 10001 --shell /usr/sbin/nologin inspector \
    && mkdir -p /data && chown inspector:inspector /data && chmod 700 /data

COPY dist/*.whl /tmp/wheels/
RUN pip install /tmp/wheels/*.whl && rm -rf /tmp/wheels

USER inspector
WORKDIR /home/inspector
VOLUME ["/data"]
EXPOSE 8000

HEALTHCHECK --interval=30s --timeout=5s --start-period=10s \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/api/v1/health', timeout=4)"]

# exec: the server is PID 1 and gets the container's SIGTERM.
CMD ["sh", "-c", "exec mbarrier-inspector serve --host 0.0.0.0 --port 8000 --workers \"$MBI_WORKERS\""]
