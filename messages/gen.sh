#!/usr/bin/env bash
# Regenerates messages.pb.go with Debian's protoc and the protoc-gen-go
# pinned as a tool in go.mod. Run through `go generate ./messages`.
set -euo pipefail
cd "$(dirname "$0")"
command -v protoc >/dev/null || { echo "gen.sh: protoc not found (apt-get install protobuf-compiler)" >&2; exit 1; }
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
go build -o "$bin/protoc-gen-go" google.golang.org/protobuf/cmd/protoc-gen-go
protoc --plugin=protoc-gen-go="$bin/protoc-gen-go" --go_out=. --go_opt=paths=source_relative messages.proto
