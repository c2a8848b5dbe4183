#!/usr/bin/env bash
# Builds the grpc-go interop peers into build/interop/bin/ from this
# repository's schema: the Go code is generated from proto/llmgw/v1/*.proto
# here, at build time, into a GOPATH under build/interop/ (never committed),
# and everything compiles in GOPATH mode against Debian's grpc-go and
# protobuf-go in /usr/share/gocode, since no Go module proxy is reachable.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
out="$root/build/interop"
gopath="$out/gopath"
pkg=llmgwinterop  # the import path prefix of the peers' own packages

rm -rf "$gopath/src/$pkg"
mkdir -p "$gopath/src/$pkg/gen/llmgwv1" "$out/bin"

# The schema declares no go_package: M options give each file its import
# path here, so the .proto files stay free of Go concerns.
protos=()
mopts=()
for f in "$root"/proto/llmgw/v1/*.proto; do
    rel="${f#"$root"/proto/}"
    protos+=("$rel")
    mopts+=("--go_opt=M$rel=$pkg/gen/llmgwv1" "--go-grpc_opt=M$rel=$pkg/gen/llmgwv1")
done
# The protoc of grpcio-tools (the venv's, the one `make gen` uses): Debian's
# protoc 3.21 predates options the schema uses, such as debug_redact. The Go
# plugins are Debian's.
"$root/.venv/bin/python" -m grpc_tools.protoc -I "$root/proto" \
    --plugin=protoc-gen-go="$(command -v protoc-gen-go)" \
    --plugin=protoc-gen-go-grpc="$(command -v protoc-gen-go-grpc)" \
    --go_out="$gopath/src" --go-grpc_out="$gopath/src" "${mopts[@]}" "${protos[@]}"

# The sources are copied, not linked: GOPATH mode resolves symlinked
# package directories unreliably.
for d in peer agent controlplane health; do
    cp -R "$root/interop/go/$d" "$gopath/src/$pkg/$d"
done

export GO111MODULE=off GOPATH="$gopath:/usr/share/gocode" GOFLAGS= \
       GOCACHE="$out/gocache" CGO_ENABLED=0
for cmd in agent controlplane health; do
    go build -o "$out/bin/$cmd" "$pkg/$cmd"
done
# The agent again without the gzip encoding, as most grpc-go agents are built.
go build -tags nogzip -o "$out/bin/agent-nogzip" "$pkg/agent"
go vet "$pkg/peer" "$pkg/agent" "$pkg/controlplane" "$pkg/health"
echo "interop-go: built $out/bin/agent, $out/bin/controlplane and $out/bin/health" >&2
