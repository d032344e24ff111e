# The broker image: python:3.11-slim plus the project's runtime dependencies (no Spark, no test tools).
FROM python:3.11-slim

# A virtualenv works the same on the official image and on Debian-based stand-ins
# whose system pip refuses to install (PEP 668).
RUN python3 -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH PYTHONUNBUFFERED=1

WORKDIR /app
COPY pyproject.toml README.md ./
COPY protocol ./protocol
COPY storage ./storage
COPY coordination ./coordination
COPY broker ./broker
COPY spark_jobs ./spark_jobs
COPY config ./config
RUN pip install --no-cache-dir .

VOLUME ["/var/lib/kafka"]
EXPOSE 9092 7071
# exec form: the broker is PID 1 and gets SIGTERM directly, so `docker stop` shuts it down cleanly.
ENTRYPOINT ["python", "-m", "broker", "/app/config/server.properties"]
