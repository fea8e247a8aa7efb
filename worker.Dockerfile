# The worker image: one Indexed-Job pod runs `python -m worker` (see worker/__main__.py).
#
#   docker build -f worker.Dockerfile -t worker .                          # the harness alone
#   docker build -f worker.Dockerfile --build-arg EXTRAS=worker,demo \
#     --build-arg PACKAGES="shared adapters worker demo" -t worker-demo .   # the demo
#
# Slim on purpose: only the project's base dependencies plus the extras named in EXTRAS
# (`worker` = kvdbclient; the demo workloads add `demo` = scipy), and only the packages named in
# PACKAGES (`shared`, `adapters` and `worker`; the demo's pods import `demo` too) - no
# controller, CLI or test code, and not the local stack (`adapters/local`, which the worker never
# imports). The packages are used from source on PYTHONPATH (no wheel build), byte-compiled at
# build time so a pod's interpreter start-up stays short. cloudbuild.yaml builds both variants;
# tests/unit/deploy/test_demo_image.py checks that the demo's copies every package its pods import.

# The source tree of the image: the packages PACKAGES names, and nothing else.
FROM python:3.12-slim AS source
ARG PACKAGES="shared adapters worker"
WORKDIR /src
COPY shared/ all/shared/
COPY adapters/ all/adapters/
COPY worker/ all/worker/
COPY demo/ all/demo/
RUN mkdir app && for p in $PACKAGES; do \
      [ -d "all/$p" ] || { echo "PACKAGES names $p, which worker.Dockerfile does not copy" >&2; exit 1; }; \
      cp -r "all/$p" app/; \
    done && rm -rf app/adapters/local

FROM python:3.12-slim

ARG EXTRAS=worker

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONPATH=/app

WORKDIR /app

# Dependencies first (their own layer, rebuilt only when pyproject.toml or EXTRAS change):
# the base `dependencies` plus each extra in EXTRAS, read from pyproject.toml.
COPY pyproject.toml ./
RUN python -c "import os, tomllib; \
p = tomllib.load(open('pyproject.toml', 'rb'))['project']; \
extras = [e.strip() for e in os.environ['EXTRAS'].split(',') if e.strip()]; \
reqs = list(p.get('dependencies', [])); \
[reqs.extend(p['optional-dependencies'][e]) for e in extras]; \
print('\n'.join(r for r in reqs if not r.startswith('cave-pipeline')))" > /tmp/requirements.txt \
 && cat /tmp/requirements.txt \
 && pip install -r /tmp/requirements.txt \
 && rm /tmp/requirements.txt

COPY --from=source /src/app/ ./
RUN python -m compileall -q . \
 && useradd --create-home --uid 10001 --user-group worker

# Numeric UID so a pod's `runAsNonRoot: true` can verify it without a passwd lookup. HOME is
# where the pods mount the Secret (HOME/.cloudvolume/secrets: shared/model/worker_contract.py
# WORKER_HOME); the user cannot enter /root, where PyChunkedGraph images (root) get it.
USER 10001
ENV HOME=/home/worker

ENTRYPOINT ["python", "-m", "worker"]
