#!/bin/sh
# Regenerates the Go code for the envd-compatible protos under api/gen.
# Needs protoc (3.21+), protoc-gen-go v1.36.11 and protoc-gen-connect-go
# v1.19.1 on PATH:
#   go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.11
#   go install connectrpc.com/connect/cmd/protoc-gen-connect-go@v1.19.1
set -eu
cd "$(dirname "$0")"
rm -rf gen/process gen/filesystem
mkdir -p gen
for p in process filesystem; do
	protoc -I proto \
		--go_out=gen --go_opt=paths=source_relative \
		--connect-go_out=gen --connect-go_opt=paths=source_relative \
		"proto/$p/$p.proto"
done
