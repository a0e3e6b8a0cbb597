// Package api holds forkbox's wire contracts: the envd-compatible protos
// under proto/ and the Go code generated from them under gen/.
package api

//go:generate sh gen.sh
