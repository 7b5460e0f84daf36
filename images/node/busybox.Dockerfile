# podshaper.test/busybox:1 — the small shell image of the test node's pods: Debian's
# busybox-static as /bin/busybox with every applet linked in /bin (sh, df, stat, dd,
# cat, grep, ls, sleep, ...), /usr/bin/env, /etc/passwd and /etc/group with root,
# user 1000 and nobody (65534), /tmp 1777. Built by scripts/node-images.sh (context:
# images/node/). Legacy builder syntax.
ARG BASE_IMAGE=podshaper-base:bookworm

FROM ${BASE_IMAGE} AS build
RUN apt-get update -qq \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      busybox-static >/dev/null \
 && apt-get clean && rm -rf /var/lib/apt/lists/*
# The root file system, laid out here (one COPY into scratch). The applet links are
# relative (bin/sh -> busybox), which `busybox --install -s` would make absolute to
# where it ran from. The build fails if an applet the tests use is missing.
RUN set -e; o=/out; \
    mkdir -p $o/bin $o/usr/bin $o/etc $o/root $o/home/user $o/tmp $o/proc $o/sys $o/dev; \
    cp /bin/busybox $o/bin/busybox; \
    for a in $(/bin/busybox --list); do [ "$a" = busybox ] || ln -s busybox "$o/bin/$a"; done; \
    ln -s ../../bin/busybox $o/usr/bin/env; \
    for a in sh cat df stat dd grep ls sleep head tail wc awk sed id mkdir rm touch env true false test expr; do \
      [ -L "$o/bin/$a" ] || { echo "busybox-static lacks the applet $a" >&2; exit 1; }; \
    done; \
    printf '%s\n' 'root:x:0:0:root:/root:/bin/sh' 'user:x:1000:1000:user:/home/user:/bin/sh' \
      'nobody:x:65534:65534:nobody:/nonexistent:/bin/false' > $o/etc/passwd; \
    printf '%s\n' 'root:x:0:' 'user:x:1000:' 'nogroup:x:65534:' > $o/etc/group; \
    chmod 1777 $o/tmp; chmod 700 $o/root; chown 1000:1000 $o/home/user; \
    chroot $o /bin/sh -c 'ulimit -l >/dev/null && stat -f /tmp >/dev/null && dd if=/bin/busybox of=/tmp/x bs=1k count=1 2>/dev/null && rm /tmp/x'

FROM scratch
LABEL io.podshaper.images="1" org.opencontainers.image.title="podshaper.test/busybox"
COPY --from=build /out/ /
CMD ["/bin/sh"]
