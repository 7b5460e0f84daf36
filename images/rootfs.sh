#!/bin/bash
# rootfs.sh BINARY OUTDIR: lays out a minimal root file system for one binary (dynamically
# linked, or static), for a FROM scratch image. Runs in the build stage of images/Dockerfile.
#   /usr/local/bin/NAME             the binary, stripped
#   every library `ldd` lists       copied (dereferenced) to the path ldd names, so the
#                                   ELF interpreter (/lib64/ld-linux-x86-64.so.2) and
#                                   the loader's system search path find them; /lib and
#                                   /lib64 are the same merged-/usr symlinks as Debian's
#   /etc/passwd, group              root and nonroot (65532:65532, home /home/nonroot)
#   /etc/nsswitch.conf              files, then DNS
#   /etc/ld.so.conf(.d)             for the ldconfig the NVIDIA container runtime runs
#   /etc/os-release                 so that scanners know the libraries' distribution
#   /tmp                            1777 (the operator writes its /metrics cert there;
#                                   the manifests mount an emptyDir over it)
set -euo pipefail
bin=$1 out=$2
name=$(basename "$bin")
rm -rf "$out"
mkdir -p "$out/usr/local/bin" "$out/etc" "$out/tmp" "$out/home/nonroot"
chmod 1777 "$out/tmp"
chown 65532:65532 "$out/home/nonroot"
chmod 0700 "$out/home/nonroot"
# Merged /usr: mirror the build root's top-level library symlinks (lib -> usr/lib, ...).
for d in lib lib32 lib64 libx32; do
  if [[ -L /$d ]]; then
    mkdir -p "$out/$(readlink -f "/$d")"
    ln -s "$(readlink "/$d")" "$out/$d"
  fi
done

strip --strip-unneeded -o "$out/usr/local/bin/$name" "$bin"
chmod 0755 "$out/usr/local/bin/$name"

# A static binary (podshaper-shm, Go) has no libraries: ldd says so and exits 1.
deps=$(ldd "$bin" 2>&1) || { grep -q 'not a dynamic executable' <<<"$deps" && deps=; } ||
  { echo "rootfs: ldd $name: $deps" >&2; exit 1; }
if grep -q 'not found' <<<"$deps"; then
  echo "rootfs: $name: unresolved libraries:" >&2
  grep 'not found' <<<"$deps" >&2
  exit 1
fi
# Lines: "libfoo.so.1 => /lib/.../libfoo.so.1 (0x...)", "/lib64/ld-linux-x86-64.so.2 (0x...)",
# "linux-vdso.so.1 (0x...)" (the kernel's, nothing to copy).
for lib in $(awk '{for (i = 1; i <= NF; i++) if ($i ~ /^\//) print $i}' <<<"$deps" | sort -u); do
  mkdir -p "$out$(dirname "$lib")"
  cp -L "$lib" "$out$lib"
done

cat >"$out/etc/passwd" <<'PASSWD'
root:x:0:0:root:/root:/sbin/nologin
nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin
PASSWD
cat >"$out/etc/group" <<'GROUP'
root:x:0:
nonroot:x:65532:
GROUP
printf 'passwd: files\ngroup: files\nhosts: files dns\n' >"$out/etc/nsswitch.conf"
cp /etc/ld.so.conf "$out/etc/"
cp -r /etc/ld.so.conf.d "$out/etc/"
mkdir -p "$out/usr/lib"
cp -L /etc/os-release "$out/usr/lib/os-release"
ln -s ../usr/lib/os-release "$out/etc/os-release"

echo "rootfs: $name: $(find "$out" -type f | wc -l) files, $(du -sh "$out" | cut -f1)"
