#!/usr/bin/env bash
# Installs the Go toolchain, grpc-go, protobuf-go and the protoc plugins from
# Debian, only when something is missing: no Go module proxy is reachable, so
# the peers build in GOPATH mode against Debian's /usr/share/gocode. CI runs
# this as root; elsewhere it needs sudo (or the packages installed by hand).
set -euo pipefail

# golang-github-golang-protobuf-1-5-dev: Debian's grpc-go accepts either
# github.com/golang/protobuf 1.3 or 1.5, and apt picks 1.3, whose codec
# cannot marshal the messages protoc-gen-go 1.28 generates (it panics on the
# first oneof); 1.5 delegates to protobuf-go, as every current grpc-go does.
packages=(golang-go golang-google-grpc-dev golang-google-protobuf-dev
          golang-github-golang-protobuf-1-5-dev
          protoc-gen-go protoc-gen-go-grpc protobuf-compiler)

missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' \
        || missing+=("$p")
done
command -v go >/dev/null 2>&1 || { [[ " ${missing[*]} " == *" golang-go "* ]] || missing+=(golang-go); }

if [ ${#missing[@]} -eq 0 ]; then
    exit 0
fi

echo "interop-go: installing ${missing[*]}" >&2
sudo=()
if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null 2>&1 || {
        echo "interop-go: missing packages (${missing[*]}) and not root; install them with apt-get" >&2
        exit 1
    }
    sudo=(sudo)
fi
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
