# podshaper.test/torch:1 — the training image of the test node's pods: Debian's
# python3, python3-torch (CPU) and python3-numpy on podshaper-base:<release>, for
# DataLoader runs against the /dev/shm the webhook sizes. Big (about a GB); expected.
# Built by scripts/node-images.sh (context: images/node/, --network host for apt).
# Legacy builder syntax.
ARG BASE_IMAGE=podshaper-base:bookworm

FROM ${BASE_IMAGE}
LABEL io.podshaper.images="1" org.opencontainers.image.title="podshaper.test/torch"
RUN apt-get update -qq \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      python3 python3-torch python3-numpy >/dev/null \
 && apt-get clean \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/log/apt /var/log/dpkg.log \
 && python3 -c "import torch, torch.utils.data, numpy; print('torch', torch.__version__, 'numpy', numpy.__version__)"
ENV PYTHONDONTWRITEBYTECODE=1
CMD ["/bin/bash"]
