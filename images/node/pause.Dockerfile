# podshaper.test/pause:1 — the sandbox ("pause") image of the test node: /pause, a
# static binary (pause.c) that holds the pod's namespaces, reaps zombies and exits 0 on
# SIGTERM/SIGINT. Built by scripts/node-images.sh (context: images/node/, the base
# podshaper-base:<release> from scripts/images.sh --base-only). Legacy builder syntax.
ARG BASE_IMAGE=podshaper-base:bookworm

FROM ${BASE_IMAGE} AS build
RUN apt-get update -qq \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      gcc libc6-dev >/dev/null \
 && apt-get clean && rm -rf /var/lib/apt/lists/*
COPY pause.c /src/pause.c
RUN gcc -static -Os -s -Wall -Wextra -Werror -o /pause /src/pause.c \
 && /pause --version

FROM scratch
LABEL io.podshaper.images="1" org.opencontainers.image.title="podshaper.test/pause"
COPY --from=build /pause /pause
USER 65535:65535
ENTRYPOINT ["/pause"]
