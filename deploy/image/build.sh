#!/usr/bin/env bash
# build.sh [--out DIR] [--no-cgo] — the feedmesh container image, built
# offline from this checkout: no base image is pulled, no container runs.
#
#   1. go build ./cmd/feedmesh (cgo, -tags netgo,osusergo: Go's own DNS
#      resolver and user lookup, so no NSS module is needed);
#   2. a root filesystem holding the binary, the shared libraries it loads
#      and nothing else: those `ldd` names (the C library and its loader),
#      and libjpeg-turbo's libjpeg.so.62, which the binary opens with
#      dlopen for its JPEG decoder (and what that needs); the CA bundle
#      (for object stores over HTTPS); /etc/passwd and /etc/group naming
#      the user feedmesh (65532) it runs as; /tmp; and its data dir
#      /var/lib/feedmesh, owned by that user;
#   3. deploy/image/mkimage packs it as an OCI image (one layer, files
#      owned by root but the data dir, timestamps fixed: the same inputs
#      give the same image), entrypoint `feedmesh node`.
#
# Out (default ./feedmesh-image): DIR/oci/ (an OCI image layout),
# DIR/feedmesh-oci.tar (the same as an archive: `podman load -i`,
# `skopeo copy oci-archive:DIR/feedmesh-oci.tar docker://REGISTRY/feedmesh:TAG`)
# and DIR/rootfs/ (what the layer holds).
#
# --no-cgo builds with CGO_ENABLED=0 instead: a static binary and no
# libraries at all (FROM scratch with one file), but JPEGs are decoded by
# Go's image/jpeg (libjpeg-turbo decodes 1.5x PIL's speed, image/jpeg far
# slower) and the resampling passes of the vision ops run in Go, not C
# (~669 against ~900 images/s of decode_and_crop+flip+normalize on one
# core): docs/benchmarks/current.md, Vision.
#
# Needs go, and for the cgo build gcc, ldd (libc-bin) and, for the fast
# JPEG decoder, libjpeg62-turbo (and libjpeg62-turbo-dev to compile it in);
# without libjpeg62-turbo the image still builds and says so.
set -euo pipefail
cd "$(dirname "$0")/../.."

out=feedmesh-image
cgo=1
while [ $# -gt 0 ]; do
	case "$1" in
	--out) out=$2; shift 2 ;;
	--no-cgo) cgo=0; shift ;;
	*) echo "usage: $0 [--out DIR] [--no-cgo]" >&2; exit 2 ;;
	esac
done
mkdir -p "$out"
out=$(cd "$out" && pwd)
rootfs=$out/rootfs
rm -rf "$rootfs" "$out/oci" "$out/feedmesh-oci.tar"
mkdir -p "$rootfs/usr/bin" "$rootfs/etc/ssl/certs" "$rootfs/tmp" "$rootfs/var/lib/feedmesh"

version=$(tr -d ' \n' < internal/version/VERSION)
echo "build.sh: go build ./cmd/feedmesh (CGO_ENABLED=$cgo)"
CGO_ENABLED=$cgo go build -trimpath -tags netgo,osusergo -ldflags "-s -w" -o "$rootfs/usr/bin/feedmesh" ./cmd/feedmesh

# copy_lib PATH: the library at its path in the image (symlinks resolved
# to a file of the link's name: the loader looks names up, not targets).
copy_lib() {
	local src=$1
	[ -e "$rootfs$src" ] && return 0
	mkdir -p "$rootfs$(dirname "$src")"
	cp -L "$src" "$rootfs$src"
}
# libs_of FILE: the absolute paths ldd resolves for FILE.
libs_of() {
	ldd "$1" 2>/dev/null | awk '/=> \// {print $3} /^\t\/[^ ]+ \(/ {print $1}'
}

if [ "$cgo" = 1 ]; then
	for l in $(libs_of "$rootfs/usr/bin/feedmesh"); do copy_lib "$l"; done
	# awk reads to the end (no exit): under pipefail, ldconfig killed by
	# SIGPIPE would fail the build.
	jpeg=$(ldconfig -p 2>/dev/null | awk '/libjpeg\.so\.62 .*x86-64|libjpeg\.so\.62 / && /=>/ && !found {print $NF; found=1}')
	if [ -n "$jpeg" ] && [ -e "$jpeg" ]; then
		# dlopen("libjpeg.so.62") searches the loader's default paths: keep
		# it where the build machine has it (/lib/<triplet> or /usr/lib/<triplet>).
		copy_lib "$jpeg"
		for l in $(libs_of "$jpeg"); do copy_lib "$l"; done
	else
		echo "build.sh: warning: libjpeg.so.62 not found (apt-get install libjpeg62-turbo): the image decodes JPEGs in pure Go" >&2
	fi
	# The loader's path is /lib64/ld-linux-x86-64.so.2 on amd64; Debian
	# keeps it in /usr/lib64 behind a /lib64 symlink: ldd printed the
	# path the binary names, which copy_lib kept.
fi
if [ -f /etc/ssl/certs/ca-certificates.crt ]; then
	cp /etc/ssl/certs/ca-certificates.crt "$rootfs/etc/ssl/certs/"
else
	echo "build.sh: warning: no /etc/ssl/certs/ca-certificates.crt (apt-get install ca-certificates): object stores over HTTPS will not verify" >&2
fi
cat > "$rootfs/etc/passwd" <<'P'
root:x:0:0:root:/root:/sbin/nologin
feedmesh:x:65532:65532:feedmesh:/var/lib/feedmesh:/sbin/nologin
P
cat > "$rootfs/etc/group" <<'G'
root:x:0:
feedmesh:x:65532:
G
printf 'hosts: files dns\n' > "$rootfs/etc/nsswitch.conf"
chmod 1777 "$rootfs/tmp"
chmod 0700 "$rootfs/var/lib/feedmesh"
chmod -R go-w "$rootfs/etc" "$rootfs/usr"

echo "build.sh: packing the OCI image"
go run ./deploy/image/mkimage --rootfs "$rootfs" --out "$out/oci" --archive "$out/feedmesh-oci.tar" --version "$version"
du -sh "$rootfs" | awk '{print "build.sh: root filesystem " $1}'
ls -l "$out/feedmesh-oci.tar" | awk '{print "build.sh: " $NF " " $5 " bytes"}'
